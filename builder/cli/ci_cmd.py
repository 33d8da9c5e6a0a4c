"""`torchyard matrix ci`: the publish set exported for CI (a GitHub Actions matrix, its GPU legs, a bake file)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import click

from builder.cli.gate_flags import check_gate_flags, gate_options, security_gate
from builder.cli.image_options import lock_of, locked_option, refresh_option, registry_mirror_option
from builder.cli.options import folder, matrix_of, publish_note, publish_set_option, repository
from builder.cli.publish_cmd import DEFAULT_REPO, platform_option
from builder.cli.request import takes
from builder.core.errors import RenderError, UsageError
from builder.core.files import read_text
from builder.core.kinds import Platform, parse_gpus
from builder.core.provenance import provenance_labels
from builder.matrix.model import Matrix
from builder.publish.ci_shape import CiShape, ci_shape, parse_gpu_runner, parse_runner
from builder.publish.items import expand, on_platforms, select
from builder.publish.plan import plan_publish


@dataclass(frozen=True, kw_only=True)
class CiFlags:
    """`torchyard matrix ci`'s flags."""

    fmt: str
    only: tuple[str, ...]
    repo: str | None
    registry: str | None
    gpus: str | None
    candidates: str | None
    runner: tuple[str, ...]
    arm_runner: tuple[str, ...]
    gpu_runner: tuple[str, ...]
    plan_report: str | None
    output: str
    cache_repo: str | None
    refresh: str
    locked: bool
    registry_mirror: str | None
    platforms: tuple[Platform, ...]
    attest: bool
    security_gate: bool
    allowlist: str | None

    def __post_init__(self) -> None:
        parse_gpus(self.gpus)
        check_gate_flags(self.security_gate, self.allowlist)
        if self.fmt == "bake" and (self.attest or self.security_gate):
            raise UsageError("--attest and --security-gate are for the GitHub matrix's commands, not --format bake")
        for text in self.runner:
            parse_runner(text)
        for text in self.arm_runner:
            parse_runner(text, "--arm-runner")
        for text in self.gpu_runner:
            parse_gpu_runner(text)

    def shape(self, m: Matrix) -> CiShape:
        return ci_shape(
            m,
            tuple(label for text in self.runner for label in parse_runner(text)),
            tuple(label for text in self.arm_runner for label in parse_runner(text, "--arm-runner")),
            tuple(parse_gpu_runner(text) for text in self.gpu_runner),
        )

    def repos(self, m: Matrix) -> tuple[str, str]:
        """--repo and --candidates, else under --registry (or [ci] registry): <registry>/torchyard[-candidates]."""
        registry = self.registry or m.ci.registry
        repo = self.repo or (f"{registry.rstrip('/')}/{DEFAULT_REPO}" if registry else DEFAULT_REPO)
        return repo, self.candidates or f"{repo}-candidates"


@click.command("ci")
@click.option("--format", "fmt", type=click.Choice(["github", "github-gpu", "bake"]), required=True,
              help="github: one job per image (build, promote); github-gpu: one GPU smoke leg per image and GPU "
              "class; bake: a docker-bake.json.")  # fmt: skip
@click.option("--only", "only", multiple=True, metavar="GLOB")
@click.option("--repo", default=None, metavar="REGISTRY/NAME", callback=repository,
              help=f"The public repository (default: <registry>/{DEFAULT_REPO}, else {DEFAULT_REPO}).")  # fmt: skip
@click.option("--registry", callback=repository, metavar="REGISTRY[/NAMESPACE]",
              help="GitHub: where --repo and --candidates are by default (publish.toml: [ci] registry).")  # fmt: skip
@click.option("--gpus", metavar="all|N", help="GitHub: GPU smoke of CUDA items on the GPU runners.")
@click.option(
    "--candidates",
    callback=repository,
    metavar="REGISTRY/NAME",
    help="GitHub: where builds go before the GPU smoke (default: <repo>-candidates).",
)
@click.option("--runner", multiple=True, metavar="LABEL[,LABEL]",
              help="GitHub: the linux/amd64 build runner's labels (repeatable; default ubuntu-latest; [ci] "
              "runner).")  # fmt: skip
