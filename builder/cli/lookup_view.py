"""How lookup reads to a person: one row per torch build (its Pythons and OSes collapsed) that fits 100 columns,
the chosen row spelled out with its image tag and pip line; `--wide` for one row per combination."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from builder.cli.output import table
from builder.core.kinds import Flavor, Platform, Strategy
from builder.matrix.model import Matrix
from builder.render.tags import image_tags
from builder.resolve import lifecycle, onnx
from builder.resolve.query import Query
from builder.resolve.report import index_url
from builder.resolve.resolver import Result
from builder.resolve.rules import ArchSupport, DriverMode
from builder.resolve.rules.check import Status
from builder.resolve.verdict import verdict

_DRIVER_SHORT = {
    DriverMode.FULL: "full",
    DriverMode.MINOR_VERSION: "compatible",
    DriverMode.FORWARD_COMPAT: "cuda-compat",
}


# The OS cell's width that keeps lookup's table inside 100 columns.
_OS_CELL = 30


@dataclass(frozen=True)
class Group:
    """The valid combinations of one torch build: one torch release and wheel variant on one platform."""

    results: tuple[Result, ...]

    @property
    def first(self) -> Result:
        return self.results[0]

    @property
    def pythons(self) -> str:
        found = sorted({r.combo.python for r in self.results}, key=lambda p: tuple(map(int, p.split("."))))
        return found[0] if len(found) == 1 else f"{found[0]}-{found[-1]}" if len(found) > 2 else " ".join(found)

    @property
    def oses(self) -> str:
        """debian12 ubuntu20.04/22.04/24.04: one family's releases share its name; '+2': two more (--wide)."""
        by_family: dict[str, list[str]] = {}
        for r in self.results:
            base = r.combo.os
            release = base.name.removeprefix(base.family)
            if release not in by_family.setdefault(base.family, []):
                by_family[base.family].append(release)
        cells = [family + "/".join(releases) for family, releases in by_family.items()]
        shown = cells[:1]
        for cell in cells[1:]:
            if len(" ".join([*shown, cell])) > _OS_CELL:
                break
            shown.append(cell)
        rest = sum(len(by_family[f]) for f in list(by_family)[len(shown) :])
        # Past the cell's width the table says how many more; --wide lists each.
        return " ".join(shown) + (f" +{rest}" if rest else "")


def groups(results: Sequence[Result]) -> list[Group]:
    """Valid results grouped by torch build, in the order of their best member (lookup's ranking)."""
    by_build: dict[tuple[str, str, str], list[Result]] = {}
    for r in results:
        c = r.combo
        by_build.setdefault((str(c.torch.version), c.variant.name, c.platform.value), []).append(r)
    return [Group(tuple(members)) for members in by_build.values()]


def code_words(r: Result) -> str:
    if r.arch_support is None or r.arch_code is None:
        return "-"
    if r.arch_support is ArchSupport.NATIVE:
        return "native"
    if r.arch_support is ArchSupport.COMPATIBLE:
        return f"via {r.arch_code.name}"
    return f"PTX {r.arch_code.name}"


def grouped_table(shown: Sequence[Group], *, driver: bool, arch: bool) -> str:
    headers = ["TORCH", "CUDA", "CUDNN"] + (["DRIVER"] if driver else []) + (["GPU CODE"] if arch else [])
    headers += ["PYTHON", "OS"]
    rows = []
    for g in shown:
        r, v = g.first, g.first.combo.variant
        row = [r.combo.local_version + ("*" if r.unrecorded else ""), str(v.cuda or "-"), str(v.cudnn or "-")]
        row += [driver_cell(r, _DRIVER_SHORT[r.driver_mode] if r.driver_mode else None)] if driver else []
        row += [code_words(r)] if arch else []
        rows.append([*row, g.pythons, g.oses])
    return table(headers, rows)


def wide_table(results: Sequence[Result], *, driver: bool, arch: bool) -> str:
    headers = ["ID", "TORCH", "VISION", "AUDIO", "CUDA", "CUDNN", "NCCL", "PY", "OS"]
    headers += (["DRIVER"] if driver else []) + (["ARCH"] if arch else [])
    rows = []
    for r in results:
        v = r.combo.variant
        row = [r.combo.id + ("*" if r.unrecorded else ""), r.combo.local_version]
        row += [str(r.combo.torch.torchvision), str(r.combo.torch.torchaudio)]
        row += [str(v.cuda or "-"), str(v.cudnn or "-"), str(v.nccl or ("-" if v.cuda is None else "?"))]
        row += [r.combo.python, r.combo.os.name]
        row += [driver_cell(r, r.driver_mode.value if r.driver_mode else None)] if driver else []
        if arch:
            row += [f"{r.arch_support.value} ({r.arch_code.name})" if r.arch_support and r.arch_code else "-"]
        rows.append(row)
    return table(headers, rows)


