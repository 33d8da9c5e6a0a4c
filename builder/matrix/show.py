"""Views of single matrix entries (`torchyard matrix show`) and the release x variant grid."""

from __future__ import annotations

from typing import Any

from builder.errors import UsageError
from builder.kinds import did_you_mean
from builder.matrix.model import Matrix
from builder.versions import minor_of, minor_str

KINDS = ("torch", "cuda", "arch", "cudnn", "os")


def show(m: Matrix, kind: str, name: str) -> dict[str, Any]:
    views = {"torch": _torch, "cuda": _cuda, "arch": _arch, "cudnn": _cudnn, "os": _os}
    if kind not in views:
        raise UsageError(f"matrix show: {kind!r} is not one of {', '.join(KINDS)}{did_you_mean(kind, KINDS)}")
    return views[kind](m, name)


def _missing(kind: str, name: str, known: list[str]) -> UsageError:
    return UsageError(
        f"matrix show {kind}: {name!r} is not in the matrix{did_you_mean(name, known)}"
        f" (known: {', '.join(known[:12])}{' ...' if len(known) > 12 else ''})"
    )


def _torch(m: Matrix, name: str) -> dict[str, Any]:
    release = next((t for t in m.torch if str(t.version) == name), None)
    if release is None:
        raise _missing("torch", name, [str(t.version) for t in m.torch])
    return {
        "version": str(release.version),
        "released": release.released,
        "pypi_default": release.pypi_default,
        "python": list(release.python),
        "platform_tag": release.platform_tag,
        "torchvision": str(release.torchvision),
        "torchaudio": str(release.torchaudio),
        "variants": [
            {
                "name": v.name,
                "cuda": minor_str(v.cuda) if v.cuda else None,
                "cuda_runtime": v.cuda_runtime,
                "cudnn": str(v.cudnn) if v.cudnn else None,
                "nccl": str(v.nccl) if v.nccl else None,
                "sass": [a.name for a in v.sass] if v.sass is not None else None,
                "ptx": [a.name for a in v.ptx],
                "note": v.note or None,
                "sources": list(v.sources),
            }
            for v in release.variants
        ],
        "sources": list(release.sources),
    }


def _cuda(m: Matrix, name: str) -> dict[str, Any]:
    """A full release (12.4.1) or a minor (12.4: its newest release)."""
    matches = [c for c in m.cuda if str(c.version) == name or minor_str(c.version) == name]
    if not matches:
        raise _missing("cuda", name, [str(c.version) for c in m.cuda])
    release = max(matches, key=lambda c: c.version)
    major = next(c for c in m.cuda_majors if c.major == release.version.major)
    archs = [a.name for a in m.archs if a.nvcc_supports(release.version)]
    return {
        "version": str(release.version),
        "min_driver": str(release.min_driver) if release.min_driver else None,
        "mvc_min_driver": str(major.mvc_min_driver) if major.mvc_min_driver else None,
        "nvcc_archs": archs,
        "releases_in_minor": [str(c.version) for c in matches],
        "images": [
            {"cuda": str(i.cuda), "os": list(i.os), "cudnn_tag": i.cudnn_tag}
            for i in m.cuda_images
            if minor_of(i.cuda) == minor_of(release.version)
        ],
        "note": release.note or None,
        "sources": list(release.sources) + list(major.sources),
    }


def _arch(m: Matrix, name: str) -> dict[str, Any]:
    from builder.archs import parse_arch

    try:
        wanted = parse_arch(name).name
    except UsageError:
        wanted = name
    info = next((a for a in m.archs if a.name == wanted), None)
    if info is None:
        raise _missing("arch", name, [a.name for a in m.archs])
    return {
        "name": info.name,
        "compute_capability": info.arch.cc,
        "family": info.family,
        "min_cuda": str(info.nvcc_added) if info.nvcc_added else None,
        "removed_in": str(info.nvcc_removed) if info.nvcc_removed else None,
        "renamed_to": info.renamed_to,
        "gpus": list(info.gpus),
        "datacenter_gpus": list(info.datacenter_gpus),
        "embedded_gpus": list(info.embedded_gpus),
        "sources": list(info.sources),
    }


def _cudnn(m: Matrix, name: str) -> dict[str, Any]:
    from packaging.version import InvalidVersion, Version

    try:
        wanted = Version(name)
    except InvalidVersion:
        wanted = None
    found = next((c for c in m.cudnn if c.label == name or (wanted is not None and wanted in c.versions)), None)
    if found is None:
        raise _missing("cudnn", name, [c.label for c in m.cudnn])
    return {
        "label": found.label,
        "versions": str(found.versions),
        "cuda_majors": list(found.cuda_majors),
        "cuda_tested": found.cuda_tested,
        "min_driver": {f"cuda{major}": str(d) for major, d in found.min_driver},
        "min_arch": found.min_arch.name if found.min_arch else None,
        "max_arch": found.max_arch.name if found.max_arch else None,
        "note": found.note or None,
        "sources": list(found.sources),
    }


def _os(m: Matrix, name: str) -> dict[str, Any]:
    base = next((o for o in m.os if o.name == name), None)
    if base is None:
        raise _missing("os", name, [o.name for o in m.os])
    images = [f"{i.cuda}" for i in m.cuda_images if name in i.os]
    return {
        "name": base.name,
        "image": base.image,
        "family": base.family,
        "system_python": base.system_python,
        "glibc": str(base.glibc),
        "python_images": list(base.python_images),
        "nvidia_cuda_releases": images,
        "sources": list(base.sources),
    }


def grid(m: Matrix) -> tuple[list[str], list[list[str]]]:
    """torch releases x CUDA variants: '*' PyPI default, '+' published, '.' not published."""
    variants = [*sorted({v.name for t in m.torch for v in t.variants if v.name != "cpu"}), "cpu"]
    rows = []
    for release in reversed(m.torch):
        names = {v.name for v in release.variants}
        marks = ["*" if v == release.pypi_default else "+" if v in names else "." for v in variants]
        rows.append([str(release.version), *marks, f"{release.python[0]}-{release.python[-1]}"])
    return ["TORCH", *variants, "PYTHON"], rows
