"""torchyard.toml and torchyard.lock as render, build, run and doctor read them, in one place (docs/project.md).

In a project (the nearest torchyard.toml from the current folder upward, or `--project PATH`) the file chooses:
the lock beside it decides the combination on every machine (the machine is not read for the choice), else the
file's exact `torch.id`, else the file is resolved as flags would be (render and build read this machine unless
--any-host) and render and build write the lock. A combination flag (--torch, --variant, --cuda, --python, --os,
--platform, --arch) may confirm that choice; one that contradicts it is refused in one line (exit 2). --driver and
--gpu still say where the image must run (checked as usual); --target wins over the file's flavor; --pip adds to
the file's; `--no-project` ignores the file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from builder.core.archs import parse_arch
from builder.core.errors import UsageError
from builder.core.kinds import Strategy
from builder.matrix.model import Matrix
from builder.project.check import pinned, wish_of
from builder.project.find import find_project, given_project
from builder.project.lockfile import write_project_lock
from builder.project.read import shown
from builder.project.settle import RE_RESOLVE, Project, lock_for, open_project, pinned_bases
from builder.render.options import RenderOptions
from builder.render.pylock import is_pylock
from builder.resolve.combos import Combination
from builder.resolve.query import RawQuery, parse_query, torch_build

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = (
    click.option(
        "--project",
        metavar="PATH",
        help="The project: a folder with torchyard.toml (default: the nearest one from here upward).",
    ),
    click.option("--no-project", is_flag=True, help="Ignore torchyard.toml: the flags alone choose."),
)
re_resolve_option = click.option(
    "--re-resolve", is_flag=True, help="Resolve torchyard.toml again and rewrite torchyard.lock beside it."
)


def project_options(func: F) -> F:
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def project_of(m: Matrix, project: str | None, no_project: bool, *, re_resolve: bool = False) -> Project | None:
    """The project the command runs in (None: none, or --no-project), its file and lock checked."""
    if no_project:
        for flag, given in (("--project", project is not None), ("--re-resolve", re_resolve)):
            if given:
                raise UsageError(f"{flag} and --no-project: give one of them")
        return None
    file = given_project(project) if project is not None else find_project(Path.cwd())
    if file is None and re_resolve:
        raise UsageError(
            "--re-resolve: no torchyard.toml here or above (torchyard init writes one, --project names one)"
        )
    return None if file is None else open_project(m, file, re_resolve=re_resolve)


def check_flags(m: Matrix, raw: RawQuery, project: Project, c: Combination) -> None:
    """A combination flag in a project confirms its choice c, or is refused in one line naming both."""
    raw = torch_build(m, raw)  # --torch 2.5.1+cu124 is --variant cu124 too
    if raw.platform is not None and "," in raw.platform:
        _contradicts(f"--platform {raw.platform}", project, c)
    q = parse_query(m, RawQuery(torch=raw.torch, cuda=raw.cuda, python=raw.python, os=raw.os, variant=raw.variant,
                                platform=raw.platform))  # fmt: skip
    checks = (
        ("--torch", raw.torch, q.torch is not None and c.torch.version not in q.torch),
        ("--variant", raw.variant, q.variant not in (None, c.variant.name)),
        ("--cuda", raw.cuda, q.cuda is not None and (c.variant.cuda is None or c.variant.cuda not in q.cuda)),
        ("--python", raw.python, q.python is not None and c.python not in q.python),
        ("--os", raw.os, q.os not in (None, c.os.name)),
        ("--platform", raw.platform, raw.platform is not None and q.platform is not c.platform),
    )
    for flag, value, refused in checks:
        if refused:
            _contradicts(f"{flag} {value}", project, c)


def _contradicts(flag: str, project: Project, c: Combination) -> None:
    source = shown(project.lock_path) if project.locked else f"torch in {shown(project.config.file)}"
    raise UsageError(
        f"{flag}: the project chooses {c.id} here ({source}); change {shown(project.config.file)} (then "
        f"{RE_RESOLVE}), or give --no-project"
    )


# -- render and build -------------------------------------------------------------------------------------------


def project_flags_in(ctx: click.Context, project: Project, kwargs: dict[str, Any], target: str) -> str:
    """The flags the file answers, filled into kwargs (project_image_flags); the target: the file's flavor unless
    --target was given."""
    project_image_flags(project, kwargs)
    return project_target(ctx, project, target)


def project_target(ctx: click.Context, project: Project, target: str) -> str:
    """The file's flavor, unless --target was given."""
    if ctx.get_parameter_source("target") not in (None, ParameterSource.DEFAULT):
        return target
    return project.config.torch.flavor.value