def driver_cell(r: Result, mode: str | None) -> str:
    """The DRIVER column: how the driver runs the build; `?` where driver-cuda could not check the driver (a branch
    newer than every recorded one); `-` where no driver is involved (a CPU build)."""
    if mode is not None:
        return mode
    return "?" if any(c.rule == "driver-cuda" and c.status is Status.NOT_CHECKED for c in r.checks) else "-"


def answer_words(r: Result, *, here: bool = False) -> str:
    """RUNS, RUNS WITH its conditions, or CANNOT TELL and what to give or record."""
    v = verdict(r.checks, here=here)
    return v.words + (": " + "; ".join(v.unknown) if v.unknown else "")


def lifecycle_lines(m: Matrix, q: Query, r: Result) -> list[str]:
    """The asked driver's branch past its end (and the branch to move to for the asked GPUs), the first row's OS
    past its regular support: one line each (builder/resolve/lifecycle.py)."""
    day = lifecycle.today()
    lines = []
    branch = lifecycle.branch_of(m, q.driver.branch) if q.driver is not None else None
    note = lifecycle.branch_note(branch, day) if branch else None
    if note:
        target = lifecycle.move_to(m, q.archs, day)
        lines.append(f"  note:   {note}" + (f"; {lifecycle.move_line(target)}" if target else ""))
    os_note = lifecycle.os_note(r.combo.os, day)
    if os_note:
        lines.append(f"  note:   {os_note}")
    return lines


def unrecorded_note(shown: Sequence[Result]) -> str | None:
    """The footnote of the rows marked *: what the matrix lacks to check them (they rank below the rest)."""
    marked = [r for r in shown if r.unrecorded]
    if not marked:
        return None
    reasons = list(dict.fromkeys(c.reason for r in marked for c in r.unrecorded))
    more = f"; {len(reasons) - 1} more: explain or --json" if len(reasons) > 1 else ""
    return f"* cannot tell: {len(marked)} row(s) not fully checked ({reasons[0]}{more})"


@dataclass(frozen=True)
class Offer:
    """The image lookup offers for a result: the runtime image, or with --inference the inference image and
    the packages render adds to it (torch.onnx's exporter packages, then the newest ONNX Runtime that fits)."""

    flavor: Flavor = Flavor.RUNTIME
    packages: tuple[str, ...] = ()


def offer_for(m: Matrix, r: Result, *, inference: bool) -> Offer:
    if not inference:
        return Offer()
    return Offer(Flavor.INFERENCE, onnx.packages(m, r.combo))  # what render puts in the image


def image_ref(m: Matrix, r: Result, repo: str = "torchyard", offer: Offer = Offer()) -> str:
    return f"{repo}:{image_tags(m, r.combo, offer.flavor, Strategy.WHEELS, ()).immutable}"


def pip_line(r: Result, offer: Offer = Offer()) -> str:
    """torch from its index, then (--inference) the inference packages from PyPI, as the image installs them."""
    c = r.combo
    index = index_url(c)
    pins = [f"torch=={c.torch.version}", f"torchvision=={c.torch.torchvision}", f"torchaudio=={c.torch.torchaudio}"]
    line = "pip install " + shlex.join(pins + (["--index-url", index] if index else []))
    return line + (f" && pip install {shlex.join(offer.packages)}" if offer.packages else "")


def best_block(m: Matrix, r: Result, *, here: bool = False, offer: Offer = Offer()) -> str:
    c, v = r.combo, r.combo.variant
    unknown = "not recorded"
    stack = f"CUDA {v.cuda}, cuDNN {v.cudnn or unknown}, NCCL {v.nccl or unknown}" if v.cuda else "CPU only"
    where = "" if c.platform is Platform.AMD64 else f", {c.platform.value}"
    lines = [f"best: torch {c.local_version} ({stack}), Python {c.python}, {c.os.name}{where}"]
    lines.append(f"  id:     {c.id}")
    if r.driver_mode is not None:
        lines.append(f"  driver: {r.driver_mode.words}")
    if r.arch_support is not None and r.arch_code is not None:
        lines.append(f"  code:   {r.arch_support.words} ({r.arch_code.name})")
    lines.append(f"  answer: {answer_words(r, here=here)}")
    flags = ["--torch", str(c.torch.version), "--variant", v.name, "--python", c.python, "--os", c.os.name]
    flags += ["--platform", c.platform.value] if c.platform is not Platform.AMD64 else []
    flags += ["--target", offer.flavor.value] if offer.flavor is not Flavor.RUNTIME else []
    lines.append(f"  image:  {image_ref(m, r, offer=offer)}")
    lines.append(f"  build:  torchyard build {shlex.join(flags)}")
    lines.append(f"  pip:    {pip_line(r, offer)}")
    return "\n".join(lines)
