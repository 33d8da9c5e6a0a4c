"""`torchyard init`: a torchyard.toml (and its torchyard.lock) for this machine, from doctor's answer."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import click

from builder.cli.options import matrix_of
from builder.cli.request import takes
from builder.core.errors import NoMatchError, UsageError
from builder.core.kinds import Strategy
from builder.host.doctor import DEFAULT_REPO, Diagnosis, diagnose
from builder.host.probe import probe
from builder.project.config import FILE
from builder.project.find import lock_of
from builder.project.lockfile import write_project_lock
from builder.project.paths import own_file, replace_file
from builder.project.settle import lock_for, open_project
from builder.project.starter import project_name, starter_text
from builder.resolve.query import RawQuery

NOT_ASKED = "the container runtime (not asked)"  # init reads no engine: nothing to say about it


@dataclass(frozen=True, kw_only=True)
class InitFlags:
    project: str | None
    force: bool
    torch_spec: str | None
    python_spec: str | None
    os_name: str | None


@click.command("init")
@click.option("--project", metavar="PATH", help="The project folder to write torchyard.toml in (default: this one).")
@click.option("--force", is_flag=True, help="Replace a torchyard.toml (and torchyard.lock) that is there.")
@click.option("--torch", "torch_spec", metavar="SPEC", help="Only torch releases matching this (as doctor --torch).")
@click.option("--python", "python_spec", metavar="SPEC", help="Only this Python (3.13).")
@click.option("--os", "os_name", metavar="NAME", help="Only this OS base (debian13, ubuntu24.04 ...).")
@click.pass_context
@takes(InitFlags)
def init_cmd(ctx: click.Context, flags: InitFlags) -> None:
    """Write torchyard.toml for this machine from doctor's answer (commented), and torchyard.lock beside it."""
    folder = _folder(flags.project)
    file, lock = folder / FILE, lock_of(folder / FILE)
    there = [p.name for p in (file, lock) if p.exists() or p.is_symlink()]
    if there and not flags.force:
        raise UsageError(f"{folder}: {' and '.join(there)} already there; --force replaces {_them(there)}")
    for path in (file, lock):
        own_file(path)  # a link out of the folder is refused before anything is read or written
    m = matrix_of(ctx)
    host = probe(m)
    d = diagnose(m, host, None, RawQuery(torch=flags.torch_spec, python=flags.python_spec, os=flags.os_name),
                 DEFAULT_REPO)  # fmt: skip
    if d.recommended is None:
        reasons = "; ".join(p.message for p in d.problems) or "no combination fits"
        raise NoMatchError(f"init: no image runs on this machine: {reasons} (torchyard doctor says more)")
    c = d.recommended.result.combo
    why = _why(d)
    click.echo(f"this machine: {host.describe()}")
    click.echo(f"chose {c.id}: doctor's best image here (its build: {d.recommended.build})")
    for line in why:
        click.echo(f"  {line}")
    replace_file(file, starter_text(c, project_name(folder.name), host.describe(), why))
    project = open_project(m, file, re_resolve=True)  # the file as written, read back as every command reads it
    write_project_lock(lock, lock_for(m, project.config, c, host.describe(), Strategy.WHEELS))
    here = folder == Path.cwd().absolute()
    build = shlex.join(["torchyard", "build", *([] if here else ["--project", str(folder)])])
    click.echo(f"wrote {file} and {lock.name}; build it: {build}")


def _folder(text: str | None) -> Path:
    folder = Path(text).absolute() if text is not None else Path.cwd().absolute()
    if text is not None and not text.strip():
        raise UsageError("--project: empty; give a folder")
    if not folder.is_dir():
        raise UsageError(f"--project {text}: not a folder")
    return folder


def _them(there: list[str]) -> str:
    return "them" if len(there) > 1 else "it"


def _why(d: Diagnosis) -> list[str]:
    """doctor's problems and what it could not check: why this combination (a CPU image without a GPU)."""
    lines = [f"{p.check}: {p.message}" for p in d.problems if p.check != "docker"]
    return lines + [f"could not check: {u}" for u in d.unchecked if u != NOT_ASKED]
