"""What `--requirements` and `--pip` hold once read: requirements (each with the file and line it came from)
and the local sources they name.

Read once, at the edge (builder/render/requirements.py); the spec (builder/render/additions.py) decides from
these what a combination's build installs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from builder.render.network import Indexes

REQ_CONTEXT = "req"  # the folder of the build context the local sources are copied to
REQ_MOUNT = "/tmp/torchyard-req"  # where the install sees them (a bind mount: no layer holds them)

Kind = Literal["index", "url", "git", "path"]
SourceKind = Literal["project", "archive", "wheels"]


@dataclass(frozen=True, kw_only=True)
class LocalSource:
    """A project folder, a wheel or sdist, or a folder of wheels (--find-links) on this machine that a
    requirement names: copied into the build context by the checked walk --extension uses (links out of the
    folder refused, size limits), and bind-mounted for the install only."""

    host: str  # the absolute path here
    context: str  # its path in the build context: req/01-myproj, req/02/foo-1.0-py3-none-any.whl
    kind: SourceKind
    flag: str  # what named it, for the walk's messages: --pip, --requirements reqs.txt:3

    @property
    def image_path(self) -> str:
        return f"{REQ_MOUNT}/{self.context.removeprefix(REQ_CONTEXT + '/')}"


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One requirement, as it will be written into the build's requirements file."""

    where: str  # reqs.txt:3, or --pip
    line: str  # the requirement without its hashes (a local source as its path in the build)
    name: str | None  # canonical; None for a URL or path that names no project
    specifier: str = ""  # "" when none
    marker: str | None = None
    hashes: tuple[str, ...] = ()  # sha256:hex ...
    kind: Kind = "index"
    source: LocalSource | None = None

    def text(self) -> str:
        return self.line + "".join(f" --hash={h}" for h in self.hashes)

    @property
    def exact(self) -> bool:
        """Pinned to one version (==X without a wildcard, or ===X), as hash-checking asks."""
        spec = self.specifier
        return (spec.startswith("==") and "," not in spec and "*" not in spec) or spec.startswith("===")


@dataclass(frozen=True, kw_only=True)
class Requirements:
    """--requirements FILE, read: a pip requirements file with its includes (-r, -c) flattened, or a lock (uv.lock,
    pylock.toml) as the hashed requirements set it pins."""

    path: str  # as given
    entries: tuple[Entry, ...] = ()
    constraints: tuple[Entry, ...] = ()  # the -c files' lines
    indexes: Indexes | None = None  # moved to the build's index settings (a secret), out of the file
    wheel_folders: tuple[LocalSource, ...] = ()  # local --find-links folders
    no_index: bool = False
    pre: bool = False
    require_hashes: bool = False  # --require-hashes in the file: every requirement needs a hash
    base: tuple[Entry, ...] = ()  # a lock's packages the image holds (torch, nvidia-*): checked, not installed

    def fingerprint(self) -> str:
        """What the image gets from the file, for the tags' extras id: the requirements and their options, not
        the index settings (network settings are not part of the tags, and they may hold credentials)."""
        lines = [e.text() for e in self.entries] + [f"-c {e.text()}" for e in self.constraints]
        lines += [f"--find-links {s.context}" for s in self.wheel_folders]
        lines += ["--no-index"] * self.no_index + ["--pre"] * self.pre + ["--require-hashes"] * self.require_hashes
        return json.dumps(lines)
