"""The image contract (docs/contract.md): what every torchyard image promises, one JSON file per flavor.

This module is the one source of truth: the build writes `contract(spec, flavor)` into the image at
/etc/torchyard/contract.json (builder/pipeline/plan.py's context files, templates/partials/macros.j2's
stage_settings), the smoke suite's `hygiene.*` checks read it there (builder/smoke/checks_hygiene.py), and
tests/unit/test_contract.py checks docs/contract.md's tables against it. A flavor extends the allowlist here
(the notebook's home), never in the checks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from builder.core.kinds import Flavor
from builder.render import notebook
from builder.render.spec import ImageSpec

VERSION = 1  # raise it when a promise changes; the checks read the version they were written for
PATH = "/etc/torchyard/contract.json"
CONTEXT_FILE = "contract-{flavor}.json"  # in the build context, one per flavor
ENTRYPOINT = ("/usr/bin/tini", "--")
INTERPRETERS = ("python", "python3")
# A read-only container's /tmp: exec, because torch.compile loads the code it compiles from /tmp (Inductor's
# cache, /tmp/torchinductor_<user>); docker mounts a tmpfs noexec unless told otherwise.
TMPFS = "/tmp:exec"
PROBE_UID = 1010  # hygiene.uid's user: a UID no image names, as OpenShift gives one
# The license listing: each Debian package and Python distribution with its license or "not recorded", written in
# each final stage by the inventory script (a context file, bind-mounted: it stays out of the image).
LICENSES = "/etc/torchyard/licenses.json"
LICENSES_SCRIPT = "inventory.py"  # builder/image/inventory.py, run as `python -B inventory.py --licenses PATH`


@dataclass(frozen=True)
class Allowed:
    """A path (an fnmatch pattern: `*` also matches `/`) that may exist where the checks look, and why."""

    pattern: str
    why: str


# The top level of /: the Filesystem Hierarchy Standard's folders (Debian and Ubuntu merge /bin, /lib, /sbin into
# /usr as links), /workspace (the working folder), docker's own marker and nvidia/cuda images' license notice.
FHS = ("bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt", "opt", "proc", "root",
       "run", "sbin", "srv", "sys", "tmp", "usr", "var")  # fmt: skip
TOP_LEVEL = (
    Allowed(".dockerenv", "docker creates it in every container"),
    Allowed("NGC-DL-CONTAINER-LICENSE", "nvidia/cuda base images' license notice"),
    *(Allowed(name, "the Filesystem Hierarchy Standard") for name in FHS),
    Allowed("workspace", "the images' working folder (WORKDIR)"),
)
# Files below /tmp, /var/tmp, /root and /home (folders themselves are not files: an empty one is no stray file).
FILES = (
    Allowed("/root/.bashrc", "the base image's shell start-up files"),
    Allowed("/root/.profile", "the base image's shell start-up files"),
    Allowed("/home/*/.bashrc", "useradd's skeleton (/etc/skel) in a user's home"),
    Allowed("/home/*/.bash_logout", "useradd's skeleton (/etc/skel) in a user's home"),
    Allowed("/home/*/.profile", "useradd's skeleton (/etc/skel) in a user's home"),
)
NOTEBOOK_FILES = (
    Allowed(f"{notebook.WORK}/*", "the notebook user's work folder"),
    Allowed(f"{notebook.HOME}/.local/share/jupyter/*", "Jupyter's runtime and data files"),
    Allowed(f"{notebook.HOME}/.jupyter/*", "Jupyter's configuration"),
    Allowed(f"{notebook.HOME}/.ipython/*", "IPython's profile"),
)
# What a package manager leaves that an image must not carry (hygiene.caches); `lock` and `partial` are apt's own.
CACHES = (
    Allowed("/root/.cache/pip/*", "pip's cache"),
    Allowed("/root/.cache/uv/*", "uv's cache"),
    Allowed("/home/*/.cache/pip/*", "pip's cache"),
    Allowed("/home/*/.cache/uv/*", "uv's cache"),
    Allowed("/var/lib/apt/lists/*", "apt's package lists (but lock and partial/)"),
    Allowed("/var/cache/apt/archives/*.deb", "apt's downloaded packages"),
    Allowed("/var/cache/apt/*.bin", "apt's package caches"),
)


def contract(spec: ImageSpec, flavor: Flavor) -> dict[str, Any]:
    """The contract of one flavor of the image, as /etc/torchyard/contract.json holds it."""
    return {
        "contract": VERSION,
        "flavor": flavor.value,
        "user": _user(spec, flavor),
        "any_uid": _any_uid(flavor),
        "entrypoint": list(ENTRYPOINT),
        "cmd": ["start-notebook.sh"] if flavor is Flavor.NOTEBOOK else ["python"],
        "interpreters": list(INTERPRETERS),
        "environment": sorted({"PATH", "VIRTUAL_ENV", "PIP_CONSTRAINT", "UV_CONSTRAINT", *_env_names(spec, flavor)}),
        "labels": ["io.torchyard.*", "org.opencontainers.image.*"],
        "licenses": LICENSES,
        "allow": {
            "top_level": [a.pattern for a in TOP_LEVEL],
            "files": [a.pattern for a in files(flavor)],
        },
        "caches": [a.pattern for a in CACHES],
    }


def contract_json(spec: ImageSpec, flavor: Flavor) -> bytes:
    return (json.dumps(contract(spec, flavor), indent=2, sort_keys=True) + "\n").encode()


def files(flavor: Flavor) -> tuple[Allowed, ...]:
    """The files a flavor may hold below /tmp, /var/tmp, /root and /home: the base list and its own."""
    return FILES + (NOTEBOOK_FILES if flavor is Flavor.NOTEBOOK else ())


def _user(spec: ImageSpec, flavor: Flavor) -> dict[str, Any]:
    """Who the image runs as by default, and its HOME."""
    if flavor is Flavor.NOTEBOOK:
        return {"name": notebook.NB_USER, "uid": notebook.NB_UID, "gid": notebook.NB_GID, "home": notebook.HOME}
    if spec.user is not None:
        return {"name": spec.user.name, "uid": spec.user.uid, "gid": spec.user.uid, "home": f"/home/{spec.user.name}"}
    return {"name": "root", "uid": 0, "gid": 0, "home": "/root"}


def _any_uid(flavor: Flavor) -> dict[str, Any]:
    """How the image runs as a UID it does not name (OpenShift's way): the group, the HOME to give it, and the
    folders to mount a tmpfs on with --read-only. Docker gives such a UID HOME=/, which it cannot write: the
    runtime images expect HOME=/tmp (as `torchyard run` sets it for your UID:GID); the notebook keeps its group-writable
    home (docker-stacks': group users, 100)."""
    if flavor is Flavor.NOTEBOOK:
        # the home's tmpfs must belong to the UID: docker fills a tmpfs with the image folder's contents and mode
        # (root's, 2775), whatever mode= says; `uid=UID,gid=GID` is added for the UID that runs (uid_run.py)
        return {"group": notebook.NB_GID, "home": notebook.HOME, "tmpfs": [TMPFS, notebook.HOME]}
    return {"group": 0, "home": "/tmp", "tmpfs": [TMPFS]}


def _env_names(spec: ImageSpec, flavor: Flavor) -> list[str]:
    notebook_env = ["NB_USER", "NB_UID", "NB_GID", "HOME", "SHELL", "JUPYTER_PORT"] if flavor is Flavor.NOTEBOOK else []
    return [key for key, _ in spec.env(flavor)] + notebook_env
