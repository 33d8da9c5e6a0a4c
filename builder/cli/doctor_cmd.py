"""`torchyard doctor`: read this machine, say which image runs here and how to start it, and every problem."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

from builder.cli.check_view import check_data, check_lines, failed, run_check
from builder.cli.options import image_reference, matrix_of, repository
from builder.cli.output import emit_json
from builder.cli.project_flags import confirm, project_of, project_options, project_wish
from builder.cli.request import takes
from builder.core import env
from builder.core.versions import driver_version
from builder.host.doctor import Diagnosis, diagnose
from builder.host.locate import location_json, where_lines
from builder.host.probe import probe
from builder.host.project_here import ProjectHere, doctor_lines, project_here, runs_here, wanted_of
from builder.host.runtime import RuntimeReading, read_runtime
from builder.host.system import RealSystem
from builder.project.image import project_name
from builder.resolve.facts import Facts
from builder.resolve.query import RawQuery

SCHEMA = 1
NO_RUN = "build it first (the line above), then: torchyard run"  # no image to start yet, none to pull


@dataclass(frozen=True, kw_only=True)
class DoctorFlags:
    """`torchyard doctor`'s flags."""

    torch_spec: str | None
    python_spec: str | None
    os_name: str | None
    repo: str
    as_json: bool
    check_image: str | None  # "" : --check without IMAGE (the recommended image)
    check_timeout: float
    project: str | None
    no_project: bool


@click.command("doctor")
@click.option(
    "--torch",
    "torch_spec",
    metavar="SPEC",
    help="Only torch releases matching this (2.5, '>=2.4'; 2.5.1+cu124: that build).",
)
@click.option("--python", "python_spec", metavar="SPEC", help="Only this Python (3.11).")
@click.option("--os", "os_name", metavar="NAME", help="Only this OS base (debian12, ubuntu24.04 ...).")
@click.option(
    "--repo",
    default="torchyard",
    show_default=True,
    metavar="REGISTRY/NAME",
    envvar=env.REPO,
    callback=repository,
    help=f"The team's repository: where the image is looked for, besides the local engine (${env.REPO}).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (schema in docs/schemas.md).")
@click.option(
    "--check",
    "check_image",
    is_flag=False,
    flag_value="",
    default=None,
    callback=lambda ctx, param, value: value if not value else image_reference(ctx, param, value),
    metavar="[IMAGE]",
    help="Also start the image (the recommended one, or IMAGE) as `torchyard run` would and probe it.",
)
@click.option("--check-timeout", default=300.0, show_default=True, metavar="SECONDS", help="The probe's limit.",
              type=click.FloatRange(min=1.0))  # fmt: skip
@project_options
@click.pass_context
@takes(DoctorFlags)
def doctor_cmd(ctx: click.Context, flags: DoctorFlags) -> None:
    """Which image runs on this machine, the docker run line that starts it, and what to fix."""
    from builder.engine import DockerEngine

    m = matrix_of(ctx)
    project = project_of(m, flags.project, flags.no_project)
    wish = asked = RawQuery(torch=flags.torch_spec, python=flags.python_spec, os=flags.os_name)
    if project is not None:
        wish = project_wish(m, project, asked)
        click.echo(f"torchyard: {project.describe()}", err=True)
    system = RealSystem()
    host = probe(m, system)
    engine = DockerEngine()
    runtime = read_runtime(system, engine.daemon_info)
    d = diagnose(m, host, runtime, wish, flags.repo, engine)
    mine: list[str] = []
    data: dict[str, Any] = {}
    if project is not None:
        confirm(m, project, asked, d.recommended.result.combo if d.recommended else None)
        wanted = wanted_of(project_name(project.config), project.config.torch.flavor.value, d.recommended)
        here = project_here(m, host, wanted, engine, flags.project, repo=flags.repo)  # local, else the registry
        archs = project.config.torch.archs
        mine, data = ["", *doctor_lines(here, d, archs)], {"project": project_data(here, d, archs)}
    check = None if flags.check_image is None else run_check(d, flags.check_image, flags.check_timeout)
    if flags.as_json:
        emit_json(as_data(d, Facts(m)) | data | ({"check": check_data(check)} if check else {}))
    else:
        click.echo("\n".join([as_text(d, Facts(m), mine), *(check_lines(check) if check else [])]))
    if check is not None and failed(check):
        raise SystemExit(4)  # the image did not work in a container here (README: a smoke suite failed)


def project_data(here: ProjectHere, d: Diagnosis, archs: tuple[str, ...]) -> dict[str, Any]:
    """doctor --json's "project": the project's image, where it is, whether it runs here."""
    w, loc = here.wanted, here.location
    return {
        "name": w.name if w else None,
        "combination": w.combination if w else None,
        "image": loc.reference if loc else None,
        "where": "nowhere" if loc is None else "repository" if here.in_registry else "local engine",
        "runs_here": runs_here(here, d, archs),
        "build": shlex.join(("torchyard", *here.build)),
    }


