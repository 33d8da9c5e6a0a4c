"""hygiene.*: what an image must not carry and how it must run, against its contract (docs/contract.md).

The contract is the image's /etc/torchyard/contract.json (builder/render/contract.py writes it): the top-level
entries of / and the files below /tmp, /var/tmp, /root and /home it allows, its entrypoint and interpreters, the
caches it must not hold. `--accept FILE` adds the exceptions a team accepted (the host reads its allowlist, with
expiry dates, and passes the current entries: builder/pipeline/hygiene_allowlist.py). These checks run first, so
what the other checks write into /tmp is not theirs to find. hygiene.uid needs a container of its own (another
user, a read-only root): the host runs it (builder/pipeline/uid_run.py) and puts its result in this one's place.
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import shutil
import subprocess
import sys
from typing import Any

from .framework import Context, Failed, Skipped, check

CONTRACT = "/etc/torchyard/contract.json"
ROOT = "/"  # the image's root (tests point it at a folder of their own)
WATCHED = ("tmp", "var/tmp", "root", "home")
NO_CONTRACT = "not checked: no contract in the image (/etc/torchyard/contract.json)"
HOST_RUN = "run by the host: torchyard smoke starts it as UID 1010 with group 0, then read-only with a tmpfs /tmp"
SHOWN = 5  # paths named in a message; the rest are counted
# A foreign image's caches (no contract): the list of contract version 1 (builder/render/contract.py's CACHES)
CACHES = (
    "/root/.cache/pip/*",
    "/root/.cache/uv/*",
    "/home/*/.cache/pip/*",
    "/home/*/.cache/uv/*",
    "/var/lib/apt/lists/*",
    "/var/cache/apt/archives/*.deb",
    "/var/cache/apt/*.bin",
)
APT_OWN = ("lock", "partial")  # apt's own entries of its lists folder
INTERPRETERS = ("python", "python3")


def read_contract() -> dict[str, Any] | None:
    try:
        with open(_real(CONTRACT), encoding="utf-8") as handle:
            return dict(json.load(handle))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise Failed(f"{CONTRACT} cannot be read: {exc}") from None


def _real(path: str) -> str:
    """Where an image path is on this filesystem (ROOT + path)."""
    return os.path.join(ROOT, path.lstrip("/"))


def _image(real: str) -> str:
    relative = os.path.relpath(real, ROOT).replace(os.sep, "/")
    return "/" if relative == "." else "/" + relative


def mount_points() -> set[str]:
    """The container's mount points (a volume, the suite's own /torchyard-out): not the image's to answer for."""
    found = set()
    try:
        with open(_real("/proc/self/mountinfo"), encoding="utf-8") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) > 4:
                    found.add(fields[4].replace("\\040", " "))
    except OSError:
        pass
    return found - {"/"}


def _matches(path: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)


def _files_below(top: str, mounts: set[str], unread: list[str]) -> list[str]:
    """Every file (anything but a folder) below the image path `top`, skipping mount points."""

    def refused(error: OSError) -> None:
        if not isinstance(error, FileNotFoundError):  # a folder the image lacks holds nothing stray
            unread.append(_image(str(error.filename)))

    found = []
    for folder, dirs, names in os.walk(_real(top), onerror=refused):
        links = [d for d in dirs if os.path.islink(os.path.join(folder, d))]
        dirs[:] = [d for d in dirs if d not in links and _image(os.path.join(folder, d)) not in mounts]
        found += [_image(os.path.join(folder, name)) for name in names + links]
    return [path for path in found if path not in mounts]


def stray_files(contract: dict[str, Any], accepted: list[str]) -> tuple[list[str], list[str]]:
    """(what the contract does not allow, the folders that could not be read)."""
    mounts = mount_points()
    unread: list[str] = []
    allow = dict(contract.get("allow") or {})
    top_allowed = [str(p) for p in allow.get("top_level") or []]
    tops = [f"/{name}" for name in sorted(os.listdir(ROOT)) if not _matches(name, top_allowed)]
    stray = [path for path in tops if path not in mounts]
    files_allowed = [str(p) for p in allow.get("files") or []]
    for top in WATCHED:
        stray += [path for path in _files_below(top, mounts, unread) if not _matches(path, files_allowed)]
    return [path for path in stray if not _matches(path, accepted)], unread


def _listed(paths: list[str]) -> str:
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(paths[:SHOWN]) + more


