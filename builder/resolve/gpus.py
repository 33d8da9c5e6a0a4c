"""GPU names as people and nvidia-smi write them -> the GPU the matrix knows: its architecture, class and host.

"4090", "rtx4090", "RTX 4090 Laptop GPU", "NVIDIA H100 80GB HBM3", "A100-SXM4-80GB", "NVIDIA B300 SXM6 AC", "GB200",
"DGX Spark" all resolve; a name that fits GPUs of different architectures is refused with the candidates, never
guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from builder.core.archs import Arch
from builder.core.errors import UsageError
from builder.core.kinds import GpuClass
from builder.core.versions import Driver
from builder.matrix.model import GpuProduct, Host, Matrix

# Words that say nothing about which chip it is: vendor and brand words, memory, "Laptop".
_NOISE = frozenset(
    {"nvidia", "geforce", "tesla", "gpu", "laptop", "notebook", "mobile"}
    | {"hbm", "hbm2", "hbm2e", "hbm3", "hbm3e", "graphics", "card", "the", "mig"}
    # the developer-kit and marketing words around a product name ("Jetson AGX Thor Developer Kit",
    # "RTX 6000 Ada Generation"): the kit carries the module, the same chip
    | {"developer", "kit", "devkit", "module", "generation"}
)
_MEMORY = re.compile(r"^\d+(gb|g|gib)$", re.ASCII)
# A form factor ends the chip's name: it and every word after it (a memory size, "AC") are dropped, as nvidia-smi
# writes them: "A100-SXM4-80GB", "Tesla V100-PCIE-32GB", "NVIDIA B300 SXM6 AC", "H100 NVL", "GB200 NVL72".
_FORM_FACTOR = re.compile(r"^(sxm\d*|pcie|nvl\d*)$", re.ASCII)
_KIND_ORDER = (GpuClass.CONSUMER, GpuClass.DATACENTER, GpuClass.EMBEDDED)


@dataclass(frozen=True)
class Gpu:
    """A GPU the matrix knows: its name there, architecture, class, the host it sits in, and a driver floor
    of its own where the product needs a later driver than its architecture's first one."""

    name: str
    arch: Arch
    kind: GpuClass
    host: Host = Host.ANY
    driver_min: tuple[Driver, ...] = ()
    sources: tuple[str, ...] = ()


def tokens(name: str) -> tuple[str, ...]:
    """The words that name the chip: up to a form factor, without noise words and memory sizes."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    end = next((i for i, w in enumerate(words) if i and _FORM_FACTOR.match(w)), len(words))
    return tuple(w for w in words[:end] if w not in _NOISE and not _FORM_FACTOR.match(w) and not _MEMORY.match(w))


@dataclass(frozen=True)
class _Known:
    gpu: Gpu
    words: tuple[str, ...]

    @property
    def joined(self) -> str:
        return "".join(self.words)


def catalogue(m: Matrix) -> tuple[_Known, ...]:
    """Every GPU name and alias of the matrix, with its facts (built once per matrix)."""
    cached = _CATALOGUES.get(id(m))
    if cached is None or cached[0] is not m:
        cached = _CATALOGUES[id(m)] = (m, tuple(_build(m)))
    return cached[1]


_CATALOGUES: dict[int, tuple[Matrix, tuple[_Known, ...]]] = {}


def _build(m: Matrix) -> Iterator[_Known]:
    products = {p.name.lower(): p for p in m.gpu_products}
    for info in m.archs:
        for kind, names in (
            (GpuClass.CONSUMER, info.gpus),
            (GpuClass.DATACENTER, info.datacenter_gpus),
            (GpuClass.EMBEDDED, info.embedded_gpus),
        ):
            for name in names:
                product = products.get(name.lower())
                gpu = _gpu(name, info.arch, kind, product, info.sources)
                yield _Known(gpu, tokens(name))
                for alias in product.aliases if product else ():
                    yield _Known(gpu, tokens(alias))


def _gpu(name: str, arch: Arch, kind: GpuClass, product: GpuProduct | None, sources: tuple[str, ...]) -> Gpu:
    if product is None:
        return Gpu(name, arch, kind, sources=sources)
    return Gpu(name, arch, kind, product.host, product.driver_min, sources + product.sources)


def _level(wanted: tuple[str, ...], known: _Known) -> int:
    """How well a typed name fits a known one: 4 the same, 3 its model number (with or without the series
    word), 2 a subset of its words in order, 1 it plus extra words (a variant the matrix does not list)."""
    joined = "".join(wanted)
    if joined == known.joined:
        return 4
    tails = ("".join(known.words[i:]) for i in range(1, len(known.words)))
    if any(joined == tail and any(c.isdigit() for c in tail) for tail in tails):
        return 3
    if _in_order(wanted, known.words):
        return 2
    head = wanted[: len(known.words)]
    if len(wanted) > len(known.words) and head == known.words and any(c.isdigit() for c in known.joined):
        return 1
    return 0


def _in_order(wanted: tuple[str, ...], words: tuple[str, ...]) -> bool:
    rest = iter(words)
    return bool(wanted) and all(any(w == x for x in rest) for w in wanted)


def find_gpu(m: Matrix, text: str, flag: str = "--gpu") -> Gpu:
    wanted = tokens(text)
    if not wanted:
        raise UsageError(f"{flag}: {text!r} names no GPU (examples: 'RTX 4090', 'H100', 'Tesla T4')")
    level, best = _candidates(m, wanted)
    if level == 1:  # a listed name plus words that name another product ("RTX 4090 Ti"): never mapped silently
        raise UsageError(f"{flag}: {text!r} is not a GPU the matrix knows{_did_you_mean(best)}")
    archs = {k.gpu.arch for k in best}
    if len(archs) == 1:  # the closest name; between equals, the card people mean more often (consumer first)
        return min(best, key=lambda k: (len(k.words), _KIND_ORDER.index(k.gpu.kind), k.gpu.name)).gpu
    if len(archs) > 1:
        names = sorted({f"{k.gpu.name} ({k.gpu.arch.name})" for k in best})
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        raise UsageError(f"{flag}: {text!r} fits GPUs of different architectures: {shown}; name one of them")
    raise UsageError(
        f"{flag}: {text!r} is not a GPU the matrix knows{_closest(m, wanted)}; give its architecture instead "
        "(--arch, e.g. sm_86: `nvidia-smi --query-gpu=compute_cap --format=csv` prints it)"
    )


def _candidates(m: Matrix, wanted: tuple[str, ...]) -> tuple[int, list[_Known]]:
    """The same name where there is one; else every name it partly fits (its model number, or some of its
    words), so that "RTX 4000" sees both Quadro RTX 4000 and RTX 4000 Ada; else a listed name plus words
    (level 1: a suggestion, not an answer)."""
    scored = [(_level(wanted, k), k) for k in catalogue(m)]
    for levels in ((4,), (3, 2), (1,)):
        found = [k for level, k in scored if level in levels]
        if found:
            return levels[0], found
    return 0, []


def _did_you_mean(near: list[_Known]) -> str:
    names = sorted({f"{k.gpu.name!r} ({k.gpu.arch.name})" for k in near})
    return f" (did you mean {' or '.join(names[:3])}?)"


def _closest(m: Matrix, wanted: tuple[str, ...]) -> str:
    import difflib  # only an error needs it

    names = {" ".join(k.words): k.gpu.name for k in catalogue(m)}
    close = difflib.get_close_matches(" ".join(wanted), list(names), n=1, cutoff=0.75)
    return f" (did you mean {', '.join(repr(names[c]) for c in close)}?)" if close else ""