def as_data(d: Diagnosis, f: Facts) -> dict[str, Any]:
    r = d.recommended
    return {
        "schema": SCHEMA,
        "driver": d.host.driver,
        "driver_source": d.host.reading.source,
        "reports_cuda": _reports(f, d.host.driver),
        "platform": d.host.platform.value if d.host.platform else None,
        "machine": d.host.machine,
        "gpus": [
            {
                "index": g.seen.index,
                "name": g.seen.name,
                "arch": g.arch.name if g.arch else None,
                "memory_mib": g.seen.memory_mib,
                "mig": g.seen.mig,
                "known_as": g.known.name if g.known else None,
            }
            for g in d.host.gpus
        ],
        "docker": _runtime_data(d.runtime),
        "recommended": None
        if r is None
        else {
            "id": r.result.combo.id,
            "torch": r.result.combo.local_version,
            "cuda": str(r.result.combo.variant.cuda) if r.result.combo.variant.cuda else None,
            "image": r.image,
            "run": d.run,
            "build": r.build,
            "pip": r.pip,
            "where": location_json(d.location) if d.location else None,
        },
        "problems": [{"check": p.check, "message": p.message, "fix": p.fix} for p in d.problems],
        "unchecked": list(d.unchecked),
    }


def _reports(f: Facts, driver: str | None) -> str | None:
    if driver is None:
        return None
    try:
        reported = f.reported_cuda(driver_version(driver))
    except ValueError:
        return None
    return f"{reported[0]}.{reported[1]}" if reported else None


def _runtime_data(rt: RuntimeReading | None) -> dict[str, Any] | None:
    if rt is None or rt.engine is None:
        return None
    return {
        "engine": rt.engine,
        "image_store": "containerd" if rt.containerd_store else "graph driver",
        "runtimes": list(rt.runtimes),
        "gpu_flags": rt.gpu_flags if rt.gpus_flag or rt.cdi_specs else [],
        "nvidia_toolkit": rt.gpus_flag,
        "cdi_specs": list(rt.cdi_specs),
        "shm_mib": rt.shm_mib,
    }


def as_text(d: Diagnosis, f: Facts, project: Sequence[str] = ()) -> str:
    """`project`: the lines about the project's image, after the recommendation."""
    lines = [f"machine: {d.host.machine}" + (f" ({d.host.platform.value})" if d.host.platform else "")]
    reports = _reports(f, d.host.driver)
    if d.host.driver:
        via = f" ({d.host.reading.source})" if d.host.reading.source else ""
        lines.append(f"driver:  {d.host.driver}{via}" + (f"; reports CUDA {reports}" if reports else ""))
    for g in d.host.gpus:
        memory = f", {g.seen.memory_mib} MiB" if g.seen.memory_mib else ""
        mig = ", MIG enabled" if g.seen.mig else ""
        lines.append(f"GPU {g.seen.index}:   {g.seen.name}, {g.arch.name if g.arch else 'unknown arch'}{memory}{mig}")
    if d.runtime is not None and d.runtime.engine:
        how = " ".join(d.runtime.gpu_flags) if d.runtime.gpus_flag or d.runtime.cdi_specs else "no GPU access"
        engine = f"{d.runtime.engine} ({d.runtime.image_store})"
        lines.append(f"docker:  {engine}; GPUs: {how}; /dev/shm {d.runtime.shm_mib} MB by default")
    lines.append("")
    lines += [*_recommendation_lines(d), *project]
    if d.problems:
        lines += ["", f"problems ({len(d.problems)}):"]
        for p in d.problems:
            lines += [f"  {p.check}: {p.message}", f"    fix: {p.fix}"]
    if d.unchecked:
        lines += ["", "could not check:"] + [f"  {u}" for u in d.unchecked]
    return "\n".join(lines)


def _recommendation_lines(d: Diagnosis) -> list[str]:
    r = d.recommended
    if r is None:
        return ["no image runs on this machine (see the problems below)"]
    c = r.result.combo
    cuda = f"CUDA {c.variant.cuda}, cuDNN {c.variant.cudnn}" if c.variant.cuda else "CPU only"
    return [
        f"best image here: torch {c.local_version} ({cuda}), Python {c.python}, {c.os.name} [{c.id}]",
        f"  image:    {r.image}",
        *(f"  where:    {line}" for line in (where_lines(d.location) if d.location else [])),
        f"  build it: {r.build}",
        f"  run it:   {d.run or NO_RUN}",
        f"  or pip:   {r.pip}",
    ]
