"""Cross-entry checks: references to unknown entries and contradictions between facts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from packaging.version import Version

from builder.core.archs import Arch
from builder.core.errors import MatrixError
from builder.core.kinds import Platform, did_you_mean
from builder.core.versions import minor_of, minor_str
from builder.matrix.locate import KeyPath
from builder.matrix.model import ArchInfo, CudnnRange, Matrix, TorchRelease, TorchVariant
from builder.matrix.publish_check import check_platforms
from builder.matrix.publish_set import check_publish
from builder.matrix.reader import Context
from builder.matrix.wheel_facts import check_wheel_facts

CUDNN_TAGS = ("cudnn8", "cudnn9", "cudnn")


@dataclass(frozen=True)
class _Index:
    """Lookups the per-variant checks share, built once per validation."""

    minors: frozenset[tuple[int, int]]
    minor_names: tuple[str, ...]
    releases: frozenset[Version]
    archs: dict[Arch, ArchInfo]

    @classmethod
    def of(cls, m: Matrix) -> _Index:
        return cls(
            minors=frozenset(minor_of(c.version) for c in m.cuda),
            minor_names=tuple(sorted({minor_str(c.version) for c in m.cuda})),
            releases=frozenset(c.version for c in m.cuda),
            archs={a.arch: a for a in m.archs},
        )


def validate(m: Matrix, ctx: Context) -> None:
    _check_present(m, ctx)
    _check_sources(m, ctx)
    _check_cuda(m, ctx)
    _check_archs(m, ctx)
    ix = _Index.of(m)
    for i, release in enumerate(m.torch):
        _check_torch(m, ctx, i, release, ix)
    _check_os(m, ctx)
    _check_images(m, ctx)
    _check_gpu_products(m, ctx)
    check_publish(
        ctx, m.publish, [o.name for o in m.os], {v.name for t in m.torch for v in t.variants}, {a.name for a in m.archs}
    )
    check_platforms(ctx, m)
    check_wheel_facts(ctx, m)


def _check_present(m: Matrix, ctx: Context) -> None:
    """The tables every answer reads from (a file cut short, or a wrong file, has none of some): named here with
    the line the file ends at, not found later as an empty list deep in a command."""
    tables = (
        ("torch", m.torch),
        ("os", m.os),
        ("cuda", m.cuda),
        ("arch", m.archs),
        ("driver_branch", m.driver_branches),
    )
    for key, found in tables:
        if not found:
            end = ctx.text.count("\n") + (0 if ctx.text.endswith("\n") else 1)
            raise MatrixError(
                f"{ctx.file}:{max(end, 1)}: no [[{key}]] table: the file ends here without one (cut short?)"
            )


def _unknown(ctx: Context, path: KeyPath, label: str, what: str, name: str, known: Iterable[str]) -> None:
    known = list(known)
    ctx.fail(path, label, f"unknown {what} {name!r}{did_you_mean(name, known)}")


def _check_sources(m: Matrix, ctx: Context) -> None:
    tables: list[tuple[str, list[tuple[str, tuple[str, ...]]]]] = [
        ("cuda_major", [(str(e.major), e.sources) for e in m.cuda_majors]),
        ("driver_branch", [(str(e.branch), e.sources) for e in m.driver_branches]),
        ("cuda", [(str(e.version), e.sources) for e in m.cuda]),
        ("arch", [(e.name, e.sources) for e in m.archs]),
        ("cudnn", [(e.label, e.sources) for e in m.cudnn]),
        ("torchvision", [(str(e.version), e.sources) for e in m.torchvision]),
        ("torchaudio", [(str(e.version), e.sources) for e in m.torchaudio]),
        ("torch", [(str(e.version), e.sources) for e in m.torch]),
        ("os", [(e.name, e.sources) for e in m.os]),
        ("cuda_image", [(str(e.cuda), e.sources) for e in m.cuda_images]),
        ("gpu_product", [(e.name, e.sources) for e in m.gpu_products]),
        ("onnxruntime", [(e.id, e.sources) for e in m.onnxruntime]),
        ("onnx_tool", [(e.name, e.sources) for e in m.onnx_tools]),
        ("notebook_tool", [(e.name, e.sources) for e in m.notebook_tools]),
    ]
    for key, entries in tables:
        for i, (name, cited) in enumerate(entries):
            _check_cited(m, ctx, (key, i, "source"), f"{key}[{name}].source", cited)
    for i, release in enumerate(m.torch):
        for wheels in release.wheels[1:]:
            arch = wheels.platform.arch
            _check_cited(
                m, ctx, ("torch", i, arch, "source"), f"torch[{release.version}].{arch}.source", wheels.sources
            )
        for j, variant in enumerate(release.variants):
            path = ("torch", i, "variants", j)
            label = f"torch[{release.version}].variants[{variant.name}]"
            _check_cited(m, ctx, (*path, "source"), f"{label}.source", variant.sources)
            for build in variant.builds[1:]:
                arch = build.platform.arch
                _check_cited(m, ctx, (*path, arch, "source"), f"{label}.{arch}.source", build.sources)


def _check_cited(m: Matrix, ctx: Context, path: KeyPath, label: str, cited: tuple[str, ...]) -> None:
    if not cited:
        ctx.fail(path, label, "every fact needs at least one source")
    for source in cited:
        if source not in m.sources:
            _unknown(ctx, path, label, "source", source, m.sources)


def _check_cuda(m: Matrix, ctx: Context) -> None:
    majors = {c.major for c in m.cuda_majors}
    branches = {b.branch: b for b in m.driver_branches}
    for i, release in enumerate(m.cuda):
        label = f"cuda[{release.version}]"
        if release.version.major not in majors:
            ctx.fail(
                ("cuda", i, "version"), f"{label}.version", f"no [[cuda_major]] entry for CUDA {release.version.major}"
            )
        floor = release.min_driver
        if floor is None:
            continue
        branch = branches.get(floor.branch)
        where, key = ("cuda", i, "min_driver"), f"{label}.min_driver"
        if branch is None:
            ctx.fail(where, key, f"driver branch {floor.branch} has no [[driver_branch]] entry")
        elif branch.reports_cuda < release.minor:
            reported = f"{branch.reports_cuda[0]}.{branch.reports_cuda[1]}"
            ctx.fail(where, key, f"driver branch {floor.branch} reports CUDA {reported}, older than this release")


def _check_archs(m: Matrix, ctx: Context) -> None:
    bases = {a.arch for a in m.archs if not a.arch.suffix}
    names = [a.name for a in m.archs]
    gpus: dict[str, str] = {}
    for i, info in enumerate(m.archs):
        label = f"arch[{info.name}]"
        if info.arch.suffix and info.arch.base not in bases:
            ctx.fail(("arch", i, "name"), f"{label}.name", f"no base architecture {info.arch.base} for this variant")
        added, removed = info.nvcc_added, info.nvcc_removed
        if added is not None and removed is not None and minor_of(added) >= minor_of(removed):
            ctx.fail(
                ("arch", i, "nvcc_removed"), f"{label}.nvcc_removed", f"removed in {removed} but only added in {added}"
            )
        if info.renamed_to is not None and info.renamed_to not in names:
            _unknown(ctx, ("arch", i, "renamed_to"), f"{label}.renamed_to", "architecture", info.renamed_to, names)
        _check_rename_chain(m, ctx, i, info)
        for key, listed in (
            ("gpus", info.gpus),
            ("datacenter_gpus", info.datacenter_gpus),
            ("embedded_gpus", info.embedded_gpus),
        ):
            for gpu in listed:
                if gpu.lower() in gpus:
                    ctx.fail(
                        ("arch", i, key), f"{label}.{key}", f"GPU {gpu!r} is also listed under {gpus[gpu.lower()]}"
                    )
                gpus[gpu.lower()] = info.name


def _check_rename_chain(m: Matrix, ctx: Context, i: int, info: ArchInfo) -> None:
    """renamed_to leads to an architecture that keeps its name, never back to where it started."""
    renames = {a.name: a.renamed_to for a in m.archs}
    seen, name = [info.name], info.renamed_to
    while name is not None:
        if name in seen:
            chain = " -> ".join([*seen, name])
            ctx.fail(("arch", i, "renamed_to"), f"arch[{info.name}].renamed_to", f"renames go round: {chain}")
        seen.append(name)
        name = renames.get(name)


def _check_torch(m: Matrix, ctx: Context, i: int, release: TorchRelease, ix: _Index) -> None:
    label = f"torch[{release.version}]"
    if release.variant(release.pypi_default) is None:
        _unknown(
            ctx,
            ("torch", i, "pypi_default"),
            label + ".pypi_default",
            "variant",
            release.pypi_default,
            (v.name for v in release.variants),
        )
    for key, companions, version in (
        ("torchvision", m.torchvision, release.torchvision),
        ("torchaudio", m.torchaudio, release.torchaudio),
    ):
        match = next((c for c in companions if c.version == version), None)
        if match is None:
            _unknown(ctx, ("torch", i, key), f"{label}.{key}", key, str(version), (str(c.version) for c in companions))
        elif release.version not in match.requires_torch:
            ctx.fail(
                ("torch", i, key),
                f"{label}.{key}",
                f"{key} {version} requires torch{match.requires_torch}, not {release.version}",
            )
    _check_platform_defaults(ctx, i, release)
    seen: dict[str, int] = {}
    for j, variant in enumerate(release.variants):
        if variant.name in seen:
            first = ctx.locator.line_of(("torch", i, "variants", seen[variant.name]))
            ctx.fail(("torch", i, "variants", j), f"{label}.variants[{variant.name}]", f"duplicate variant{_at(first)}")
        seen[variant.name] = j
        _check_variant(m, ctx, ("torch", i, "variants", j), f"{label}.variants[{variant.name}]", variant, ix)


def _check_platform_defaults(ctx: Context, i: int, release: TorchRelease) -> None:
    """Each platform's PyPI default is a variant with wheels for that platform."""
    for wheels in release.wheels:
        variant = release.variant(wheels.pypi_default)
        where = ("torch", i) if wheels.platform is Platform.AMD64 else ("torch", i, wheels.platform.arch)
        label = f"torch[{release.version}]" + ("" if wheels.platform is Platform.AMD64 else f".{wheels.platform.arch}")
        if variant is None:
            names = [v.name for v in release.variants]
            _unknown(ctx, (*where, "pypi_default"), f"{label}.pypi_default", "variant", wheels.pypi_default, names)
        elif variant.build(wheels.platform) is None:
            ctx.fail(
                (*where, "pypi_default"),
                f"{label}.pypi_default",
                f"variant {variant.name} records no {wheels.platform.value} build "
                f"([torch.variants.{wheels.platform.arch}])",
            )
    for variant in release.variants:
        for build in variant.builds:
            if release.on(build.platform) is None:
                ctx.fail(
                    ("torch", i, "variants"),
                    f"torch[{release.version}].variants[{variant.name}].{build.platform.arch}",
                    f"a {build.platform.value} build, but the release records no {build.platform.value} wheels "
                    f"([torch.{build.platform.arch}])",
                )


