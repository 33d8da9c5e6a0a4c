"""What matrix.toml claims about wheels on the package indexes, as plain data verify can check: per torch
variant and companion release, the index, the version as the index spells it, the Pythons and the
platform with wheels, the platform tag, and the dependency pins the matrix records (each with its line)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from builder.core.kinds import Platform
from builder.matrix.locate import KeyPath, Locator
from builder.matrix.model import Companion, Matrix, TorchRelease, TorchVariant
from builder.resolve.combos import Combination
from builder.resolve.report import index_url
from builder.upstream.index import PYPI
from builder.upstream.platforms import local_label, release_platforms, variant_key, variant_platforms
from builder.upstream.wheels import glibc_floor


@dataclass(frozen=True)
class Pin:
    """A dependency of the wheel the matrix records (expected None: the matrix does not record it)."""

    what: str  # cuDNN, NCCL, CUDA runtime, torch
    names: str  # regular expression over canonical requirement names
    expected: SpecifierSet | None
    where: str
    # Compared on these versions (the matrix's torch releases) rather than as text: drift only where the
    # matrix accepts one that the wheel refuses; a wheel that accepts more is reported, not drift.
    universe: tuple[Version, ...] = ()


@dataclass(frozen=True)
class WheelClaim:
    kind: str  # "torch" or "companions"
    subject: str  # torch 2.5.1 cu124 (PyPI) linux/amd64
    project: str
    version: Version  # as the index spells it: 2.5.1 on PyPI, 2.5.1+cu124 on PyTorch's index
    index_url: str
    platform: str
    pythons: tuple[str, ...]
    platform_tag: str | None  # the exact tag claimed; None: any wheel pip installs under `glibc`
    glibc: Version | None
    complete: bool  # the Python list claims to be complete (more upstream Pythons are drift)
    pins: tuple[Pin, ...]
    requires_python: SpecifierSet | None
    where: str


class Where:
    """file:line of a key path in the matrix file."""

    def __init__(self, path: str) -> None:
        self.name = Path(path).name
        try:
            self._locator: Locator | None = Locator(Path(path).read_text())
        except OSError:
            self._locator = None

    def __call__(self, *path: str | int) -> str:
        line = self._locator.line_of(tuple(path)) if self._locator else None
        return f"{self.name}:{line}" if line else self.name


def wheel_claims(m: Matrix, where: Where, torch: SpecifierSet | None = None) -> list[WheelClaim]:
    claims: list[WheelClaim] = []
    for i, release in enumerate(m.torch):
        if torch is not None and release.version not in torch:
            continue
        for j, variant in enumerate(release.variants):
            claims += _variant_claims(m, release, variant, where, ("torch", i), ("torch", i, "variants", j))
    claims += _companion_claims(m, where, torch)
    return claims


def _variant_claims(
    m: Matrix, release: TorchRelease, variant: TorchVariant, where: Where, rkey: KeyPath, vkey: KeyPath
) -> list[WheelClaim]:
    found = []
    for rp in release_platforms(release):
        if rp.platform not in variant_platforms(release, variant):
            continue
        on_pypi = variant.name == rp.pypi_default
        combination = Combination(release, variant, rp.python[0], m.os[0], rp.platform)
        url = PYPI if on_pypi else (index_url(combination) or PYPI)
        local = local_label(variant, rp.platform)
        version = release.version if on_pypi or not local else Version(f"{release.version}+{local}")
        found.append(
            WheelClaim(
                kind="torch",
                subject=f"torch {release.version} {variant.name} ({'PyPI' if on_pypi else url}) {rp.platform}",
                project="torch",
                version=version,
                index_url=url,
                platform=rp.platform,
                pythons=rp.python,
                platform_tag=rp.platform_tag if on_pypi else None,
                glibc=glibc_floor(rp.platform_tag),
                complete=on_pypi,
                pins=_variant_pins(variant, where, vkey),
                requires_python=None,
                where=where(*rkey, *rp.key, "python") if on_pypi else where(*vkey, *variant_key(rp.platform)),
            )
        )
    return found


def _variant_pins(variant: TorchVariant, where: Where, key: KeyPath) -> tuple[Pin, ...]:
    if variant.cuda is None:
        return ()
    pins = [
        Pin("cuDNN", r"nvidia-cudnn-cu\d+", _exact(variant.cudnn), where(*key, "cudnn")),
        Pin("NCCL", r"nvidia-nccl-cu\d+", _exact(variant.nccl), where(*key, "nccl")),
    ]
    if variant.cuda_runtime:
        runtime = Requirement(variant.cuda_runtime)
        name = re.escape(runtime.name.lower().replace("_", "-"))
        pins.append(Pin("CUDA runtime", name, runtime.specifier, where(*key, "cuda_runtime")))
    else:
        pins.append(Pin("CUDA runtime", r"nvidia-cuda-runtime-cu\d+|cuda-toolkit", None, where(*key)))
    return tuple(pins)


def _exact(version: Version | None) -> SpecifierSet | None:
    return SpecifierSet(f"=={version}") if version is not None else None


def _companion_claims(m: Matrix, where: Where, torch: SpecifierSet | None) -> list[WheelClaim]:
    claims = []
    for kind, companions in (("torchvision", m.torchvision), ("torchaudio", m.torchaudio)):
        for k, comp in enumerate(companions):
            paired = [r for r in m.torch if getattr(r, kind) == comp.version and (torch is None or r.version in torch)]
            if not paired:
                continue
            universe = tuple(r.version for r in m.torch)
            claims += _companion_on_pypi(comp, paired, where, (kind, k), universe)
            claims += _companion_on_variant_indexes(m, comp, paired, where, (kind, k))
    return claims


def _pythons(comp: Companion, releases: list[TorchRelease], platform: Platform) -> tuple[str, ...]:
    """The Pythons the images pair with this companion (those its own Requires-Python admits)."""
    wanted = {p for r in releases for w in r.wheels if w.platform is platform for p in w.python}
    admitted = [p for p in wanted if comp.python is None or Version(p) in comp.python]
    return tuple(sorted(admitted, key=lambda p: tuple(int(x) for x in p.split("."))))


def _glibc(releases: list[TorchRelease], platform: Platform) -> Version | None:
    tags = [w.platform_tag for r in releases for w in r.wheels if w.platform is platform]
    floors = [f for f in (glibc_floor(t) for t in tags) if f is not None]
    return min(floors) if floors else None


def _companion_on_pypi(
    comp: Companion, releases: list[TorchRelease], where: Where, key: KeyPath, universe: tuple[Version, ...]
) -> list[WheelClaim]:
    claims = []
    for platform in sorted({w.platform for r in releases for w in r.wheels}):
        on = [r for r in releases if r.on(platform) is not None]
        claims.append(
            WheelClaim(
                kind="companions",
                subject=f"{comp.name} {comp.version} (PyPI) {platform}",
                project=comp.name,
                version=comp.version,
                index_url=PYPI,
                platform=platform,
                pythons=_pythons(comp, on, platform),
                platform_tag=None,
                glibc=_glibc(on, platform),
                complete=False,
                pins=(
                    Pin("torch requirement", r"torch", comp.requires_torch, where(*key, "requires_torch"), universe),
                ),
                requires_python=comp.python,
                where=where(*key),
            )
        )
    return claims


def _companion_on_variant_indexes(
    m: Matrix, comp: Companion, releases: list[TorchRelease], where: Where, key: KeyPath
) -> list[WheelClaim]:
    """Builds of other variants install the companions from the variant's index (with its local label)."""
    claims = []
    seen: set[tuple[str, str]] = set()
    for release in releases:
        for rp in release_platforms(release):
            for variant in release.variants:
                if variant.name == rp.pypi_default or (variant.name, rp.platform) in seen:
                    continue
                if rp.platform not in variant_platforms(release, variant):
                    continue
                seen.add((variant.name, rp.platform))
                url = index_url(Combination(release, variant, rp.python[0], m.os[0], rp.platform)) or PYPI
                local = local_label(variant, rp.platform)
                users = [r for r in releases if r.variant(variant.name) is not None]
                claims.append(
                    WheelClaim(
                        kind="companions",
                        subject=f"{comp.name} {comp.version} {variant.name} ({url}) {rp.platform}",
                        project=comp.name,
                        version=Version(f"{comp.version}+{local}") if local else comp.version,
                        index_url=url,
                        platform=rp.platform,
                        pythons=_pythons(comp, users, rp.platform),
                        platform_tag=None,
                        glibc=_glibc(users, rp.platform),
                        complete=False,
                        pins=(),
                        requires_python=None,
                        where=where(*key),
                    )
                )
    return claims
