"""`torchyard run [--here | IMAGE] [-- [DOCKER-RUN-OPTIONS... --] CMD...]`: the image for this machine (or the
one given), found, pulled or built, started with the GPUs, the workspace and the caller's user; `--notebook`: the
notebook image, its server started in the background and its URL printed (builder.host.notebook_launch)."""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click

from builder.cli.options import image_reference, matrix_of, repository
from builder.cli.project_flags import confirm, project_of, project_options, project_wish
from builder.core import env
from builder.core.errors import UsageError
from builder.core.kinds import Flavor
from builder.engine.detached import Detached
from builder.engine.interactive import docker_run_argv, run_container
from builder.host.identity import caller
from builder.host.launch import Launch, RunImages, RunRequest, obtain, prepare
from builder.host.notebook_launch import PORT, follow_notebook, notebook_spec, refuse_for_notebook, start_notebook
from builder.host.probe import probe
from builder.host.project_here import (
    ProjectHere,
    obtain_project,
    project_here,
    project_launch,
    project_lines,
    wanted_of,
)
from builder.host.runtime import read_runtime
from builder.host.system import RealSystem
from builder.matrix.model import Matrix
from builder.project.image import project_name
from builder.project.settle import Project
from builder.resolve.query import RawQuery

AFTER = "torchyard.after"  # ctx.meta key: the arguments after the first `--`


