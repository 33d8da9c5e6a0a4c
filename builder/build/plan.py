"""Combination + options -> a build plan: Dockerfile, context files, args, secrets, targets, tags.

Pure apart from reading the user's extension sources and the smoke package: the executor
(builder.build.pipeline) is the only place that touches Docker.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder import __version__
from builder.build.extension_dir import walk_extension
from builder.core.archs import Arch
from builder.core.errors import RenderError
from builder.core.kinds import Flavor, Strategy
from builder.engine import BuildRequest
from builder.matrix.model import Matrix
from builder.render import context as ctx
from builder.render.dockerfile_context import dockerfile_context
from builder.render.layers import PLAN_FILE, SPLIT_SCRIPT, layer_plan
from builder.render.network import Secret
from builder.render.options import RenderOptions
from builder.render.pinning import mirrored, pinned
from builder.render.tags import ImageTags, extras_id, image_tags
from builder.render.templates import render_dockerfile
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.report import min_driver
from builder.smoke.manifest import Manifest

SMOKE_DIR = Path(__file__).resolve().parents[1] / "smoke"
SPLIT_SOURCE = Path(__file__).resolve().parents[1] / "image" / "venv_layers.py"
DOCKERFILE_LABEL = "io.torchyard.dockerfile-sha256"
CONTENT_LABEL = "io.torchyard.content-hash"
REFRESH_LABEL = "io.torchyard.refresh"
REFRESH_ARG = "OS_REFRESH"


@dataclass(frozen=True, kw_only=True)
class TargetPlan:
    flavor: Flavor
    tags: ImageTags
    labels: tuple[tuple[str, str], ...]
    manifest: Manifest


@dataclass(frozen=True, kw_only=True)
class Plan:
    combination: Combination
    strategy: Strategy
    archs: tuple[Arch, ...]
    custom_archs: tuple[Arch, ...]  # the --arch list when given (it is part of the tags), else ()
    extras: str | None  # tags.extras_id of the options: part of the tags
    base_images: tuple[str, ...]
    dockerfile: str
    context_files: tuple[tuple[str, bytes], ...]
    extension_dirs: tuple[tuple[str, Path], ...]
    build_args: tuple[tuple[str, str], ...]
    secrets: tuple[Secret, ...]
    targets: tuple[TargetPlan, ...]  # every flavor this combination can have; a build picks some
    unavailable: tuple[tuple[Flavor, str], ...]  # flavors it cannot have, and why
    network_origins: tuple[str, ...]
    content_hash: str

    @property
    def id(self) -> str:
        return self.combination.id

    @property
    def dockerfile_sha256(self) -> str:
        return hashlib.sha256(self.dockerfile.encode()).hexdigest()

    def target(self, flavor: Flavor) -> TargetPlan:
        for target in self.targets:
            if target.flavor is flavor:
                return target
        raise RenderError(f"{flavor.value} is not available for {self.id}: {dict(self.unavailable)[flavor]}")

    def build_labels(self) -> dict[str, str]:
        """Labels given on the command line: they name the Dockerfile, so it cannot carry them."""
        labels = {DOCKERFILE_LABEL: self.dockerfile_sha256, CONTENT_LABEL: self.content_hash}
        refresh = dict(self.build_args).get(REFRESH_ARG)
        return labels | ({REFRESH_LABEL: refresh} if refresh else {})


def make_plan(m: Matrix, c: Combination, options: RenderOptions) -> Plan:
    """Everything a build of this combination needs. The Dockerfile and context depend only on the
    combination and options, never on which targets a build asks for, so the content hash is stable."""
    f = Facts(m)
    archs = ctx.archs_for(c, options)
    ctx.check_archs(m, c, archs)
    bases = mirrored(pinned(ctx.bases(m, c, options.strategy), options.base_lock, c.platform), options.registry_mirror)
    try:
        nvcc = ctx.nvcc_pip(c, options.strategy)
        unavailable: tuple[tuple[Flavor, str], ...] = ()
    except RenderError as exc:
        if options.extensions:
            raise RenderError(f"--extension needs the devel toolchain: {exc}") from None
        nvcc, unavailable = None, ((Flavor.DEVEL, str(exc)),)
    flavors = tuple(fl for fl in Flavor if fl not in dict(unavailable))
    floor = min_driver(f, c)
    targets = tuple(_target(m, f, c, flavor, options, archs, bases, floor) for flavor in flavors)
    files = _context_files(c, options, targets)
    labels = {t.flavor: t.labels for t in targets}
    dockerfile = render_dockerfile(dockerfile_context(f, c, options, archs, bases, nvcc, labels))
    refresh = {REFRESH_ARG: options.refresh} if options.refresh else {}
    build_args = tuple(sorted((options.network.build_args() | refresh).items()))
    ext_dirs = tuple((f"ext/{e.name}", Path(e.spec)) for e in options.extensions if e.kind == "path")
    content = _content_hash(dockerfile, build_args, files, ext_dirs)
    images = (bases.os_image,) + ((bases.toolchain_image,) if bases.toolchain_image else ())
    return Plan(
        combination=c,
        strategy=options.strategy,
        archs=archs,
        custom_archs=archs if options.archs else (),
        extras=extras_id(options),
        base_images=images,
        dockerfile=dockerfile,
        context_files=files,
        extension_dirs=ext_dirs,
        build_args=build_args,
        secrets=options.network.secrets(),
        targets=targets,
        unavailable=unavailable,
        network_origins=options.network.origins,
        content_hash=content,
    )


def _target(
    m: Matrix,
    f: Facts,
    c: Combination,
    flavor: Flavor,
    options: RenderOptions,
    archs: tuple[Arch, ...],
    bases: ctx.Bases,
    floor: str | None,
) -> TargetPlan:
    custom = archs if options.archs else ()
    tags = image_tags(m, c, flavor, options.strategy, custom, extras_id(options))
    labels = tuple(ctx.labels(c, flavor, options.strategy, archs, floor, options))
    env = ctx.nvidia_env(f, c, bases)
    manifest = Manifest(
        torchyard=__version__,
        id=c.id,
        flavor=flavor.value,
        strategy=options.strategy.value,
        base_image=bases.toolchain_image if flavor is Flavor.DEVEL and bases.toolchain_image else bases.os_image,
        arch_list=tuple(a.name for a in archs),
        min_driver=floor,
        nvidia_require_cuda=dict(env).get("NVIDIA_REQUIRE_CUDA"),
        immutable_tag=tags.immutable,
        extensions=tuple(e.name for e in options.extensions),
        layers=layer_plan(c).manifest_layers(),
    ).with_values(c.stack())
    return TargetPlan(flavor=flavor, tags=tags, labels=labels, manifest=manifest)


def _context_files(
    c: Combination, options: RenderOptions, targets: tuple[TargetPlan, ...]
) -> tuple[tuple[str, bytes], ...]:
    files: dict[str, bytes] = {
        "constraints.txt": ctx.constraints(c).encode(),
        PLAN_FILE: layer_plan(c).to_json().encode(),
        SPLIT_SCRIPT: SPLIT_SOURCE.read_bytes(),
    }
    for target in targets:
        files[f"manifest-{target.flavor.value}.json"] = target.manifest.to_json().encode()
    if options.requirements is not None:
        for line in options.requirements.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                ctx.unpinned(c, "--requirements", line.strip())
        files["requirements.txt"] = options.requirements.encode()
    for path in sorted(SMOKE_DIR.glob("*.py")):
        files[f"smoke/{path.name}"] = path.read_bytes()
    return tuple(sorted(files.items()))


def _content_hash(
    dockerfile: str,
    build_args: tuple[tuple[str, str], ...],
    files: tuple[tuple[str, bytes], ...],
    ext_dirs: tuple[tuple[str, Path], ...],
) -> str:
    h = hashlib.sha256(dockerfile.encode())
    for key, value in build_args:
        h.update(f"\0arg:{key}={value}".encode())
    for name, data in files:
        h.update(f"\0file:{name}:{len(data)}\0".encode() + data)
    for name, root in ext_dirs:  # what write_context copies: the same walk, the same refusals
        for node in walk_extension(root):
            if node.kind == "file":
                data = (root / node.rel).read_bytes()[: node.size]
                h.update(f"\0file:{name}/{node.rel}:{len(data)}\0".encode() + data)
            elif node.kind == "link":
                h.update(f"\0link:{name}/{node.rel}->{node.target}\0".encode())
    return h.hexdigest()


def tag_refs(repo: str, target: TargetPlan) -> tuple[str, ...]:
    return tuple(f"{repo}:{tag}" for tag in target.tags.all())


def build_request(
    plan: Plan,
    flavor: Flavor,
    context_dir: Path,
    repo: str,
    secret_files: dict[str, str],
    *,
    tags: bool = True,
    provenance: tuple[tuple[str, str], ...] = (),
) -> BuildRequest:
    """The build of one target. `tags=False` builds under no name: the pipeline tags only after
    verification and the smoke suite. `provenance` (builder/core/provenance.py) rides along as build-time labels."""
    return BuildRequest(
        context=context_dir,
        dockerfile=context_dir / "Dockerfile",
        target=flavor.value,
        build_args=plan.build_args,
        secrets=tuple((s.id, secret_files.get(s.id, s.source)) for s in plan.secrets),
        labels=tuple(sorted((dict(provenance) | plan.build_labels()).items())),
        tags=tag_refs(repo, plan.target(flavor)) if tags else (),
        platform=plan.combination.platform.value,  # always said: the plan's wheels are this platform's
    )


def plan_json(plan: Plan, repo: str, context_dir: Path | None = None) -> dict[str, Any]:
    """The machine-readable plan (no secret content: secrets appear by id and source only)."""
    return {
        "schema": 1,
        "id": plan.id,
        "platform": plan.combination.platform.value,
        "strategy": plan.strategy.value,
        "arch_list": [a.name for a in plan.archs],
        "base_images": list(plan.base_images),
        "dockerfile": str(context_dir / "Dockerfile") if context_dir else "Dockerfile",
        "dockerfile_sha256": plan.dockerfile_sha256,
        "content_hash": plan.content_hash,
        "build_args": dict(plan.build_args),
        "secrets": [{"id": s.id, "source": s.source, "description": s.description} for s in plan.secrets],
        "network": list(plan.network_origins),
        "targets": {
            t.flavor.value: {
                "tags": list(tag_refs(repo, t)),
                "immutable_tag": f"{repo}:{t.tags.immutable}",
                "labels": dict(t.labels) | plan.build_labels(),
                "manifest": t.manifest.to_dict(),
            }
            for t in plan.targets
        },
        "unavailable": {flavor.value: reason for flavor, reason in plan.unavailable},
    }
