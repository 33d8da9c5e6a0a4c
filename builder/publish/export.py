"""Export the publish set to the engines people run at scale: a GitHub Actions matrix, a bake file."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.core.errors import UsageError
from builder.matrix.model import Matrix
from builder.pipeline.context_dir import write_context
from builder.pipeline.plan import Plan, tag_refs
from builder.publish.ci_shape import DEFAULT_GPU_CLASSES, CiShape, GpuClass, driver_floor, hosted, runs_on
from builder.publish.items import Item
from builder.publish.plan import PublishPlan

HOSTED_RUNNER = "ubuntu-latest"
GPU_RUNNER = list(DEFAULT_GPU_CLASSES[0].labels)
ARM_GPU_RUNNER = list(DEFAULT_GPU_CLASSES[1].labels)  # a Grace machine (GH200, GB200, DGX Spark) of your own


@dataclass(frozen=True)
class Assurance:
    """What the exported commands add for a platform team (`matrix ci --attest --security-gate`): builds
    attach an SBOM and provenance to the candidate and pass the security gate before it is pushed; the
    promotion carries both to the public repository and signs there with $TORCHYARD_SIGN_KEY when it is set."""

    attest: bool = False
    gate: bool = False
    allowlist: str | None = None

    def build(self) -> list[str]:
        gate = ["--security-gate", *(["--allowlist", self.allowlist] if self.allowlist else [])] if self.gate else []
        return [*(["--attest"] if self.attest else []), *gate]

    def promote(self) -> list[str]:
        return ["--attest"] if self.attest else []


def build_flags(item: Item) -> list[str]:
    """The flags that pin exactly this item's combination and options."""
    c, o = item.combo, item.options
    flags = [
        "--platform",
        c.platform.value,
        "--torch",
        str(c.torch.version),
        "--variant",
        c.variant.name,
        "--python",
        c.python,
        "--os",
        c.os.name,
        "--strategy",
        o.strategy.value,
        "--target",
        item.flavor.value,
    ]
    for arch in o.archs:
        flags += ["--arch", arch.name]
    for requirement in o.extra_pip:
        flags += ["--pip", requirement]
    if o.refresh:
        flags += ["--refresh", o.refresh]
    if o.base_lock is not None:
        flags.append("--locked")
    return flags


def github_matrix(
    pplan: PublishPlan,
    repo: str,
    candidates: str,
    gpus: str | None,
    assurance: Assurance | None = None,
    shape: CiShape | None = None,
    cache_repo: str | None = None,
) -> dict[str, Any]:
    """`strategy.matrix` for GitHub Actions: one job per item with its exact commands and runners.

    build (`runs-on`; `hosted`: a GitHub-hosted runner): build, no-GPU smoke suite, push the immutable tag to the
    candidates repo; smoke (CUDA items, when --gpus): the GPU checks on that candidate, on each GPU class in
    `gpu-classes` (github_gpu_matrix: one leg per class; `smoke-runs-on` is the first class's runner);
    push: promote the verified candidate to the public repo registry-side (torchyard promote: blob mounts,
    the same digest; a refresh that changed no package keeps the public image). `publish` does all three on one
    machine. `assurance`: the attestation and gate flags.
    `cache_repo`: each build reads and writes the registry build cache there (build --cache), so a job on a fresh
    runner reuses the steps an earlier run (or another job of its combination) built.
    """
    assurance, shape = assurance or Assurance(), shape or CiShape()
    include = []
    for item, plan in pplan.planned():
        classes = _classes(item, gpus, shape)
        tag = plan.target(item.flavor).tags.immutable  # what `build` pushes; promote renames a platform member
        candidate, public = f"{candidates}:{tag}", f"{repo}:{pplan.group_of(item).immutable(item)}"
        promote_flags = ["--content-hash", plan.content_hash, *_keep(item), *assurance.promote()]
        runner = shape.build_runner(item)
        include.append(
            {
                "id": item.id,
                "runs-on": runs_on(runner),
                "hosted": hosted(runner),
                "smoke-runs-on": runs_on(classes[0].labels) if classes else runs_on(runner),
                "gpu": bool(classes),
                "gpu-classes": " ".join(c.name for c in classes),
                "build": _build(item, assurance, candidates, cache_repo),
                "smoke": _smoke(candidate, gpus if classes else None),
                # registry-side (blob mounts, same digest), only if the candidate is the content planned
                "push": shlex.join(["torchyard", "promote", candidate, public, *promote_flags]),
                "publish": shlex.join(
                    [
                        "torchyard",
                        "publish",
                        "--only",
                        item.id,
                        "--repo",
                        repo,
                        "--no-aliases",
                        *(["--refresh", item.options.refresh] if item.options.refresh else []),
                        *(["--gpus", gpus or "all"] if classes else []),
                        *assurance.build(),
                    ]
                ),
                "image": public,
            }
        )
    return {"include": include}