class SplitAtDashes(click.Command):
    """click drops `--`; here what follows the first one is kept apart, for the container."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        cut = args.index("--") if "--" in args else len(args)
        ctx.meta[AFTER] = args[cut + 1 :]
        return super().parse_args(ctx, args[:cut])


def _image(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    return None if value is None else image_reference(ctx, param, value)


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHM_SIZE = re.compile(r"[1-9][0-9]{0,15}[bkmgBKMG]?")  # docker's --shm-size: a number, a unit


def _env_vars(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        name = value.split("=", 1)[0]
        if not ENV_NAME.fullmatch(name):
            raise UsageError(f"-e {value[:80]!r}: a variable name is letters, digits and _ (NAME=VALUE)")
        if "\0" in value:
            raise UsageError(f"-e {name}: the value has a NUL byte")
    return values


def _shm_size(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not SHM_SIZE.fullmatch(value):
        raise UsageError(f"--shm-size {value[:80]!r}: a size is a number and a unit: 16g, 512m")
    return value


@click.command("run", cls=SplitAtDashes)
@click.argument("image", required=False, callback=_image)
@click.option("--here", is_flag=True, help="The image doctor chooses for this machine (the default without IMAGE).")
@click.option("--repo", envvar=env.REPO, metavar="REGISTRY/NAME", callback=repository,
              help=f"The team's repository, where the chosen image is pulled from (${env.REPO}).")  # fmt: skip
@click.option(
    "--torch", "torch_spec", metavar="SPEC", help="Only torch releases matching this (--here; 2.5.1+cu124: that build)."
)
@click.option("--python", "python_spec", metavar="SPEC", help="Only this Python (--here).")
@click.option("--os", "os_name", metavar="NAME", help="Only this OS base (--here).")
@click.option("-e", "--env", "env_vars", metavar="NAME[=VALUE]", multiple=True, callback=_env_vars,
              help="Set (or pass) a variable.")  # fmt: skip
@click.option("--shm-size", metavar="SIZE", callback=_shm_size,
              help="A /dev/shm of this size (16g) instead of --ipc=host.")  # fmt: skip
@click.option("--root", is_flag=True, help="Run as the image's user (root), not as yours.")
@click.option("-y", "--yes", is_flag=True, help="Build the chosen image without asking when it is nowhere.")
@click.option("--force", is_flag=True, help="Run an IMAGE that will not run on this machine.")
@click.option("--dry-run", is_flag=True, help="Print the docker run line and exit.")
@click.option("--notebook", is_flag=True,
              help="The notebook image: JupyterLab in the background, its URL with a token printed.")  # fmt: skip
@click.option("--port", type=click.IntRange(1, 65535), default=PORT, show_default=True,
              help="--notebook: the port on 127.0.0.1 the server is published on.")  # fmt: skip
@click.option("--detach", is_flag=True, help="--notebook: print the URL and leave it running (docker rm -f NAME).")
@project_options
@click.pass_context
def run_cmd(ctx: click.Context, /, image: str | None, **flags: Any) -> None:
    """Start the image for this machine (or IMAGE) with the GPUs, --ipc=host, the current folder at
    /workspace and your UID:GID. After `--`: the command (default: a shell); docker run options first, when
    given, ended by a second `--` (torchyard run -- -p 8000:8000 -- python -m http.server 8000). With
    --notebook: JupyterLab in the notebook image, the current folder at /home/jovyan/work, its URL printed."""
    from builder.engine.quick import QuickEngine

    if image is not None and flags["here"]:
        raise UsageError("run: give IMAGE or --here, not both")
    m = matrix_of(ctx)
    if image is not None and flags["project"] is not None:
        raise UsageError("run: give IMAGE or --project, not both")
    project = None if image is not None else project_of(m, flags["project"], flags["no_project"])
    system, engine = RealSystem(), QuickEngine()
    request = request_of(image, flags, ctx.meta.get(AFTER, []))
    asked = request.wish
    if project is not None:
        _say(project.describe())
        request = replace(request, wish=project_wish(m, project, asked))
    launch = prepare(m, probe(m, system), read_runtime(system, engine.daemon_info), request, engine)
    here = None
    if project is not None:
        chosen = launch.recommend()
        confirm(m, project, asked, chosen.result.combo if chosen else None)
        launch, here = _in_project(m, launch, project, engine, request, flags["project"])
    _say(*(_chosen(launch, request) if here is None else project_lines(here)), *launch.notes)
    if request.flavor is Flavor.NOTEBOOK:
        launch = replace(launch, spec=notebook_spec(launch.spec, flags["port"]))
    if flags["dry_run"]:
        if not launch.local:
            _say(f"{launch.image} is not in the local engine: run {_would(launch, request, here)}")
        click.echo(shlex.join(docker_run_argv(launch.spec)))
        return
    may_build = _may_build(flags["yes"])
    if here is None:
        launch = obtain(m, launch, engine, request, may_build, _say)
    else:
        launch = obtain_project(m, launch, here, engine, request, may_build, _say)
    ctx.exit(_notebook(launch, flags) if request.flavor is Flavor.NOTEBOOK else run_container(launch.spec).code)


def _in_project(
    m: Matrix, launch: Launch, project: Project, engine: RunImages, request: RunRequest, flag: str | None
) -> tuple[Launch, ProjectHere | None]:
    """The project's image (or its name to build); with --notebook, only a project whose flavor is "notebook":
    another's notebook is its combination's notebook image, said so."""
    chosen = launch.recommend()
    flavor = project.config.torch.flavor
    if request.flavor is Flavor.NOTEBOOK and flavor is not Flavor.NOTEBOOK:
        _say(f'the project\'s flavor is {flavor.value}: the notebook image of its combination, without the project\'s '
             'code (flavor = "notebook" in torchyard.toml builds the project over it)')  # fmt: skip
        return launch, None
    wanted = wanted_of(project_name(project.config), flavor.value, chosen)
    here = project_here(m, launch.host, wanted, engine, flag, repo=request.repo)  # local, else in the repository
    return project_launch(launch, here, engine, request), here  # the project's image, or its name to build


def _notebook(launch: Launch, flags: dict[str, Any]) -> int:
    """Started and healthy: its URL (stdout); then its logs until Ctrl-C (stopped and removed), or, --detach,
    left running."""
    containers = Detached()
    _say(f"starting the notebook server ({launch.spec.name}); waiting for its health check")
    notebook = start_notebook(launch.spec, flags["port"], containers, _say)
    click.echo(notebook.url)
    if flags["detach"]:
        _say(f"running in {notebook.name}: stop it with `docker rm -f {notebook.name}`")
        return 0
    _say("Ctrl-C stops and removes it; its log follows")
    return follow_notebook(notebook, containers)


def request_of(image: str | None, flags: dict[str, Any], after: list[str]) -> RunRequest:
    docker_args, command = split_after(after)
    workspace = os.getcwd()
    if ":" in workspace:
        raise UsageError(f"run: the current folder {workspace} has a ':', which docker's -v cannot mount")
    notebook = bool(flags.get("notebook"))
    if notebook:
        refuse_for_notebook(tuple(docker_args), tuple(command))
    elif flags.get("detach") or flags.get("port", PORT) != PORT:
        raise UsageError("run: --detach and --port go with --notebook")
    return RunRequest(
        image=image,
        command=tuple(command),
        repo=flags["repo"],
        wish=RawQuery(torch=flags["torch_spec"], python=flags["python_spec"], os=flags["os_name"]),
        workspace=workspace,
        who=None if flags["root"] else caller(),
        shm_size=flags["shm_size"],
        env=tuple(flags["env_vars"]),
        docker_args=tuple(docker_args),
        tty=sys.stdin.isatty(),
        force=flags["force"],
        flavor=Flavor.NOTEBOOK if notebook else Flavor.RUNTIME,
    )


def split_after(after: list[str]) -> tuple[list[str], list[str]]:
    """(docker run options, command): options come first when the first word after `--` is one."""
    if not after or not after[0].startswith("-"):
        return [], after
    if "--" not in after:
        raise UsageError(
            f"run: docker run options after `--` ({after[0]} ...) end with a second `--` before the command: "
            "torchyard run -- --network host -- python train.py"
        )
    cut = after.index("--")
    return after[:cut], after[cut + 1 :]


def _chosen(launch: Launch, request: RunRequest) -> list[str]:
    if request.image is not None:
        return []
    r = launch.recommend()
    if r is None:
        return []
    return [f"the image for this machine: {r.image} ({r.result.combo.id})"]


def _would(launch: Launch, request: RunRequest, here: ProjectHere | None) -> str:
    build = f"builds it (torchyard {shlex.join(launch.build or ())})"
    if here is not None and here.in_registry:
        return f"pulls it from the team's repository (if that fails, {build} in the project)"
    if here is not None:
        return f"{build} in the project, then finds it by its labels"
    if request.image is not None:
        return "pulls it"
    return f"pulls it from {request.repo}, else {build}" if request.repo else build


def _may_build(yes: bool) -> Callable[[Launch], bool]:
    """--yes builds; on a terminal the user is asked; a script without --yes gets the command instead."""

    def decide(launch: Launch) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            return False
        command = shlex.join(["torchyard", *(launch.build or ())])
        question = f"{launch.image} is not here: build it now with `{command}` (minutes, GBs of wheels)?"
        return click.confirm(question, default=False, err=True)

    return decide


def _say(*lines: str) -> None:
    for line in lines:
        click.echo(f"torchyard: {line}", err=True)