def _check_gpu_products(m: Matrix, ctx: Context) -> None:
    """A product is a GPU some architecture lists; an alias names no other GPU."""
    known = {g.lower() for a in m.archs for g in (*a.gpus, *a.datacenter_gpus, *a.embedded_gpus)}
    names = sorted({g for a in m.archs for g in (*a.gpus, *a.datacenter_gpus, *a.embedded_gpus)})
    aliases: dict[str, str] = {}
    for i, product in enumerate(m.gpu_products):
        label = f"gpu_product[{product.name}]"
        if product.name.lower() not in known:
            _unknown(ctx, ("gpu_product", i, "name"), f"{label}.name", "GPU", product.name, names)
        for alias in product.aliases:
            if alias.lower() in known or alias.lower() in aliases:
                owner = aliases.get(alias.lower(), alias)
                ctx.fail(("gpu_product", i, "aliases"), f"{label}.aliases", f"{alias!r} already names {owner}")
            aliases[alias.lower()] = product.name


def _at(line: int | None) -> str:
    return f" (the first is at line {line})" if line else ""


def _check_variant(m: Matrix, ctx: Context, path: KeyPath, label: str, v: TorchVariant, ix: _Index) -> None:
    if v.cuda is None:
        if v.name != "cpu":
            ctx.fail(path, label, "a CUDA variant needs `cuda`")
        if any(b.sass or b.ptx for b in v.builds) or v.cudnn or v.nccl:
            ctx.fail(path, label, "the cpu variant has no CUDA libraries or architectures")
        return
    expected = f"cu{v.cuda.major}{v.cuda.minor}"
    if v.name != expected:
        ctx.fail((*path, "cuda"), f"{label}.cuda", f"variant {v.name} cannot carry CUDA {v.cuda} (that is {expected})")
    if minor_of(v.cuda) not in ix.minors:
        _unknown(ctx, (*path, "cuda"), f"{label}.cuda", "CUDA release", str(v.cuda), ix.minor_names)
    if v.cuda_release is not None:
        _check_pinned_release(ctx, path, label, v, ix)
    for build in v.builds:
        where = path if build.platform is Platform.AMD64 else (*path, build.platform.arch)
        name = label if build.platform is Platform.AMD64 else f"{label}.{build.platform.arch}"
        _check_variant_archs(ctx, (*where, "sass"), f"{name}.sass", v.cuda, build.sass or (), ix)
        _check_variant_archs(ctx, (*where, "ptx"), f"{name}.ptx", v.cuda, build.ptx, ix)
    if v.cudnn is not None:
        _check_variant_cudnn(m, ctx, path, label, v.cuda, v.cudnn)


