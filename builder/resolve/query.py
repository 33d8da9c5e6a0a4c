"""What the user asked for, parsed and checked against the matrix (flags -> Query)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet

from builder.archs import Arch, parse_arch
from builder.errors import UsageError
from builder.kinds import GpuClass, did_you_mean
from builder.matrix.model import Matrix
from builder.versions import Driver, parse_driver, parse_spec


@dataclass(frozen=True)
class Gpu:
    """A GPU named with --gpu: its architecture and class."""

    name: str
    arch: Arch
    kind: GpuClass


@dataclass(frozen=True, kw_only=True)
class Query:
    """A parsed lookup/explain request; None means not asked."""

    driver: Driver | None = None
    arch: Arch | None = None
    gpu: Gpu | None = None
    torch: SpecifierSet | None = None
    cuda: SpecifierSet | None = None
    python: SpecifierSet | None = None
    os: str | None = None
    variant: str | None = None
    forward_compat: bool = False


@dataclass(frozen=True, kw_only=True)
class RawQuery:
    """Flag values as typed; `parse_query` turns them into a Query or one UsageError."""

    driver: str | None = None
    arch: str | None = None
    gpu: str | None = None
    torch: str | None = None
    cuda: str | None = None
    python: str | None = None
    os: str | None = None
    variant: str | None = None
    forward_compat: bool = False


def parse_query(m: Matrix, raw: RawQuery) -> Query:
    gpu = find_gpu(m, raw.gpu) if raw.gpu else None
    arch = known_arch(m, raw.arch) if raw.arch else None
    if gpu and arch and arch.base != gpu.arch:
        raise UsageError(f"--arch {arch.name} contradicts --gpu {raw.gpu!r}, which is {gpu.arch.name}")
    return Query(
        driver=parse_driver(raw.driver) if raw.driver else None,
        arch=arch or (gpu.arch if gpu else None),
        gpu=gpu,
        torch=parse_spec(raw.torch, "--torch") if raw.torch else None,
        cuda=_cuda_spec(raw.cuda) if raw.cuda else None,
        python=parse_spec(raw.python, "--python") if raw.python else None,
        os=_known_os(m, raw.os) if raw.os else None,
        variant=_known_variant(m, raw.variant) if raw.variant else None,
        forward_compat=raw.forward_compat,
    )


def known_arch(m: Matrix, text: str) -> Arch:
    arch = parse_arch(text)
    names = [a.name for a in m.archs]
    if arch.name not in names:
        raise UsageError(
            f"--arch: {text!r} is not a GPU architecture in the matrix{did_you_mean(arch.name, names)}"
            f" (known: {', '.join(n for n in names if n[-1].isdigit())})"
        )
    return arch


def _normalise(name: str) -> str:
    words = re.sub(r"[^a-z0-9]+", " ", name.lower()).split()
    return " ".join(w for w in words if w not in {"nvidia", "geforce", "tesla"})


def find_gpu(m: Matrix, text: str) -> Gpu:
    """Match a GPU name as people and nvidia-smi write it: 'RTX 4090', 'NVIDIA H100 80GB HBM3', 'Tesla T4'."""
    wanted = _normalise(text)
    best: Gpu | None = None
    best_len = 0
    for info in m.archs:
        for kind, names in (
            (GpuClass.CONSUMER, info.gpus),
            (GpuClass.DATACENTER, info.datacenter_gpus),
            (GpuClass.EMBEDDED, info.embedded_gpus),
        ):
            for name in names:
                known = _normalise(name)
                if _matches(wanted, known) and len(known) > best_len:
                    best, best_len = Gpu(name, info.arch, kind), len(known)
    if best is None:
        raise UsageError(
            f"--gpu: {text!r} is not a GPU the matrix knows{_closest_gpu(m, wanted)};"
            " give its architecture instead (--arch sm_89)"
        )
    return best


def _closest_gpu(m: Matrix, wanted: str) -> str:
    """A "did you mean" over names as typed without vendor words (RTX 4900 -> GeForce RTX 4090)."""
    names = {_normalise(n): n for a in m.archs for n in (*a.gpus, *a.datacenter_gpus, *a.embedded_gpus)}
    import difflib  # only an error needs it

    close = difflib.get_close_matches(wanted, list(names), n=1, cutoff=0.75)
    return f" (did you mean {names[close[0]]!r}?)" if close else ""


def _matches(wanted: str, known: str) -> bool:
    if wanted == known or wanted.replace(" ", "") == known.replace(" ", ""):
        return True
    return wanted.startswith(known + " ")


def _cuda_spec(text: str) -> SpecifierSet:
    match = re.fullmatch(r"cu(\d+)(\d)", text.strip())
    if match:
        text = f"{match[1]}.{match[2]}"
    return parse_spec(text, "--cuda")


def _known_os(m: Matrix, name: str) -> str:
    names = [o.name for o in m.os]
    if name not in names:
        raise UsageError(
            f"--os: {name!r} is not an OS base in the matrix{did_you_mean(name, names)} (known: {', '.join(names)})"
        )
    return name


def _known_variant(m: Matrix, name: str) -> str:
    names = sorted({v.name for t in m.torch for v in t.variants})
    if name not in names:
        raise UsageError(
            f"--variant: {name!r} is not a wheel variant in the matrix{did_you_mean(name, names)}"
            f" (known: {', '.join(names)})"
        )
    return name
