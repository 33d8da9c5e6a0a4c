"""torchyard.toml -> the project image's plan (docs/project.md, "The project image"): its name, what its stage
lays over the base image, its dependencies (checked against the base's pins), and which modules its import check
imports. The base's plan is made without the project's dependencies, so the base stays the verified image that a
build outside the project makes, and the project's dependencies go in the project's own layer over it."""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from pathlib import Path

from builder.core.errors import ProjectError
from builder.core.kinds import Flavor, Installer
from builder.pipeline.plan import Plan
from builder.pipeline.project_plan import ProjectPlan, make_project_plan
from builder.project.config import ProjectConfig
from builder.project.read import shown
from builder.project.set_lock import locked_deps
from builder.render.additions import additions
from builder.render.options import RenderOptions
from builder.render.project_stage import CODE_DIR, CodeCopy, ProjectStage

_NAME = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?", re.ASCII)
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_PYTHONS = ("python", "python3")


def base_options(options: RenderOptions) -> RenderOptions:
    """The base image's options: without the project's Python dependencies (they go in the project's layer)."""
    return replace(options, extra_pip=(), requirements=None)


def project_plan(config: ProjectConfig, base: Plan, flavor: Flavor, options: RenderOptions) -> ProjectPlan:
    """`options`: the build's, with the project's dependencies (requirements, pip) in them; `base`: the plan made
    from base_options(options)."""
    deps = additions(base.combination, replace(options, installer=Installer.PIP), Path.cwd())  # the image's pip
    deps, record = locked_deps(config, deps)  # torchyard.lock's Python set: pinned, or recorded by this build
    return make_project_plan(base, flavor, project_stage(config), deps, import_names(config), record)


def project_stage(config: ProjectConfig) -> ProjectStage:
    image = config.image
    code = tuple(
        CodeCopy(f"{CODE_DIR}/{i}", c.to, (config.root / c.source).is_dir(), str((config.root / c.source).resolve()))
        for i, c in enumerate(image.copy)
    )
    return ProjectStage(
        name=project_name(config),
        system_packages=config.dependencies.system_packages,
        code=code,
        workdir=image.workdir,
        env=image.env,
        command=image.command,
    )


def project_name(config: ProjectConfig) -> str:
    """[project] name, else the project folder's name in lowercase when it is a valid one."""
    if config.name is not None:
        return config.name
    folder = config.root.resolve().name.lower()
    if _NAME.fullmatch(folder):
        return folder
    raise ProjectError(
        f"{shown(config.file)}: project.name: not set, and the folder's name {folder!r} cannot name an image: "
        'set [project] name = "my-model"'
    )


def import_names(config: ProjectConfig) -> tuple[tuple[str, ...], str]:
    """The modules the import check imports, and where they were read: the top-level package of the command's
    `python -m PACKAGE`, else the name of pyproject.toml's [project] (my-model -> my_model); else none, and why."""
    command = config.image.command
    if len(command) >= 3 and Path(command[0]).name in _PYTHONS and command[1] == "-m":
        top = command[2].split(".")[0]
        if _MODULE.fullmatch(top):
            return (top,), "image.command"
    name = _pyproject_name(config.root / "pyproject.toml")
    if name is not None:
        return (name,), "pyproject.toml's project.name"
    return (), 'no image.command = ["python", "-m", PACKAGE] and no pyproject.toml with a [project] name'


def _pyproject_name(path: Path) -> str | None:
    if not path.is_file() or not path.resolve().is_relative_to(path.parent.resolve()):
        return None
    try:
        name = tomllib.loads(path.read_text(errors="replace")).get("project", {}).get("name")
    except (tomllib.TOMLDecodeError, AttributeError):
        return None
    module = re.sub(r"[-.]+", "_", name).lower() if isinstance(name, str) else ""
    return module if _MODULE.fullmatch(module) else None