def _check_pinned_release(ctx: Context, path: KeyPath, label: str, v: TorchVariant, ix: _Index) -> None:
    assert v.cuda_release is not None and v.cuda is not None
    if v.cuda_release not in ix.releases:
        known = sorted(map(str, ix.releases))
        _unknown(ctx, (*path, "cuda_runtime"), f"{label}.cuda_runtime", "CUDA release", str(v.cuda_release), known)
    if minor_of(v.cuda_release) != minor_of(v.cuda):
        ctx.fail(
            (*path, "cuda_runtime"),
            f"{label}.cuda_runtime",
            f"pins CUDA {v.cuda_release}, but the variant is CUDA {v.cuda}",
        )


def _check_variant_archs(
    ctx: Context, path: KeyPath, label: str, cuda: Version, archs: tuple[Arch, ...], ix: _Index
) -> None:
    for arch in archs:
        info = ix.archs.get(arch)
        if info is None:
            _unknown(ctx, path, label, "architecture", arch.name, (a.name for a in ix.archs.values()))
        elif not info.nvcc_supports(cuda):
            span = _nvcc_range(info.nvcc_added, info.nvcc_removed)
            ctx.fail(path, label, f"{arch.name} cannot be targeted by CUDA {cuda} ({span})")


def _nvcc_range(added: Version | None, removed: Version | None) -> str:
    start = f"from CUDA {added}" if added else "from before CUDA 10.0"
    return f"{start}, removed in {removed}" if removed else start


