"""`torchyard matrix sync --torch X`: the matrix.toml entries upstream can source for a torch release the
matrix does not have yet, each fact with where it was read; what metadata cannot tell is marked "not
recorded" with where to find it. A human reviews the diff; the result passes `matrix check`."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from builder.core.errors import NoMatchError, UpstreamError, UsageError
from builder.core.kinds import Platform
from builder.core.versions import minor_str
from builder.matrix.model import Companion, Matrix
from builder.net.http import Http
from builder.resolve.facts import Facts
from builder.upstream.index import PYPI, ProjectPage, read_project
from builder.upstream.lazywheel import WheelError, read_member, read_metadata
from builder.upstream.wheels import Metadata, Wheel, by_version, parse_metadata, pins

PYTORCH_INDEX = "https://download.pytorch.org/whl"
_VERSION_PY = re.compile(r"^torch/version\.py$")
ARCHS_WHERE = (
    "compiled architectures (sass, ptx) are not in the wheel's metadata: read the -gencode list of "
    "libtorch_cuda.so in the wheel, or run `torchyard smoke IMAGE` (torch.cuda.get_arch_list())"
)


@dataclass
class PlatformWheels:
    platform: Platform
    pythons: tuple[str, ...]
    tag: str
    newest: Wheel  # the wheel whose METADATA the pins are read from


@dataclass
class Variant:
    name: str
    cuda: str | None = None
    cuda_runtime: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    evidence: str = ""
    notes: list[str] = field(default_factory=list)
    arm64: dict[str, str] | None = None  # the [torch.variants.arm64] keys, when it has arm64 wheels
    sources: tuple[str, ...] = ("pypi-torch",)


@dataclass
class Proposal:
    version: Version
    released: str
    platforms: list[PlatformWheels]
    variants: list[Variant]
    defaults: dict[Platform, str]
    companions: dict[str, tuple[Companion, bool, str]]  # name -> (release, new entry?, how it was chosen)
    cuda: list[str]  # new [[cuda]] releases the pins name
    not_recorded: list[str]  # what upstream metadata cannot tell, and where to find it


def propose(m: Matrix, http: Http, version: Version, pypi: str = PYPI, pytorch_index: str = PYTORCH_INDEX) -> Proposal:
    if any(r.version == version for r in m.torch):
        raise UsageError(f"--torch {version}: the matrix has it already (torchyard matrix verify --torch {version})")
    page = index_page(http, pypi, "torch")
    found = by_version(page.files, "torch").get(version)
    if not found:
        newest = max((v for v in by_version(page.files, "torch") if not v.local), default=None)
        raise NoMatchError(f"{page.url} lists no torch {version} wheels (newest: {newest})")
    platforms = [p for p in (_platform_wheels(found, plat) for plat in Platform) if p is not None]
    variants, defaults, cuda = _variants(m, http, platforms)
    amd = next((p for p in platforms if p.platform is Platform.AMD64), None)
    found_more, unseen = _index_variants(m, http, pytorch_index, version, amd, {v.name for v in variants})
    variants = sorted([*variants, *found_more], key=lambda v: (v.name == "cpu", v.name))
    times = [w.file.upload_time for w in found if w.file.upload_time]
    released = min(times)[:7] if times else ""
    companions = {name: _companion(m, http, pypi, name, version, platforms) for name in ("torchvision", "torchaudio")}
    not_recorded = [ARCHS_WHERE]
    if unseen:
        not_recorded.append(
            f"whether {', '.join(unseen)} exist for torch {version}: {pytorch_index} could not be read; list "
            f"{pytorch_index}/<variant>/torch/ (pytorch/test-infra generate_binary_build_matrix.py names the variants)"
        )
    not_recorded.append(
        f"variants newer than the last release's: list {pytorch_index}/ (the variant names are in pytorch/test-infra "
        "generate_binary_build_matrix.py)"
    )
    return Proposal(version, released, platforms, variants, defaults, companions, cuda, not_recorded)


def _index_variants(
    m: Matrix, http: Http, index: str, version: Version, amd: PlatformWheels | None, have: set[str]
) -> tuple[list[Variant], list[str]]:
    """The previous release's variants that PyTorch's index lists for this one (linux x86_64 wheels with
    the variant's local label), with the pins of their newest-Python wheel; the names it could not check."""
    previous = max((r for r in m.torch if r.version < version), key=lambda r: r.version, default=None)
    names = [v.name for v in previous.variants if v.name not in have] if previous else []
    found, unseen = [], []
    for name in names:
        try:
            page = read_project(http, f"{index.rstrip('/')}/{name}", "torch")
        except (UpstreamError, ValueError):
            unseen.append(name)
            continue
        listed = by_version(page.files, "torch").get(Version(f"{version}+{name}"), []) if page else []
        wheels = [w for w in listed if _x86(w)]
        if not wheels or amd is None:
            continue
        newest = max(wheels, key=lambda w: w.file.filename)
        variant = _pins_of_index_variant(m, http, name, newest, amd)
        variant.evidence = newest.file.filename
        found.append(variant)
    return found, unseen


def _x86(wheel: Wheel) -> bool:
    return any(p.endswith("x86_64") and "linux" in p for p in wheel.platforms)


def _pins_of_index_variant(m: Matrix, http: Http, name: str, wheel: Wheel, amd: PlatformWheels) -> Variant:
    match = re.fullmatch(r"cu(\d+)(\d)", name)
    if match is None:
        return Variant(name, sources=("pytorch-wheel-index",))
    pinned = _from_pins(m, _metadata(http, wheel), amd, [])
    variant = pinned if pinned.name == name else Variant(name)
    variant.cuda = f"{int(match[1])}.{match[2]}"
    variant.sources = ("pytorch-wheel-index",)
    if pinned.name != name:
        variant.notes.append("its wheels pin no CUDA runtime: cuDNN and NCCL not recorded")
    return variant


def index_page(http: Http, index: str, project: str) -> ProjectPage:
    try:
        page = read_project(http, index, project)
    except UpstreamError:
        raise
    except ValueError as exc:
        raise UpstreamError(f"cannot read {index}/{project}/: {exc}") from None
    if page is None:
        raise NoMatchError(f"{index} has no project {project}")
    return page


def _platform_wheels(found: list[Wheel], platform: Platform) -> PlatformWheels | None:
    by_python: dict[str, Wheel] = {}
    tags: Counter[str] = Counter()
    for wheel in found:
        for tag in wheel.tags:
            match = re.fullmatch(r"cp(\d)(\d+)", tag.interpreter)
            manylinux = tag.platform.startswith("manylinux") and tag.platform.endswith(platform.machine)
            if match and tag.abi == tag.interpreter and manylinux:
                by_python[f"{match[1]}.{match[2]}"] = wheel
                tags[_first_tag(wheel, platform)] += 1
    if not by_python:
        return None
    pythons = tuple(sorted(by_python, key=lambda p: tuple(int(x) for x in p.split("."))))
    return PlatformWheels(platform, pythons, tags.most_common(1)[0][0], by_python[pythons[-1]])


def _first_tag(wheel: Wheel, platform: Platform) -> str:
    """The first platform tag the file name lists (manylinux_2_17_x86_64.manylinux2014_x86_64 -> the first)."""
    names = wheel.file.filename[:-4].split("-")[-1].split(".")
    return next((n for n in names if n.endswith(platform.machine)), names[0])


# --- the variants PyPI serves ----------------------------------------------------------------------------


def _variants(
    m: Matrix, http: Http, platforms: list[PlatformWheels]
) -> tuple[list[Variant], dict[Platform, str], list[str]]:
    variants: dict[str, Variant] = {}
    defaults: dict[Platform, str] = {}
    cuda_releases: list[str] = []
    for pw in platforms:
        meta = _metadata(http, pw.newest)
        found = _from_pins(m, meta, pw, cuda_releases)
        found.evidence = pw.newest.file.filename
        defaults[pw.platform] = found.name
        local = _local(http, pw.newest, found.name)
        if pw.platform is Platform.AMD64:
            variants.setdefault(found.name, found)
        else:
            cpu = Variant("cpu", sources=("pytorch-cpu-index",))
            target = variants.setdefault(found.name, cpu if found.name == "cpu" else found)
            target.arm64 = {"source": "pypi-torch-aarch64"} | ({"local": local} if local != found.name else {})
    variants.setdefault("cpu", Variant("cpu", sources=("pytorch-cpu-index",)))
    ordered = sorted(variants.values(), key=lambda v: (v.name == "cpu", v.name))
    return ordered, defaults, cuda_releases


def _metadata(http: Http, wheel: Wheel) -> Metadata:
    try:
        return parse_metadata(read_metadata(http, wheel.file.url))
    except (WheelError, ValueError) as exc:
        raise UpstreamError(f"cannot read the METADATA of {wheel.file.filename}: {exc}") from None


def _local(http: Http, wheel: Wheel, default: str) -> str:
    """torch.__version__'s local part as the wheel's torch/version.py says ("none" without one)."""
    try:
        text = read_member(http, wheel.file.url, _VERSION_PY)
    except (WheelError, UpstreamError):
        return default
    found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", text)
    if found is None:
        return default
    return found[1].partition("+")[2] or "none"


def _from_pins(m: Matrix, meta: Metadata, pw: PlatformWheels, cuda_releases: list[str]) -> Variant:
    applying = pins(meta, pw.pythons[-1], pw.platform.value)
    toolkit = applying.get("cuda-toolkit")
    runtime = next((r for n, r in applying.items() if re.fullmatch(r"nvidia-cuda-runtime-cu\d+", n)), None)
    pinned = toolkit or runtime
    if pinned is None:
        return Variant("cpu", sources=("pypi-torch-aarch64",) if pw.platform is Platform.ARM64 else ("pypi-torch",))
    release = _exact(pinned)
    if release is None:
        return Variant("cpu", notes=[f"the CUDA pin {pinned} names no exact release"])
    cuda = Version(".".join(release.split(".")[:2]))
    variant = Variant(f"cu{cuda.major}{cuda.minor}", cuda=minor_str(cuda))
    variant.cuda_runtime = f"{pinned.name}=={release}"
    if toolkit is not None and not any(str(c.version) == release for c in m.cuda):
        cuda_releases.append(release)
    cudnn = next((r for n, r in applying.items() if re.fullmatch(r"nvidia-cudnn-cu\d+", n)), None)
    nccl = next((r for n, r in applying.items() if re.fullmatch(r"nvidia-nccl-cu\d+", n)), None)
    variant.nccl = _exact(nccl) if nccl else None
    found = _exact(cudnn) if cudnn else None
    if found is not None:
        covered = Facts(m).cudnn_range(Version(found))
        if covered is not None and cuda.major in covered.cuda_majors:
            variant.cudnn = found
        else:
            variant.notes.append(
                f"cuDNN {found} (pinned) not recorded: no [[cudnn]] range covers it for CUDA {cuda.major}; add the "
                "range from NVIDIA's cuDNN support matrix first"
            )
    return variant


def _exact(requirement: object) -> str | None:
    spec = getattr(requirement, "specifier", None)
    pinned = [s.version for s in spec or () if s.operator == "=="]
    return pinned[0] if len(pinned) == 1 and "*" not in pinned[0] else None


# --- companions ------------------------------------------------------------------------------------------


def _companion(
    m: Matrix, http: Http, pypi: str, name: str, torch: Version, platforms: list[PlatformWheels]
) -> tuple[Companion, bool, str]:
    """The release that pins torch==X (on PyPI or in the matrix), else the newest that accepts X."""
    recorded = m.torchvision if name == "torchvision" else m.torchaudio
    known = [(c.version, c.requires_torch, c) for c in recorded if torch in c.requires_torch]
    page = index_page(http, pypi, name)
    upstream = by_version(page.files, name)
    newest_known = max((c.version for c in recorded), default=None)
    fresh = sorted(v for v in upstream if not v.local and (newest_known is None or v > newest_known))
    read: list[tuple[Version, SpecifierSet, Wheel | None]] = []
    for version in fresh:
        wheel = _linux_wheel(upstream[version])
        requirement = next((r for r in _metadata(http, wheel).requires if r.name.lower() == "torch"), None)
        spec = requirement.specifier if requirement is not None else SpecifierSet()
        if torch in spec:
            read.append((version, spec, wheel))
    candidates: list[tuple[Version, SpecifierSet, Wheel | None]] = [(v, s, None) for v, s, _ in known] + read
    if not candidates:
        raise NoMatchError(f"no {name} release on {page.url} accepts torch {torch}: add the companion by hand")
    exact = [c for c in candidates if str(c[1]) == f"=={torch}"]
    version, spec, chosen_wheel = max(exact or candidates, key=lambda c: c[0])
    if chosen_wheel is None:
        chosen = next(c for c in recorded if c.version == version)
        return chosen, False, f"the matrix's {name} {version} accepts torch{spec}"
    python = _python_gap(page, name, version, platforms)
    companion = Companion(name=name, version=version, requires_torch=spec, python=python, sources=(f"pypi-{name}",))
    return companion, True, f"{chosen_wheel.file.filename} METADATA: Requires-Dist torch{spec or ' (any)'}"


def _linux_wheel(wheels: list[Wheel]) -> Wheel:
    """The wheel whose METADATA stands for the release: a Linux x86_64 one where there is one."""
    return next((w for w in wheels if any(p.endswith("x86_64") and "linux" in p for p in w.platforms)), wheels[-1])


def _python_gap(page: ProjectPage, name: str, version: Version, platforms: list[PlatformWheels]) -> SpecifierSet | None:
    """A Python range narrower than torch's where the companion has no wheels for the newest Pythons."""
    wheels = by_version(page.files, name)[version]
    served = {
        f"{t.interpreter[2]}.{t.interpreter[3:]}"
        for w in wheels
        for t in w.tags
        if re.fullmatch(r"cp\d+", t.interpreter)
    }
    if any(t.interpreter.startswith("py3") for w in wheels for t in w.tags):
        return None  # one wheel for every Python 3
    wanted = sorted({p for pw in platforms for p in pw.pythons}, key=lambda p: tuple(int(x) for x in p.split(".")))
    missing = [p for p in wanted if p not in served]
    if not missing:
        return None
    if wanted[-len(missing) :] == missing:  # the newest ones: "<3.13"
        return SpecifierSet(f"<{missing[0]}")
    return SpecifierSet(",".join(f"!={p}.*" for p in missing))