@check("hygiene.stray_files", timeout=120.0)
def hygiene_stray_files(ctx: Context) -> str:
    contract = read_contract()
    if contract is None:
        raise Skipped(NO_CONTRACT)
    stray, unread = stray_files(contract, ctx.accepted.get("hygiene.stray_files", []))
    if stray:
        raise Failed(f"{len(stray)} path(s) outside the contract's allowlist: {_listed(stray)}")
    if unread:
        who = f"UID {os.getuid()}" if hasattr(os, "getuid") else "this user"
        raise Skipped(f"not checked: {_listed(sorted(set(unread)))} not readable as {who}; nothing stray elsewhere")
    return f"nothing in / outside contract {contract.get('contract')}'s allowlist ({', '.join(WATCHED)} read)"


def _run(argv: list[str], timeout: float = 60.0) -> tuple[int, str]:
    """The checks' one way to start a process: (exit code, stdout and stderr); 127: not found or not runnable."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except OSError as exc:
        return 127, str(exc)
    except subprocess.TimeoutExpired:
        return 124, f"{argv[0]} did not finish within {timeout:.0f} s"
    return done.returncode, (done.stdout + done.stderr).strip()


def broken_requirements(output: str) -> list[tuple[str, str]]:
    """pip check's findings as (distribution, line); its warnings are not findings."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    found = [line for line in lines if not line.startswith(("No broken", "WARNING", "DEPRECATION"))]
    return [(_normalized(line.split()[0]), line) for line in found]


def _normalized(name: str) -> str:
    return "-".join(part for part in name.lower().replace("_", "-").replace(".", "-").split("-") if part)


@check("hygiene.pip_check", timeout=120.0)
def hygiene_pip_check(ctx: Context) -> str:
    code, output = _run([sys.executable, "-m", "pip", "check"], 100.0 * ctx.timeout_scale)
    if "No module named pip" in output:
        raise Skipped(f"not checked: no pip in {sys.executable}")
    accepted = {_normalized(name) for name in ctx.accepted.get("hygiene.pip_check", [])}
    found = broken_requirements(output)
    broken = [line for name, line in found if name not in accepted]
    if broken:
        raise Failed(f"pip check: {len(broken)} broken requirement(s): {'; '.join(broken[:SHOWN])}")
    if code != 0 and not found:
        raise Failed(f"pip check exited {code}: {output[-300:]}")
    kept = f" ({len(found)} accepted: {', '.join(sorted({name for name, _ in found}))})" if found else ""
    return f"pip check: no broken requirements{kept}"


def _version(argv: list[str]) -> str:
    code, output = _run([*argv, "--version"])
    if code != 0:
        raise Failed(f"`{' '.join(argv)} --version` exited {code}: {output[-200:]}")
    return output.splitlines()[0] if output else "(no output)"


@check("hygiene.entrypoint")
def hygiene_entrypoint(ctx: Context) -> str:
    contract = read_contract()
    said = []
    if contract is not None and contract.get("entrypoint"):
        binary = str(contract["entrypoint"][0])
        if not os.access(binary, os.X_OK):
            raise Failed(f"the entrypoint {binary} is not an executable file")
        said.append(f"{binary}: {_version([binary])}")
    for name in INTERPRETERS if contract is None else contract.get("interpreters", INTERPRETERS):
        found = shutil.which(str(name))
        if found is None:
            raise Failed(f"no {name} on PATH ({os.environ.get('PATH', '')})")
        said.append(f"{name} -> {found}: {_version([found])}")
    entry = "" if contract is not None else "; entrypoint not checked: no contract in the image"
    return "; ".join(said) + entry


def caches(patterns: list[str], accepted: list[str]) -> list[str]:
    """What a package manager left: every path a pattern matches (a folder: only when something is in it)."""
    found = []
    for pattern in patterns:
        for real in sorted(glob.glob(_real(pattern))):
            path = _image(real)
            if os.path.basename(path) in APT_OWN and "/apt/lists/" in path:
                continue
            if os.path.isdir(real) and not any(files for _, _, files in os.walk(real)):
                continue
            found.append(path)
    return [path for path in found if not _matches(path, accepted)]


@check("hygiene.caches", timeout=120.0)
def hygiene_caches(ctx: Context) -> str:
    contract = read_contract()
    patterns = [str(p) for p in (contract or {}).get("caches") or CACHES]
    left = caches(patterns, ctx.accepted.get("hygiene.caches", []))
    if left:
        raise Failed(f"{len(left)} cache path(s) left in the image: {_listed(left)}")
    return "no pip or uv cache, no apt lists or downloaded packages"


@check("hygiene.uid", timeout=10.0)
def hygiene_uid(ctx: Context) -> str:
    raise Skipped(HOST_RUN)
