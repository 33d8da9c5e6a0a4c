"""`torchyard devcontainer [IMAGE]`: write .devcontainer/devcontainer.json for this machine: the image the locator
finds here (the notebook flavor unless --flavor runtime) and this engine's GPU flags (builder.host.devcontainer)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import click

from builder.cli.options import image_reference, matrix_of, repository
from builder.cli.request import takes
from builder.core import env
from builder.core.errors import NoMatchError, UsageError
from builder.core.files import check_writable, write_report_file
from builder.core.kinds import Flavor, parse_choice
from builder.host.devcontainer import (
    DEFAULT_PATH,
    DevcontainerSpec,
    devcontainer_gpu,
    devcontainer_json,
    image_of,
    render_json,
)
from builder.host.doctor import DEFAULT_REPO, Diagnosis, diagnose
from builder.host.locate import Where
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.host.system import RealSystem
from builder.resolve.query import RawQuery

FLAVORS = (Flavor.NOTEBOOK, Flavor.RUNTIME)


@dataclass(frozen=True, kw_only=True)
class DevcontainerFlags:
    image: str | None
    flavor: str
    output: str
    force: bool
    any_host: bool
    serve: bool
    repo: str | None
    torch_spec: str | None
    python_spec: str | None
    os_name: str | None

    def __post_init__(self) -> None:
        if self.serve and self.flavor != Flavor.NOTEBOOK.value:
            raise UsageError("devcontainer: --serve starts the notebook server: it goes with --flavor notebook")
        if not self.output.strip():
            raise UsageError("devcontainer -o: empty; give a file")


@click.command("devcontainer")
@click.argument("image", required=False, callback=lambda c, p, v: None if v is None else image_reference(c, p, v))
@click.option("--flavor", default=Flavor.NOTEBOOK.value, show_default=True, metavar="notebook|runtime",
              help="The notebook image (user jovyan) or the runtime image (root).")  # fmt: skip
@click.option("-o", "--output", default=DEFAULT_PATH, show_default=True, metavar="PATH", help="The file to write.")
@click.option("--force", is_flag=True, help="Replace a file that is there.")
@click.option("--any-host", is_flag=True, envvar=env.ANY_HOST,
              help='GPUs where the devcontainers CLI sees them (hostRequirements.gpu "optional"), not this engine\'s '
                   "flags.")  # fmt: skip
@click.option("--serve", is_flag=True, help="Start the notebook server with the container (port 8888 forwarded).")
@click.option("--repo", envvar=env.REPO, metavar="REGISTRY/NAME", callback=repository,
              help=f"The team's repository: the image is looked for there too (${env.REPO}).")  # fmt: skip
@click.option("--torch", "torch_spec", metavar="SPEC", help="Only torch releases matching this (as doctor --torch).")
@click.option("--python", "python_spec", metavar="SPEC", help="Only this Python.")
@click.option("--os", "os_name", metavar="NAME", help="Only this OS base.")
@click.pass_context
@takes(DevcontainerFlags)
def devcontainer_cmd(ctx: click.Context, flags: DevcontainerFlags) -> None:
    """Write .devcontainer/devcontainer.json for this machine: the notebook image found here and this engine's GPU
    flags."""
    from builder.engine.quick import QuickEngine

    flavor = parse_choice(Flavor, flags.flavor, "--flavor")
    if flavor not in FLAVORS:
        raise UsageError(f"--flavor {flavor.value}: a dev container is the notebook or the runtime image")
    target = Path(flags.output)
    if (target.exists() or target.is_symlink()) and not flags.force:
        raise UsageError(f"devcontainer: {target} is already there; --force replaces it")
    check_writable(target, "-o")
    m = matrix_of(ctx)
    system, engine = RealSystem(), QuickEngine()
    host, runtime = probe(m, system), read_runtime(system, engine.daemon_info)
    wish = RawQuery(torch=flags.torch_spec, python=flags.python_spec, os=flags.os_name)
    image, notes = flags.image, list[str]()
    if image is None:
        image, notes = _located(diagnose(m, host, runtime, wish, flags.repo or DEFAULT_REPO, engine, flavor))
    gpu = devcontainer_gpu(host, runtime, any_host=flags.any_host)
    spec = DevcontainerSpec(image=image, flavor=flavor, gpu=gpu, serve=flags.serve)
    write_report_file(target, render_json(devcontainer_json(spec)))
    for line in (*notes, *gpu.notes):
        click.echo(f"torchyard: {line}", err=True)
    # the CLI finds .devcontainer/devcontainer.json or .devcontainer.json itself; any other path it is told
    found_itself = target.resolve() in (
        Path(".devcontainer/devcontainer.json").resolve(),
        Path(".devcontainer.json").resolve(),
    )
    config = "" if found_itself else f" --config {shlex.quote(str(target))}"
    click.echo(f"wrote {target} ({image}); open the folder in VS Code (Dev Containers: Reopen in Container), or: "
               f"devcontainer up --workspace-folder .{config}")  # fmt: skip


def _located(d: Diagnosis) -> tuple[str, list[str]]:
    """The image the locator found here (the notebook flavor's own), or one line with its build command."""
    r, loc = d.recommended, d.location
    if r is None:
        reasons = "; ".join(p.message for p in d.problems) or "no combination fits"
        raise NoMatchError(f"devcontainer: no image runs on this machine: {reasons} (torchyard doctor says more)")
    if loc is None or loc.reference is None or loc.where is Where.NOWHERE:
        raise NoMatchError(f"devcontainer: {r.image} is not here: build it first with `{r.build}`")
    image, notes = image_of(loc)
    if not loc.chosen:
        notes.insert(0, f"{image} is not the recommended image (it holds {loc.holds}); the recommended one: {r.build}")
    return image, notes