@click.option(
    "--arm-runner",
    multiple=True,
    metavar="LABEL[,LABEL]",
    help="GitHub: the linux/arm64 build runner's labels (default ubuntu-24.04-arm; [ci] arm_runner).",
)
@click.option("--gpu-runner", multiple=True, metavar="CLASS=LABEL[,LABEL]",
              help="GitHub: a GPU runner class (repeatable): CLASS an architecture (sm_90), a data-center GPU "
              "(h100) or a family (hopper); each CUDA image's GPU smoke runs on every class its torch has code "
              "for (default: self-hosted,gpu for all; [ci] gpu_runners).")  # fmt: skip
@click.option("--plan-report", metavar="FILE",
              help="GitHub: a `publish --plan --report` JSON of --repo: the items it found up to date there get "
              "no job.")  # fmt: skip
@click.option(
    "-o",
    "--output",
    "output",
    callback=folder,
    default="build/bake",
    show_default=True,
    metavar="DIR",
    help="bake: where the contexts and docker-bake.json are written.",
)
@click.option(
    "--cache-repo",
    metavar="REGISTRY/NAME",
    callback=repository,
    help="Registry build cache: bake's cache-from / cache-to; the GitHub matrix's builds: build --cache.",
)
@refresh_option
@locked_option
@registry_mirror_option
@platform_option
@click.option(
    "--attest",
    is_flag=True,
    help="GitHub: builds attach an SBOM and provenance; promotions carry them and sign with $TORCHYARD_SIGN_KEY.",
)
@gate_options
@publish_set_option
@click.pass_context
@takes(CiFlags)
def matrix_ci_cmd(ctx: click.Context, flags: CiFlags) -> None:
    """Export the publish set: a GitHub Actions strategy.matrix (JSON) or a docker-bake.json."""
    from builder.publish.export import Assurance, bake, github_gpu_matrix, github_matrix, published_ids

    m = matrix_of(ctx, publish_set=True)
    publish_note(m)
    shape = flags.shape(m)  # a GPU class the matrix does not know is refused before anything is planned
    repo, candidates = flags.repos(m)
    security_gate(flags.security_gate, flags.allowlist)  # a bad allowlist is refused here, not in every job
    lock = lock_of(m, flags.locked)
    every = expand(m, refresh=flags.refresh, base_lock=lock, registry_mirror=flags.registry_mirror)[0]
    items = on_platforms(select(every, flags.only), flags.platforms)
    if flags.plan_report:
        done = published_ids(_json_file(flags.plan_report), repo)
        items = [i for i in items if i.id not in done]
    pplan = plan_publish(m, items, [], every)
    for group in pplan.groups:  # an export with a hole in it would publish less than the set says
        if group.plan is None:
            raise RenderError(f"{group.name}: {group.problem}")
    if flags.fmt == "github":
        assurance = Assurance(flags.attest, flags.security_gate, flags.allowlist)
        click.echo(
            json.dumps(
                github_matrix(pplan, repo, candidates, flags.gpus, assurance, shape, flags.cache_repo),
                separators=(",", ":"),
            )
        )
        return
    if flags.fmt == "github-gpu":
        click.echo(json.dumps(github_gpu_matrix(m, pplan, candidates, flags.gpus, shape), separators=(",", ":")))
        return
    out = Path(flags.output)
    data = bake(pplan, repo, out, flags.cache_repo, provenance_labels(Path(m.path).parent))
    out.mkdir(parents=True, exist_ok=True)
    (out / "docker-bake.json").write_text(json.dumps(data, indent=2) + "\n")
    click.echo(
        f"wrote {out / 'docker-bake.json'} ({len(items)} image targets): docker buildx bake -f "
        f"{out / 'docker-bake.json'}"
    )


def _json_file(path: str) -> object:
    try:
        data: object = json.loads(read_text(path, "--plan-report"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"--plan-report {path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    return data
