"""`torchyard render`: the Dockerfile, build context and plan for the best (or pinned) combination."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from builder.cli.common import image_command_options, prepare
from builder.cli.output import emit_json
from builder.cli.request import takes
from builder.core import env
from builder.core.errors import UsageError
from builder.core.files import write_file
from builder.engine import build_command
from builder.pipeline.context_dir import write_context
from builder.pipeline.plan import Plan, build_request, plan_json
from builder.pipeline.project_build import PROJECT_DIR
from builder.pipeline.project_plan import ProjectPlan, project_json, project_request

PIPCONF_VAR = env.PIPCONF
PIPCONF_REF = "${" + PIPCONF_VAR + "}"


@dataclass(frozen=True, kw_only=True)
class RenderFlags:
    """`torchyard render`'s own flags; the combination and image flags go on to prepare()."""

    target: str
    output: str | None
    repo: str
    force: bool
    as_json: bool
    shared: Mapping[str, Any]


@click.command("render")
@image_command_options
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON instead of the summary.")
@click.pass_context
@takes(RenderFlags)
def render_cmd(ctx: click.Context, flags: RenderFlags) -> None:
    """Write Dockerfile + build context + plan.json and print the docker build command."""
    _, _, chosen = prepare(ctx, dict(flags.shared), flags.target)
    if chosen.more:
        raise UsageError(
            "--platform: render writes one platform's Dockerfile (the text is the same on each but for the "
            "combination and its wheels' architectures); give one platform, or build --platform A,B"
        )
    plan = chosen.plan
    out_dir = Path(flags.output or f"build/torchyard/{plan.id}")
    write_context(plan, out_dir, force=flags.force)
    if chosen.project is not None:  # beside the base's: its Dockerfile and context (the code, by the checked walk)
        write_context(chosen.project, out_dir / PROJECT_DIR, force=flags.force)
    data = plan_json(plan, flags.repo, out_dir) | project_json(chosen.project, flags.repo, out_dir / PROJECT_DIR)
    write_file(out_dir / "plan.json", json.dumps(data, indent=2) + "\n")
    if flags.as_json:
        emit_json(data)
        return
    click.echo(chosen.choice.describe())
    click.echo(f"wrote {out_dir}/Dockerfile, plan.json and the build context")
    _echo_network(plan)
    for flavor in chosen.flavors:
        argv = build_command(build_request(plan, flavor, out_dir, flags.repo, _secret_placeholders(plan)))
        click.echo(f"\n# {flavor.value}\nDOCKER_BUILDKIT=1 {_shell_command(argv)}")
    if chosen.project is not None:
        _render_project(chosen.project, out_dir / PROJECT_DIR, flags)


def _render_project(project: ProjectPlan, folder: Path, flags: RenderFlags) -> None:
    """The project's build command (after the base's): its Dockerfile and context were written beside the base's."""
    argv = build_command(project_request(project, folder, flags.repo, _secret_placeholders(project.base)))
    click.echo(f"\n# project {project.name} (wrote {folder}/Dockerfile), over the image above")
    click.echo(f"DOCKER_BUILDKIT=1 {_shell_command(argv)} -t {shlex.quote(project.ref(flags.repo))}")


def _secret_placeholders(plan: Plan) -> dict[str, str]:
    # A generated secret (pip.conf with index credentials) exists only during `torchyard build`;
    # the printed command reads its path from the environment instead.
    return {s.id: PIPCONF_REF for s in plan.secrets if s.source == "generated"}


def _shell_command(argv: list[str]) -> str:
    """shlex.join, except that the secret-file reference stays expandable (double quotes, not single)."""
    return " ".join(f'"{arg}"' if PIPCONF_REF in arg else shlex.quote(arg) for arg in argv)


def _echo_network(plan: Plan) -> None:
    for origin in plan.network_origins:
        click.echo(f"network: {origin}")
    for secret in plan.secrets:
        if secret.source == "generated":
            click.echo(
                f"secret {secret.id}: {secret.description} (torchyard build generates it; for docker build, "
                f"write a pip.conf with that index and its credentials to a private file and set ${PIPCONF_VAR})"
            )
        else:
            click.echo(f"secret {secret.id}: {secret.description} (from {secret.source})")
    for flavor, reason in plan.unavailable:
        click.echo(f"{flavor.value}: not available: {reason}")