def project_image_flags(project: Project, kwargs: dict[str, Any]) -> None:
    """The image flags the file answers, before they are parsed: its architectures (an --arch list must be the
    same), its requirements files or lockfile (as --requirements PATH passes one; --requirements beside them is
    refused), its extra pip requirements (added before --pip's)."""
    config = project.config
    wanted, given = config.torch.archs, tuple(kwargs["archs"])
    if given and {parse_arch(a).name for a in given} != set(wanted):
        mine = " ".join(wanted) or "the torch build's own (no archs)"
        raise UsageError(f"--arch {' '.join(given)}: the project builds for {mine} ({shown(config.file)}); "
                         "change its torch.archs, or give --no-project")  # fmt: skip
    kwargs["archs"] = wanted
    deps = config.dependencies
    named = ("requirement files", "requirements") if deps.requirements else ("lockfile", "lock")
    if (deps.requirements or deps.lock is not None) and kwargs.get("requirements") is not None:
        raise UsageError(f"--requirements: the project names its {named[0]} ({shown(config.file)}: "
                         f"dependencies.{named[1]}); add it there")  # fmt: skip
    if deps.requirements:
        kwargs["requirements"] = _requirements_files(project)
    if deps.lock is not None:
        kwargs["requirements"] = str(config.root / _lockfile(project, deps.lock))
    kwargs["extra_pip"] = (*deps.pip, *kwargs["extra_pip"])


def _lockfile(project: Project, lock: str) -> str:
    """The project's lockfile, read as --requirements reads one: by its name (uv.lock, pylock.toml)."""
    name = Path(lock).name
    if name != "uv.lock" and not is_pylock(name):
        message = f"{lock!r}: torchyard reads uv.lock, pylock.toml or pylock.NAME.toml (PEP 751)"
        project.config.source.fail(("dependencies", "lock"), "dependencies.lock", message)
    return lock


def _requirements_files(project: Project) -> str | tuple[str, ...]:
    """The project's requirements files as --requirements passes one (one path), or, several, all of them: one
    install reads them in order, as `pip install -r A -r B` does, each file's includes relative to it. A lockfile
    is installed alone: it goes in dependencies.lock."""
    config = project.config
    files = config.dependencies.requirements
    for name in files:
        if len(files) > 1 and (Path(name).name == "uv.lock" or is_pylock(Path(name).name)):
            message = f"{name!r} is a lockfile: it is installed alone; name it in dependencies.lock instead"
            config.source.fail(("dependencies", "requirements"), "dependencies.requirements", message)
    paths = tuple(str(config.root / name) for name in files)
    return paths[0] if len(paths) == 1 else paths


def project_render_options(m: Matrix, project: Project, options: RenderOptions) -> RenderOptions:
    """The lock's base image digests (FROM image@digest), where it recorded any."""
    if project.locked is not None:
        base = pinned_bases(project, m, project.locked, options.strategy)
        options = options if base is None else replace(options, base_lock=base)
    return options


def project_question(m: Matrix, project: Project, raw: RawQuery, any_host: bool) -> tuple[RawQuery, bool]:
    """What the resolver is asked in a project, and whether the machine may be read for it: the decided
    combination (the lock's, else torch.id: the machine is not read), else the file's wish. The flags' driver and
    GPUs stay (where the image must run)."""
    c = project.decided
    asked = wish_of(m, project.config, None)
    if c is not None:
        check_flags(m, raw, project, c)
        asked, any_host = pinned(c, project.config), True
    return replace(asked, driver=raw.driver, gpus=raw.gpus, forward_compat=raw.forward_compat), any_host


def project_locked(
    m: Matrix, project: Project, c: Combination, machine: str, strategy: Strategy, *, write: bool
) -> list[str]:
    """After the choice c: a project without a lock gets one (a dry run only says so); what happened."""
    return [_locked(m, project, c, machine, strategy, write=write)]


def _locked(m: Matrix, project: Project, c: Combination, machine: str, strategy: Strategy, *, write: bool) -> str:
    if project.lock is not None:
        return project.describe()
    lock = lock_for(m, project.config, c, "any machine (torch.id names it)" if project.exact else machine, strategy)
    name = shown(project.lock_path)
    if not write:
        return f"project {shown(project.config.file)}: would write {name}: {c.id} (a dry run writes nothing)"
    write_project_lock(project.lock_path, lock)
    return f"project {shown(project.config.file)}: wrote {name}: {c.id} (resolved for {lock.resolved_for})"


# -- doctor and run ---------------------------------------------------------------------------------------------


def project_wish(m: Matrix, project: Project, flags: RawQuery) -> RawQuery:
    """doctor's and run's wish in a project: the decided combination (the flags must confirm it), else the file's
    wish; the machine's GPUs are read as always (no architectures from the file: they describe the image)."""
    c = project.decided
    if c is not None:
        check_flags(m, flags, project, c)
        return replace(pinned(c, project.config), archs=())
    return replace(wish_of(m, project.config, None), archs=())


def confirm(m: Matrix, project: Project, flags: RawQuery, c: Combination | None) -> None:
    """Without a decided combination (lock, torch.id), the flags are checked against what the file resolved to."""
    if project.decided is None and c is not None:
        check_flags(m, flags, project, c)
