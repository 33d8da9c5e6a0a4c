"""What the user asked for, parsed and checked against the matrix (flags -> Query)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from builder.core.archs import Arch, parse_arch
from builder.core.errors import UsageError
from builder.core.kinds import Platform, did_you_mean, parse_platform
from builder.core.versions import Driver, parse_release, parse_spec, torch_build_parts
from builder.matrix.drivers import driver_flag
from builder.matrix.model import Host, Matrix
from builder.resolve.gpus import Gpu, find_gpu


@dataclass(frozen=True, kw_only=True)
class Query:
    """A parsed lookup/explain request; None / () means not asked. `archs` are every GPU the combination must
    run on (the --arch list, else the --gpu architectures); `platform` is always set."""

    driver: Driver | None = None
    archs: tuple[Arch, ...] = ()
    gpus: tuple[Gpu, ...] = ()
    torch: SpecifierSet | None = None
    cuda: SpecifierSet | None = None
    python: SpecifierSet | None = None
    os: str | None = None
    variant: str | None = None
    forward_compat: bool = False
    platform: Platform = Platform.AMD64
    platform_given: bool = False  # --platform (or the GPU's host) chose it, not this machine
    inference: bool = False  # about the inference image: the onnxruntime rule is asked too
    onnxruntime: Version | None = None  # --onnxruntime: this release, checked, instead of the newest that fits


@dataclass(frozen=True, kw_only=True)
class RawQuery:
    """Flag values as typed; `parse_query` turns them into a Query or one UsageError. An empty string is a
    value (and refused), not "not given"."""

    driver: str | None = None
    archs: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    torch: str | None = None
    cuda: str | None = None
    python: str | None = None
    os: str | None = None
    variant: str | None = None
    forward_compat: bool = False
    platform: str | None = None
    inference: bool = False
    onnxruntime: str | None = None


def parse_query(m: Matrix, raw: RawQuery) -> Query:
    raw = torch_build(m, raw)
    named = tuple(find_gpu(m, g) for g in raw.gpus)  # one per --gpu, as _check_agree pairs them with the texts
    gpus = tuple(dict.fromkeys(named))
    archs = tuple(dict.fromkeys(known_arch(m, a) for a in raw.archs))
    _check_agree(raw, named, archs)
    platform, given = _platform(raw.platform, gpus)
    return Query(
        driver=driver_flag(m, raw.driver) if raw.driver is not None else None,
        archs=archs or tuple(dict.fromkeys(g.arch for g in gpus)),
        gpus=gpus,
        torch=parse_spec(raw.torch, "--torch") if raw.torch is not None else None,
        cuda=_cuda_spec(raw.cuda) if raw.cuda is not None else None,
        python=parse_spec(raw.python, "--python") if raw.python is not None else None,
        os=_known_os(m, raw.os) if raw.os is not None else None,
        variant=_known_variant(m, raw.variant) if raw.variant is not None else None,
        forward_compat=raw.forward_compat,
        platform=platform,
        platform_given=given,
        inference=raw.inference or raw.onnxruntime is not None,
        onnxruntime=parse_release(raw.onnxruntime, "--onnxruntime") if raw.onnxruntime is not None else None,
    )


def torch_build(m: Matrix, raw: RawQuery) -> RawQuery:
    """--torch as torch.__version__ prints it (2.5.1+cu124, 2.5.1+cpu) is --torch 2.5.1 --variant cu124; a --variant
    that names another build is refused, naming both."""
    if raw.torch is None or (build := torch_build_parts(raw.torch)) is None:
        return raw
    text, (release, local) = raw.torch.strip(), build
    local = _known_variant(m, local, f"--torch {text!r}")
    if raw.variant is not None and raw.variant != local:
        other = _known_variant(m, raw.variant)
        raise UsageError(
            f"--torch {text!r} is the {local} build, --variant {other!r} another: give one of them "
            f"(--torch {release} --variant {local}, or --torch {release} --variant {other})"
        )
    return replace(raw, torch=release, variant=local)


def _check_agree(raw: RawQuery, gpus: tuple[Gpu, ...], archs: tuple[Arch, ...]) -> None:
    """--arch and --gpu together: every GPU named must be one of the architectures given."""
    if not gpus or not archs:
        return
    bases = {a.base for a in archs}
    for text, gpu in zip(raw.gpus, gpus, strict=True):
        if gpu.arch not in bases:
            names = " ".join(a.name for a in archs)
            raise UsageError(f"--arch {names} contradicts --gpu {text!r}, which is {gpu.arch.name}")


def _platform(text: str | None, gpus: tuple[Gpu, ...]) -> tuple[Platform, bool]:
    """--platform; else the platform of a GPU that sits only in Arm servers (GH200, GB200, DGX Spark); else
    this machine's own (linux/amd64 where torch has no Linux wheels for it)."""
    if text is not None:
        return parse_platform(text), True
    if any(g.host is Host.SBSA for g in gpus):
        return Platform.ARM64, True
    return Platform.here() or Platform.AMD64, False


def known_arch(m: Matrix, text: str) -> Arch:
    arch = parse_arch(text)
    names = [a.name for a in m.archs]
    if arch.name not in names:
        raise UsageError(
            f"--arch: {text!r} is not a GPU architecture in the matrix{did_you_mean(arch.name, names)}"
            f" (known: {', '.join(n for n in names if n[-1].isdigit())})"
        )
    return arch


_CU = re.compile(r"cu([0-9]{2})([0-9]?)", re.ASCII)


def _cuda_spec(text: str) -> SpecifierSet:
    """12, 12.4, '>=12.4', and the wheel spellings cu124 (12.4) and cu12 (any 12.x)."""
    match = _CU.fullmatch(text.strip())
    if match:
        text = f"{match[1]}.{match[2]}" if match[2] else match[1]
    return parse_spec(text, "--cuda")


def _known_os(m: Matrix, name: str) -> str:
    names = [o.name for o in m.os]
    if name not in names:
        raise UsageError(
            f"--os: {name!r} is not an OS base in the matrix{did_you_mean(name, names)} (known: {', '.join(names)})"
        )
    return name


def _known_variant(m: Matrix, name: str, flag: str = "--variant") -> str:
    names = sorted({v.name for t in m.torch for v in t.variants})
    if name not in names:
        raise UsageError(
            f"{flag}: {name!r} is not a wheel variant in the matrix{did_you_mean(name, names)}"
            f" (known: {', '.join(names)})"
        )
    return name