def _check_variant_cudnn(m: Matrix, ctx: Context, path: KeyPath, label: str, cuda: Version, cudnn: Version) -> None:
    found: CudnnRange | None = next((c for c in m.cudnn if cudnn in c.versions), None)
    if found is None:
        ctx.fail((*path, "cudnn"), f"{label}.cudnn", f"cuDNN {cudnn} is in no [[cudnn]] range")
    elif cuda.major not in found.cuda_majors:
        ctx.fail(
            (*path, "cudnn"),
            f"{label}.cudnn",
            f"cuDNN {cudnn} has no build for CUDA {cuda.major} (builds: {', '.join(map(str, found.cuda_majors))})",
        )


def _check_os(m: Matrix, ctx: Context) -> None:
    for i, base in enumerate(m.os):
        if base.python_images and "{python}" not in base.python_image:
            ctx.fail(
                ("os", i, "python_image"),
                f"os[{base.name}].python_image",
                "python_images is set, so python_image needs a {python} placeholder",
            )


def _check_images(m: Matrix, ctx: Context) -> None:
    releases = sorted(str(c.version) for c in m.cuda)
    oses = [o.name for o in m.os]
    for i, image in enumerate(m.cuda_images):
        label = f"cuda_image[{image.cuda}]"
        if str(image.cuda) not in releases:
            _unknown(ctx, ("cuda_image", i, "cuda"), f"{label}.cuda", "CUDA release", str(image.cuda), releases)
        for key, names in (("os", image.os), ("cudnn_os", image.cudnn_os)):
            for name in names:
                if name not in oses:
                    _unknown(ctx, ("cuda_image", i, key), f"{label}.{key}", "OS", name, oses)
        if image.cudnn_tag is not None and image.cudnn_tag not in CUDNN_TAGS:
            ctx.fail(
                ("cuda_image", i, "cudnn_tag"),
                f"{label}.cudnn_tag",
                f"{image.cudnn_tag!r} is not one of {', '.join(CUDNN_TAGS)}{did_you_mean(image.cudnn_tag, CUDNN_TAGS)}",
            )
        if image.fc_brands is not None and image.fc_brands not in m.brand_sets:
            _unknown(
                ctx, ("cuda_image", i, "fc_brands"), f"{label}.fc_brands", "brand set", image.fc_brands, m.brand_sets
            )
