"""Views of single matrix entries (`torchyard matrix show`) and the release x variant grid."""

from __future__ import annotations

from typing import Any

from builder.core.errors import UsageError
from builder.core.kinds import did_you_mean
from builder.core.versions import meets_floors, minor_of, minor_str
from builder.matrix.drivers import driver_flag, unrecorded_driver
from builder.matrix.model import CudaImage, Host, Matrix, TorchVariant

KINDS = ("torch", "cuda", "arch", "cudnn", "os", "driver")
NOT_RECORDED = "not recorded"


def show(m: Matrix, kind: str, name: str) -> dict[str, Any]:
    views = {"torch": _torch, "cuda": _cuda, "arch": _arch, "cudnn": _cudnn, "os": _os, "driver": _driver}
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
        "platforms": {
            w.platform.value: {
                "pypi_default": w.pypi_default,
                "python": list(w.python),
                "platform_tag": w.platform_tag,
                "sources": list(w.sources),
            }
            for w in release.wheels
        },
        "torchvision": str(release.torchvision),
        "torchaudio": str(release.torchaudio),
        "variants": [_variant(v) for v in release.variants],
        "sources": list(release.sources),
    }


def _variant(v: TorchVariant) -> dict[str, Any]:
    """One variant; for a CUDA build, what no source tells is said as "not recorded" in `unrecorded`."""
    data: dict[str, Any] = {
        "name": v.name,
        "cuda": minor_str(v.cuda) if v.cuda else None,
        "cuda_runtime": v.cuda_runtime,
        "cudnn": str(v.cudnn) if v.cudnn else None,
        "nccl": str(v.nccl) if v.nccl else None,
        "sass": [a.name for a in v.sass] if v.sass is not None else None,
        "ptx": [a.name for a in v.ptx],
        "platforms": [b.platform.value for b in v.builds],
        "builds": {
            b.platform.value: {
                "sass": [a.name for a in b.sass] if b.sass is not None else None,
                "ptx": [a.name for a in b.ptx],
                "local": b.local,
                "sources": list(b.sources),
            }
            for b in v.builds[1:]
        },
        "note": v.note or None,
        "sources": list(v.sources),
    }
    if v.cuda is not None:
        data["unrecorded"] = [key for key in ("cuda_runtime", "cudnn", "nccl", "sass") if data[key] is None]
    return data


def _cuda(m: Matrix, name: str) -> dict[str, Any]:
    """A full release (12.4.1), or a minor (12.4: its floor is the minor's GA driver, the lowest sourced one)."""
    matches = [c for c in m.cuda if str(c.version) == name or minor_str(c.version) == name]
    if not matches:
        raise _missing("cuda", name, [str(c.version) for c in m.cuda])
    release = max(matches, key=lambda c: c.version)
    minor = minor_of(release.version)
    asked_minor = minor_str(release.version) == name
    floors = [c.min_driver for c in m.cuda if c.minor == minor and c.min_driver is not None]
    floor = min(floors) if asked_minor and floors else release.min_driver
    major = next(c for c in m.cuda_majors if c.major == release.version.major)
    archs = [a.name for a in m.archs if a.nvcc_supports(release.version)]
    return {
        "version": str(release.version),
        "min_driver": str(floor) if floor else None,
        "mvc_min_driver": str(major.mvc_min_driver) if major.mvc_min_driver else None,
        "reported_by": [b.branch for b in m.driver_branches if b.reports_cuda == minor],
        "nvcc_archs": archs,
        "releases_in_minor": [str(c.version) for c in matches],
        "releases": [
            {"version": str(c.version), "min_driver": str(c.min_driver) if c.min_driver else NOT_RECORDED}
            for c in matches
        ],
        "images": [_image(i) for i in m.cuda_images if minor_of(i.cuda) == minor],
        "note": release.note or None,
        "sources": list(release.sources) + list(major.sources),
    }


def _image(i: CudaImage) -> dict[str, Any]:
    return {
        "cuda": str(i.cuda),
        "os": list(i.os),
        "cudnn_tag": i.cudnn_tag,
        "cudnn": str(i.cudnn) if i.cudnn else None,
        "cudnn_os": list(i.cudnn_os) if i.cudnn_tag else [],
        "fc_branches": list(i.fc_branches),
        "fc_brands": i.fc_brands,
    }


def _arch(m: Matrix, name: str) -> dict[str, Any]:
    from builder.core.archs import parse_arch

    try:
        wanted = parse_arch(name).name
    except UsageError:
        wanted = name
    info = next((a for a in m.archs if a.name == wanted), None)
    if info is None:
        raise _missing("arch", name, [a.name for a in m.archs])
    names = {g.lower() for g in (*info.gpus, *info.datacenter_gpus, *info.embedded_gpus)}
    return {
        "name": info.name,
        "compute_capability": info.arch.cc,
        "family": info.family,
        "min_cuda": str(info.nvcc_added) if info.nvcc_added else None,
        "removed_in": str(info.nvcc_removed) if info.nvcc_removed else None,
        "renamed_to": info.renamed_to,
        "driver_min": [str(d) for d in info.driver_min],
        "driver_last_branch": info.driver_last_branch,
        "gpus": list(info.gpus),
        "datacenter_gpus": list(info.datacenter_gpus),
        "embedded_gpus": list(info.embedded_gpus),
        "products": [
            {
                "name": p.name,
                "driver_min": [str(d) for d in p.driver_min],
                "host": p.host.value,
                "aliases": list(p.aliases),
                "note": p.note or None,
            }
            for p in m.gpu_products
            if p.name.lower() in names
        ],
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


def _driver(m: Matrix, name: str) -> dict[str, Any]:
    """What a driver (550.54.15, or a branch: 550) runs: the CUDA it reports, the CUDA majors it runs through
    minor-version compatibility, and the GPU architectures it supports."""
    drv = driver_flag(m, name, "matrix show driver")
    beyond = unrecorded_driver(m, drv)  # a branch newer than every recorded one: which GPUs it supports is unknown
    branch = next((b for b in m.driver_branches if b.branch == drv.branch), None)
    majors = [c.major for c in m.cuda_majors if c.mvc_min_driver is not None and drv.at_least(c.mvc_min_driver)]
    tegra = {p.name.lower() for p in m.gpu_products if p.host is Host.TEGRA}
    supported: list[str] = []
    not_supported: list[str] = []
    jetson: list[str] = []
    unrecorded: list[str] = []
    for info in (a for a in m.archs if not a.arch.suffix and a.renamed_to is None):  # a rename: listed by its new name
        names = [g.lower() for g in (*info.gpus, *info.datacenter_gpus, *info.embedded_gpus)]
        late = info.driver_last_branch is not None and drv.branch > info.driver_last_branch
        if names and all(n in tegra for n in names):
            jetson.append(info.name)  # Jetson runs L4T's own driver, never this one
        elif (not info.driver_min or beyond) and not late:
            unrecorded.append(info.name)  # no first driver recorded: neither supported nor refused
        else:
            (supported if meets_floors(drv, info.driver_min) and not late else not_supported).append(info.name)
    return {
        "driver": str(drv),
        "exact": drv.exact,
        "branch": drv.branch,
        "reports_cuda": f"{branch.reports_cuda[0]}.{branch.reports_cuda[1]}" if branch else None,
        "cuda_majors": majors,
        "archs": supported,
        "archs_not_supported": not_supported,
        "archs_jetson_l4t": jetson,
        "archs_not_recorded": unrecorded,
        "note": (branch.note or None) if branch else beyond or f"branch {drv.branch} is not in the matrix",
        "sources": list(branch.sources) if branch else [],
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
