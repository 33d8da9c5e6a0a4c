"""What a combination's build installs on top of the torch venv (--pip, --requirements), decided once for the
spec: the files the build context carries, the install commands' arguments, the local sources bind-mounted for
them, each requirement checked against the image's pins where its marker holds.

A lock (uv.lock, pylock.toml) is such a hashed file; its packages the image already holds (torch, nvidia-*) are
checked against the pins and written as comments, not installed again.

Plain --pip requirements go into the RUN line (checked like every other flag); a requirements file's lines and the
--pip values that name a path or URL go into files of the build context, so a space or a marker is only text.
Hash-checking (a --hash anywhere, or --require-hashes) is all or nothing in pip and uv: the file is installed by a
command of its own with --require-hashes, the --pip additions by a second one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builder.core.errors import RenderError
from builder.core.kinds import Installer
from builder.render import context as ctx
from builder.render import pins
from builder.render.options import RenderOptions
from builder.render.reqtypes import Entry, LocalSource, Requirements
from builder.render.requirements import is_source, pip_sources
from builder.resolve.combos import Combination

IMAGE_DIR = "/opt/torchyard"  # where the files are copied (kept in the image: they name what was asked)
FILE = "requirements.txt"  # --requirements, flattened
CONSTRAINTS = "requirements-constraints.txt"  # its -c files' lines
PIP_FILE = "requirements-pip.txt"  # the --pip values that name a path or URL


@dataclass(frozen=True, kw_only=True)
class Additions:
    files: tuple[tuple[str, str], ...] = ()  # (name in the build context and in IMAGE_DIR, text)
    installs: tuple[str, ...] = ()  # each install command's arguments after its `-c constraints.txt`
    sources: tuple[LocalSource, ...] = ()  # copied into the context (req/...), bind-mounted for the install

    def __bool__(self) -> bool:
        return bool(self.installs)


def additions(c: Combination, options: RenderOptions, cwd: Path) -> Additions:
    reqs = options.requirements
    plain = tuple(ctx.unpinned(c, "--pip", p) for p in options.extra_pip if not is_source(p))
    named = pip_sources(options.extra_pip, cwd)
    entries = (reqs.entries + reqs.constraints if reqs else ()) + named
    _check_pins(c, entries + (reqs.base if reqs else ()))
    files = _files(reqs, named)
    hashed = reqs is not None and _hash_checked(reqs)
    file_args = _file_args(reqs, hashed) if reqs and (reqs.entries or reqs.constraints or not reqs.base) else ""
    pip_args = (f" -r {IMAGE_DIR}/{PIP_FILE}" if named else "") + "".join(f" '{p}'" for p in plain)
    both = _global_args(reqs, options.installer) if reqs else ""  # a file's options are the whole install's
    installs = (file_args + both, pip_args and pip_args + both) if hashed else (file_args + pip_args + both,)
    sources = (reqs.wheel_folders if reqs else ()) + tuple(e.source for e in entries if e.source is not None)
    return Additions(files=files, installs=tuple(a for a in installs if a), sources=sources)


def _check_pins(c: Combination, entries: tuple[Entry, ...]) -> None:
    """Today's one line where a requirement contradicts a pin of the image (where its marker holds there)."""
    env = pins.environment(c)
    for e in entries:
        where = e.where if e.where == "--pip" else f"--requirements {e.where}"
        if e.name and e.specifier and pins.holds(e.marker, env, where):
            pins.check_unpinned(c, where, e.line, e.name, e.specifier)


def _files(reqs: Requirements | None, named: tuple[Entry, ...]) -> tuple[tuple[str, str], ...]:
    found = []
    if reqs is not None:  # the file's name only: where a checkout lies is neither the image's content nor its business
        name = Path(reqs.path).name
        base = [f"# the image's own, checked against its pins, not installed again: {e.line}" for e in reqs.base]
        found.append((FILE, _text(f"--requirements {name}", reqs.entries, base)))
        if reqs.constraints:
            found.append((CONSTRAINTS, _text(f"the -c files of --requirements {name}", reqs.constraints)))
    if named:
        found.append((PIP_FILE, _text("--pip", named)))
    return tuple(found)


def _text(what: str, entries: tuple[Entry, ...], notes: list[str] | None = None) -> str:
    lines = [f"# {what}, as torchyard read it (index options are in the build's pip settings, a secret)"]
    return "\n".join(lines + (notes or []) + [e.text() for e in entries]) + "\n"


def _hash_checked(reqs: Requirements) -> bool:
    """Whether pip installs the file in hash-checking mode; then every requirement must be pinned and hashed,
    which pip would find out only in the build."""
    if not (reqs.require_hashes or any(e.hashes for e in reqs.entries)):
        return False
    for e in reqs.entries:
        if e.kind in ("path", "git") or not e.hashes or (e.kind == "index" and not e.exact):
            raise RenderError(
                f"--requirements {e.where}: {e.line!r}: hash-checking mode (a --hash in the file, or "
                "--require-hashes) installs only requirements pinned with == and given a --hash; pin and hash it"
            )
    return True


def _file_args(reqs: Requirements, hashed: bool) -> str:
    args = [f"-r {IMAGE_DIR}/{FILE}"]
    args += [f"-c {IMAGE_DIR}/{CONSTRAINTS}"] if reqs.constraints else []
    args += ["--require-hashes"] if hashed else []
    return "".join(f" {a}" for a in args)


def _global_args(reqs: Requirements, installer: Installer) -> str:
    """The file's --no-index, local --find-links folders and --pre: pip applies them to the whole install."""
    args = ["--no-index"] if reqs.no_index else []
    args += [f"--find-links {s.image_path}" for s in reqs.wheel_folders]
    if reqs.pre:
        args.append("--prerelease allow" if installer is Installer.UV else "--pre")
    return "".join(f" {a}" for a in args)
