"""The project stage (docs/project.md, "The project image"): what a project lays over its verified base image,
decided here and laid out by templates/project.j2 in the order that keeps a code change cheap: the OS packages,
then the Python dependencies, then the code, then the settings. Its Dockerfile starts `FROM` the base image by
its immutable tag (the build argument TORCHYARD_BASE), so the base's layers are the verified image's, byte for
byte."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from builder import __version__
from builder.render.additions import Additions
from builder.render.reqtypes import REQ_CONTEXT, REQ_MOUNT
from builder.render.spec import ImageSpec
from builder.render.templates import make_env, tidy

BASE_ARG = "TORCHYARD_BASE"  # the base image's reference, given at build time (the plan stays repository-free)
PROJECT_TARGET = "project"
CODE_DIR = "code"  # the context folder of the copied code: code/0, code/1 ... in [image].copy's order


@dataclass(frozen=True)
class CodeCopy:
    """One [image].copy entry as the stage copies it: its folder in the build context, where it goes."""

    context: str  # code/<n>
    to: str  # an absolute path in the image
    folder: bool
    host: str  # the file or folder of the project it is copied from


@dataclass(frozen=True, kw_only=True)
class ProjectStage:
    name: str  # the project's name: the image's repository name and its io.torchyard.project label
    system_packages: tuple[str, ...] = ()
    code: tuple[CodeCopy, ...] = ()
    workdir: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    command: tuple[str, ...] = ()


def render_project(spec: ImageSpec, stage: ProjectStage, deps: Additions) -> str:
    """The project's Dockerfile over spec's image (its OS, for apt's cache and mirror; its user, restored last)."""
    context = project_context(spec, stage, deps)
    return tidy(make_env().get_template("project.j2").render(**context))


def project_context(spec: ImageSpec, stage: ProjectStage, deps: Additions) -> dict[str, Any]:
    c = spec.combination
    return {
        "torchyard_version": __version__,
        "combo": {"id": c.id},
        "name": stage.name,
        "os": {"name": c.os.name, "apt_origin": spec.apt_origin},
        "system_packages": sorted(stage.system_packages),
        "deps": _deps(deps),
        "code": [{"context": f"{cc.context}/" if cc.folder else cc.context, "to": cc.to} for cc in stage.code],
        "workdir": stage.workdir,
        "env": [f"{key}={_quoted(value)}" for key, value in stage.env],
        "command": _exec_form(stage.command),
        "user": None if spec.user is None else {"uid": spec.user.uid},
    }


def _deps(deps: Additions) -> dict[str, Any]:
    """The project's requirements: the files to copy, each install's arguments, whether local sources are
    bind-mounted (from the context's req/ folder), as the venv stage lays out --pip and --requirements."""
    files = [name for name, _ in deps.files]
    return {"files": files, "installs": list(deps.installs), "sources": bool(deps.sources), "context": REQ_CONTEXT,
            "mount": REQ_MOUNT}  # fmt: skip


def _quoted(value: str) -> str:
    """An ENV value in double quotes: a backslash, a quote and a $ are escaped, so the value is the text given."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def _exec_form(command: tuple[str, ...]) -> str | None:
    """CMD's JSON array (exec form: no shell between tini and the command)."""
    return json.dumps(list(command)) if command else None
