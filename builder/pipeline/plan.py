"""Combination + options -> a build plan: Dockerfile, context files, args, secrets, targets, tags.

Pure apart from reading the user's extension sources and the smoke package: the executor
(builder.pipeline.pipeline) is the only place that touches Docker.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder import __version__
from builder.core.archs import Arch
from builder.core.errors import RenderError
from builder.core.kinds import Flavor, Installer, Strategy
from builder.engine import BuildRequest
from builder.matrix.model import Matrix
from builder.pipeline.extension_dir import walk_source
from builder.render import contract, notebook
from builder.render.dockerfile_context import dockerfile_context
from builder.render.layers import PLAN_FILE, SPLIT_SCRIPT
from builder.render.network import Secret
from builder.render.options import RenderOptions
from builder.render.spec import ImageSpec, TargetSpec, image_spec
from builder.render.tags import ImageTags
from builder.render.templates import render_dockerfile
from builder.resolve.combos import Combination
from builder.smoke.manifest import Manifest

SMOKE_DIR = Path(__file__).resolve().parents[1] / "smoke"
SPLIT_SOURCE = Path(__file__).resolve().parents[1] / "image" / "venv_layers.py"
GUARD_SCRIPT = "pip_guard.py"  # the image's constraints and its pip launchers (builder/image/pip_guard.py)
GUARD_SOURCE = SPLIT_SOURCE.with_name(GUARD_SCRIPT)
FETCH_SCRIPT = "uv_fetch.py"  # the uv stage's download of uv's binary (builder/image/uv_fetch.py)
FETCH_SOURCE = SPLIT_SOURCE.with_name(FETCH_SCRIPT)
OS_TREE_SCRIPT = "os_delta.sh"  # the os-files stage's tree of what the install wrote (builder/image/os_delta.sh)
OS_TREE_SOURCE = SPLIT_SOURCE.with_name(OS_TREE_SCRIPT)
DOCKERFILE_LABEL = "io.torchyard.dockerfile-sha256"
CONTENT_LABEL = "io.torchyard.content-hash"
REFRESH_LABEL = "io.torchyard.refresh"
# a refresh build's content hash without its token: a refresh may keep the published image only when this is equal
UNREFRESHED_LABEL = "io.torchyard.unrefreshed-content-hash"
REFRESH_ARG = "OS_REFRESH"


@dataclass(frozen=True, kw_only=True)
class TargetPlan:
    flavor: Flavor
    tags: ImageTags
    labels: tuple[tuple[str, str], ...]
    manifest: Manifest


@dataclass(frozen=True, kw_only=True)
class Plan:
    spec: ImageSpec  # every decision about the image (builder/render/spec.py), made once
    dockerfile: str
    context_files: tuple[tuple[str, bytes], ...]
    extension_dirs: tuple[tuple[str, Path], ...]
    build_args: tuple[tuple[str, str], ...]
    secrets: tuple[Secret, ...]
    targets: tuple[TargetPlan, ...]  # every flavor this combination can have; a build picks some
    network_origins: tuple[str, ...]
    content_hash: str

    @property
    def copies(self) -> tuple[tuple[str, Path, str], ...]:
        """What is copied into the context by the checked walk: (its path there, the host path, the flag)."""
        return copies(self.extension_dirs, self.spec)

    @property
    def combination(self) -> Combination:
        return self.spec.combination

    @property
    def strategy(self) -> Strategy:
        return self.spec.strategy

    @property
    def archs(self) -> tuple[Arch, ...]:
        return self.spec.archs

    @property
    def custom_archs(self) -> tuple[Arch, ...]:
        """The --arch list when given (it is part of the tags), else ()."""
        return self.spec.custom_archs

    @property
    def extras(self) -> str | None:
        """tags.extras_id of the options: part of the tags."""
        return self.spec.extras

    @property
    def base_images(self) -> tuple[str, ...]:
        bases = self.spec.bases
        return (bases.os_image,) + ((bases.toolchain_image,) if bases.toolchain_image else ())

    @property
    def unavailable(self) -> tuple[tuple[Flavor, str], ...]:
        """Flavors the combination cannot have, and why."""
        return self.spec.unavailable

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
        return labels | ({REFRESH_LABEL: refresh, UNREFRESHED_LABEL: self.content_with_token("")} if refresh else {})

    def content_with_token(self, token: str) -> str:
        """The content hash this plan would have with `token` as its refresh token ("": none)."""
        args = [(key, value) for key, value in self.build_args if key != REFRESH_ARG]
        args += [(REFRESH_ARG, token)] if token else []
        return content_hash_of(self.dockerfile, tuple(sorted(args)), self.context_files, self.copies)


def make_plan(m: Matrix, c: Combination, options: RenderOptions) -> Plan:
    """Everything a build of this combination needs. The Dockerfile and context depend only on the
    combination and options, never on which targets a build asks for, so the content hash is stable."""
    spec = image_spec(m, c, options)
    targets = tuple(_target(spec, t, options) for t in spec.targets)
    files = _context_files(spec, targets)
    dockerfile = render_dockerfile(dockerfile_context(spec))
    refresh = {REFRESH_ARG: options.refresh} if options.refresh else {}
    build_args = tuple(sorted((options.network.build_args() | refresh).items()))
    ext_dirs = tuple((f"ext/{e.name}", Path(e.spec)) for e in options.extensions if e.kind == "path")
    return Plan(
        spec=spec,
        dockerfile=dockerfile,
        context_files=files,
        extension_dirs=ext_dirs,
        build_args=build_args,
        secrets=options.network.secrets(),
        targets=targets,
        network_origins=options.network.origins,
        content_hash=content_hash_of(dockerfile, build_args, files, copies(ext_dirs, spec)),
    )


def _target(spec: ImageSpec, target: TargetSpec, options: RenderOptions) -> TargetPlan:
    c = spec.combination
    manifest = Manifest(
        torchyard=__version__,
        id=c.id,
        flavor=target.flavor.value,
        strategy=spec.strategy.value,
        base_image=spec.base_image(target.flavor),
        arch_list=tuple(a.name for a in spec.archs),
        min_driver=spec.min_driver,
        nvidia_require_cuda=dict(spec.nvidia_env).get("NVIDIA_REQUIRE_CUDA"),
        immutable_tag=target.tags.immutable,
        extensions=tuple(e.name for e in options.extensions),
        layers=spec.layers.manifest_layers(),
    ).with_values(c.stack())
    return TargetPlan(flavor=target.flavor, tags=target.tags, labels=target.labels, manifest=manifest)


def _context_files(spec: ImageSpec, targets: tuple[TargetPlan, ...]) -> tuple[tuple[str, bytes], ...]:
    files: dict[str, bytes] = {
        "constraints.txt": spec.constraints.encode(),
        PLAN_FILE: spec.layers.to_json().encode(),
        SPLIT_SCRIPT: SPLIT_SOURCE.read_bytes(),
        GUARD_SCRIPT: GUARD_SOURCE.read_bytes(),
        OS_TREE_SCRIPT: OS_TREE_SOURCE.read_bytes(),
        contract.LICENSES_SCRIPT: SPLIT_SOURCE.with_name(contract.LICENSES_SCRIPT).read_bytes(),  # the listing
    }
    if spec.installer is Installer.UV:
        files[FETCH_SCRIPT] = FETCH_SOURCE.read_bytes()
    for target in targets:
        files[f"manifest-{target.flavor.value}.json"] = target.manifest.to_json().encode()
        files[contract.CONTEXT_FILE.format(flavor=target.flavor.value)] = contract.contract_json(spec, target.flavor)
    if any(t.flavor is Flavor.NOTEBOOK for t in targets):  # start.sh, start-notebook.sh, the health check
        files |= {name: SPLIT_SOURCE.with_name(source).read_bytes() for name, source, _ in notebook.SCRIPTS}
    for name, text in spec.additions.files:  # --requirements, --pip: checked against the pins in the spec
        files[name] = text.encode()
    for path in sorted(SMOKE_DIR.glob("*.py")):
        files[f"smoke/{path.name}"] = path.read_bytes()
    return tuple(sorted(files.items()))


def content_hash_of(
    dockerfile: str,
    build_args: tuple[tuple[str, str], ...],
    files: tuple[tuple[str, bytes], ...],
    copied: tuple[tuple[str, Path, str], ...],
) -> str:
    h = hashlib.sha256(dockerfile.encode())
    for key, value in build_args:
        h.update(f"\0arg:{key}={value}".encode())
    for name, data in files:
        h.update(f"\0file:{name}:{len(data)}\0".encode() + data)
    for name, root, flag in copied:  # what write_context copies: the same walk, the same refusals
        for node in walk_source(root, flag):
            if node.kind == "file":
                data = (root / node.rel).read_bytes()[: node.size]
                h.update(f"\0file:{name}/{node.rel}:{len(data)}\0".encode() + data)
            elif node.kind == "link":
                h.update(f"\0link:{name}/{node.rel}->{node.target}\0".encode())
    return h.hexdigest()


def copies(ext_dirs: tuple[tuple[str, Path], ...], spec: ImageSpec) -> tuple[tuple[str, Path, str], ...]:
    sources = tuple((s.context, Path(s.host), s.flag) for s in spec.additions.sources)
    return tuple((name, root, "--extension") for name, root in ext_dirs) + sources


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
    cache: str | None = None,
) -> BuildRequest:
    """The build of one target. `tags=False` builds under no name: the pipeline tags only after
    verification and the smoke suite. `provenance` (builder/core/provenance.py) rides along as build-time labels.
    `cache`: a registry cache repository (--cache), one tag per combination and flavor (cache_tag)."""
    return BuildRequest(
        context=context_dir,
        dockerfile=context_dir / "Dockerfile",
        target=flavor.value,
        build_args=plan.build_args,
        secrets=tuple((s.id, secret_files.get(s.id, s.source)) for s in plan.secrets),
        labels=tuple(sorted((dict(provenance) | plan.build_labels()).items())),
        tags=tag_refs(repo, plan.target(flavor)) if tags else (),
        platform=plan.combination.platform.value,  # always said: the plan's wheels are this platform's
        cache=f"{cache}:{cache_tag(plan, flavor)}" if cache else None,
    )


def cache_tag(plan: Plan, flavor: Flavor) -> str:
    """The registry cache's tag of one target: its combination and flavor (torch2.5.1-cpu-py3.11-debian12-runtime).
    One per target, because each build's export replaces the tag's cache: flavors and platforms sharing one would
    keep only the last build's stages. Every option set of a combination shares it: a miss costs a build, never a
    wrong layer (BuildKit's cache keys are the steps' content)."""
    return f"{plan.id}-{flavor.value}"


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