def _build(item: Item, assurance: Assurance, candidates: str, cache_repo: str | None) -> str:
    """The build job's command: build, smoke suite, push the candidate (with the registry build cache, if any)."""
    cache = ["--cache", cache_repo] if cache_repo else []
    return shlex.join(
        ["torchyard", "build", *build_flags(item), *assurance.build(), *cache, "--repo", candidates, "--push"]
    )


def github_gpu_matrix(
    m: Matrix, pplan: PublishPlan, candidates: str, gpus: str | None, shape: CiShape | None = None
) -> dict[str, Any]:
    """`strategy.matrix` of the GPU smoke: one leg per CUDA item and GPU class that runs it (none without --gpus),
    each with the candidate it pulls (and removes after) and the driver floor of its image's CUDA major (a CUDA 12
    image's leg may run on a runner whose driver is below CUDA 13's floor)."""
    shape = shape or CiShape()
    include = []
    for item, plan in pplan.planned():
        found = driver_floor(m, [item])
        floor = str(found[1]) if found else ""
        candidate = f"{candidates}:{plan.target(item.flavor).tags.immutable}"
        for gpu_class in _classes(item, gpus, shape):
            include.append(
                {
                    "id": item.id,
                    "class": gpu_class.name,
                    "runs-on": runs_on(gpu_class.labels),
                    "candidate": candidate,
                    "smoke": _smoke(candidate, gpus),
                    "driver-floor": floor,
                }
            )
    return {"include": include}


def _keep(item: Item) -> list[str]:
    """A refreshed candidate whose packages are the public image's leaves that image as it is (its digest, its
    signatures): without this every weekly refresh would republish every image (builder/publish/promote_refresh.py)."""
    return ["--keep-unchanged"] if item.options.refresh else []


def _classes(item: Item, gpus: str | None, shape: CiShape) -> tuple[GpuClass, ...]:
    return shape.classes_for(item) if gpus is not None and item.combo.variant.cuda is not None else ()


def _smoke(candidate: str, gpus: str | None) -> str:
    smoke = ["torchyard", "smoke", candidate, *(["--gpus", gpus or "all", "--require-gpu"] if gpus is not None else [])]
    return f"docker pull {shlex.quote(candidate)} && {shlex.join(smoke)}"


def published_ids(report: Any, repo: str) -> set[str]:
    """The items a `publish --plan --report` of `repo` found up to date there (action `skip`): nothing to build,
    smoke-test or promote."""
    if not isinstance(report, dict) or not isinstance(report.get("items"), list):
        raise UsageError("--plan-report: not a `torchyard publish --plan --report` file (no items)")
    if report.get("repo") != repo:
        raise UsageError(f"--plan-report: a plan of {report.get('repo')!r}, not of --repo {repo!r}")
    return {i["id"] for i in report["items"] if isinstance(i, dict) and i.get("action") == "skip"}


def bake(
    pplan: PublishPlan, repo: str, out_dir: Path, cache_repo: str | None, provenance: dict[str, str] | None = None
) -> dict[str, Any]:
    """docker-bake.json: one common target per plan (context, Dockerfile, args, secrets, cache) that the
    item targets inherit, so `docker buildx bake` builds shared stages once and the items in parallel."""
    targets: dict[str, Any] = {}
    groups: dict[str, list[str]] = {"default": []}
    for item, plan in pplan.planned():
        common = _bake_name(item.group)
        if common not in targets:
            context = out_dir / common
            write_context(plan, context)
            targets[common] = _common_target(plan, context, cache_repo, common)
        target = plan.target(item.flavor)
        member = item.entry.multi_platform  # one platform of an index: <tag>-<arch> (bake writes no index)
        targets[_bake_name(item.id)] = {
            "inherits": [common],
            "target": item.flavor.value,
            "platforms": [plan.combination.platform.value],
            "tags": [f"{repo}:{pplan.group_of(item).immutable(item)}"] if member else list(tag_refs(repo, target)),
            "labels": dict(target.labels) | (provenance or {}) | plan.build_labels(),
        }
        groups["default"].append(_bake_name(item.id))
    return {"group": {name: {"targets": names} for name, names in groups.items()}, "target": targets}


def _common_target(plan: Plan, context: Path, cache_repo: str | None, name: str) -> dict[str, Any]:
    common: dict[str, Any] = {
        "context": str(context),
        "dockerfile": "Dockerfile",
        "args": dict(plan.build_args),
        "secret": [f"id={s.id},src={s.source}" for s in plan.secrets if s.source != "generated"],
        # buildx's default provenance would wrap each image in an index with an attestation manifest (another
        # digest than `torchyard build`'s, which passes --provenance=false and attaches its own after the smoke suite)
        "attest": ["type=provenance,disabled=true"],
    }
    if cache_repo:
        common["cache-from"] = [f"type=registry,ref={cache_repo}:{name}"]
        common["cache-to"] = [f"type=registry,ref={cache_repo}:{name},mode=max"]
    return common


def _bake_name(text: str) -> str:
    """Bake target names allow [a-zA-Z0-9_-]."""
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in text)
