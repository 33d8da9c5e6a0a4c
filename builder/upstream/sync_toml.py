"""The entries of a sync proposal as matrix.toml text (with where each fact was read), their place in the
file (releases and companions stay oldest first), and the check that the result is a valid matrix."""

from __future__ import annotations

import re
import tempfile
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from builder.core.errors import MatrixError
from builder.core.kinds import Platform
from builder.matrix import load_matrix
from builder.upstream.sync import Proposal, Variant

_HEADER = re.compile(r"^\[\[(\w+)\]\]\s*$")


def quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def toml_list(values: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(quote(v) for v in values) + "]"


def companion_blocks(p: Proposal) -> dict[str, str]:
    blocks = {}
    for name, (comp, new, how) in p.companions.items():
        if not new:
            continue
        lines = [f"# matrix sync: {how}", f"[[{name}]]", f"version = {quote(str(comp.version))}"]
        lines.append(f"requires_torch = {quote(str(comp.requires_torch))}")
        if comp.python is not None:
            lines.append(f"python = {quote(str(comp.python))}  # no wheels for the Pythons it leaves out")
        lines.append(f"source = {quote(f'pypi-{name}')}")
        blocks[name] = "\n".join(lines) + "\n"
    return blocks


def cuda_blocks(p: Proposal) -> list[tuple[Version, str]]:
    return [
        (
            Version(release),
            f"# matrix sync: pinned by torch {p.version} (cuda-toolkit=={release})\n[[cuda]]\n"
            f"version = {quote(release)}\n"
            f'note = "minimum driver not recorded: Table 3 of the CUDA {release} release notes"\n'
            'source = "pypi-cuda-toolkit"\n',
        )
        for release in p.cuda
    ]


def torch_block(p: Proposal) -> str:
    amd = next((w for w in p.platforms if w.platform is Platform.AMD64), None)
    if amd is None:
        raise MatrixError(f"torch {p.version} has no linux x86_64 wheels on PyPI: the matrix needs them")
    said = f"matrix sync: PyPI's file list of torch {p.version} (Pythons, platform tags, first upload) and the "
    said += "METADATA of its newest-Python wheel per platform (pins)."
    comment = [said] + [f"Not recorded: {text}." for text in p.not_recorded]
    lines = [
        *(f"# {line}" for text in comment for line in textwrap.wrap(text, 100)),
        "[[torch]]",
        f"version = {quote(str(p.version))}",
        f"released = {quote(p.released)}",
        f"pypi_default = {quote(p.defaults[Platform.AMD64])}",
        f"python = {toml_list(amd.pythons)}",
        f"platform_tag = {quote(amd.tag)}",
        f"torchvision = {quote(str(p.companions['torchvision'][0].version))}",
        f"torchaudio = {quote(str(p.companions['torchaudio'][0].version))}",
        'source = "pypi-torch"',
        "",
    ]
    for variant in p.variants:
        lines += _variant(variant)
    arm = next((w for w in p.platforms if w.platform is Platform.ARM64), None)
    if arm is not None:
        lines += [
            "[torch.arm64]",
            f"pypi_default = {quote(p.defaults[Platform.ARM64])}",
            f"python = {toml_list(arm.pythons)}",
            f"platform_tag = {quote(arm.tag)}",
            'source = "pypi-torch-aarch64"',
            "",
        ]
    return "\n".join(lines)


def _variant(v: Variant) -> list[str]:
    lines = ["[[torch.variants]]", f"name = {quote(v.name)}"]
    if v.evidence:
        lines.insert(0, f"# read from {v.evidence} METADATA")
    for key in ("cuda", "cuda_runtime", "cudnn", "nccl"):
        value = getattr(v, key)
        if value is not None:
            lines.append(f"{key} = {quote(value)}")
    notes = list(v.notes) + (
        ["compiled architectures not recorded (matrix sync): see the comment above"] if v.cuda else []
    )
    if notes:
        lines.append(f"note = {quote('; '.join(notes))}")
    lines.append(f"source = {toml_list(list(v.sources)) if len(v.sources) > 1 else quote(v.sources[0])}")
    lines.append("")
    if v.arm64 is not None:
        lines.append("[torch.variants.arm64]")
        lines += [f"{key} = {quote(value)}" for key, value in v.arm64.items() if key != "source"]
        lines += [f"source = {quote(v.arm64['source'])}", ""]
    return lines


SOURCES = {
    "pypi-torch": (
        "PyPI torch: wheel files (python and platform tags) and requires_dist pins per release",
        "https://pypi.org/project/torch/#history",
    ),
    "pypi-torchvision": (
        "PyPI torchvision: wheels and the torch requirement each release declares",
        "https://pypi.org/project/torchvision/#history",
    ),
    "pypi-torchaudio": (
        "PyPI torchaudio: wheels and the torch requirement each release declares",
        "https://pypi.org/project/torchaudio/#history",
    ),
    "pypi-torch-aarch64": (
        "PyPI torch linux aarch64 wheels: file names (Python and platform tags), METADATA and torch/version.py",
        "https://pypi.org/project/torch/#files",
    ),
    "pytorch-cpu-index": (
        "PyTorch CPU-only wheel index (download.pytorch.org/whl/cpu) listed for every release on pytorch.org",
        "https://pytorch.org/get-started/previous-versions/",
    ),
    "pytorch-wheel-index": (
        "PyTorch's wheel indexes, download.pytorch.org/whl/<variant>: each variant's wheel files and METADATA",
        "https://download.pytorch.org/whl/",
    ),
    "pypi-cuda-toolkit": (
        "PyPI cuda-toolkit meta-package releases pinned by torch wheels",
        "https://pypi.org/project/cuda-toolkit/#history",
    ),
}


def source_blocks(p: Proposal, have: set[str]) -> list[str]:
    used = {"pypi-torch"} | {s for v in p.variants for s in v.sources}
    used |= {v.arm64["source"] for v in p.variants if v.arm64} | (
        {"pypi-torch-aarch64"} if len(p.platforms) > 1 else set()
    )
    used |= {f"pypi-{n}" for n, (_, new, _) in p.companions.items() if new} | (
        {"pypi-cuda-toolkit"} if p.cuda else set()
    )
    return [
        f'[sources.{sid}]\ntitle = {quote(SOURCES[sid][0])}\nurl = {quote(SOURCES[sid][1])}\nconfidence = "verified"\n'
        for sid in sorted(used - have)
    ]


def render(p: Proposal, have: set[str]) -> str:
    parts = [*source_blocks(p, have), *(block for _, block in cuda_blocks(p))]
    parts += [*companion_blocks(p).values(), torch_block(p)]
    return "\n".join(parts)


# --- into the file -----------------------------------------------------------------------------------------


def insert(text: str, p: Proposal, have: set[str]) -> str:
    """The matrix text with the proposal's entries in their places (each after a blank line)."""
    lines = text.splitlines(keepends=True)
    edits = [(after_sources(lines), block) for block in source_blocks(p, have)]
    edits += [(_position(lines, "cuda", version), block) for version, block in cuda_blocks(p)]
    edits += [(_position(lines, name, p.companions[name][0].version), b) for name, b in companion_blocks(p).items()]
    edits.append((_position(lines, "torch", p.version), torch_block(p)))
    for at, block in sorted(edits, key=lambda e: -e[0]):
        lines[at:at] = ["\n", *(f"{line}\n" for line in block.rstrip("\n").split("\n"))]
    return "".join(lines)


def _position(lines: list[str], table: str, version: Version) -> int:
    """The line index where a new [[table]] entry for `version` goes: before the first newer entry, else
    after the last entry of that table (with its sub-tables)."""
    starts = [i for i, line in enumerate(lines) if _HEADER.match(line) and _HEADER.match(line)[1] == table]  # type: ignore[index]
    if not starts:
        raise MatrixError(f"the matrix has no [[{table}]] entries to place the new one beside")
    for start in starts:
        found = next(
            (
                re.match(r'^version = "([^"]+)"', line)
                for line in lines[start : start + 4]
                if line.startswith("version")
            ),
            None,
        )
        if found and Version(found[1]) > version:
            return _back_over_comments(lines, start)
    return end_of_entry(lines, starts[-1])


def after_sources(lines: list[str]) -> int:
    last = max(i for i, line in enumerate(lines) if line.startswith("[sources."))
    at = last + 1
    while at < len(lines) and lines[at].strip() and not lines[at].startswith("["):
        at += 1
    return at


@dataclass(frozen=True)
class Block:
    """One [[table]] entry of the file: its lines [start, end) with its sub-tables, and its own keys."""

    start: int
    end: int
    keys: dict[str, Any]


def blocks(lines: list[str], table: str) -> list[Block]:
    """Every [[table]] entry in the file's lines, in order."""
    found = []
    for start, line in enumerate(lines):
        header = _HEADER.match(line)
        if header is None or header[1] != table:
            continue
        end = end_of_entry(lines, start)
        own = next((at for at in range(start + 1, end) if lines[at].startswith("[")), end)
        found.append(Block(start, end, tomllib.loads("".join(lines[start + 1 : own]))))
    return found


def end_of_entry(lines: list[str], start: int) -> int:
    """After the entry at `start` and the sub-tables that belong to it, before the next entry or section."""
    at = start + 1
    table = _HEADER.match(lines[start])[1]  # type: ignore[index]
    while at < len(lines):
        line = lines[at]
        header = _HEADER.match(line)
        if header and header[1] != table and not header[1].startswith(f"{table}."):
            break
        if line.startswith("[[") and not line.startswith(f"[[{table}."):
            break
        if line.startswith("# ---") or (header and header[1] == table):
            break
        at += 1
    while at > start and not lines[at - 1].strip():
        at -= 1
    return at


def _back_over_comments(lines: list[str], start: int) -> int:
    at = start
    while at > 0 and lines[at - 1].startswith("#") and not lines[at - 1].startswith("# ---"):
        at -= 1
    return at


def check(text: str, name: str) -> None:
    """The text loads as a matrix (every check of `matrix check`); MatrixError names the line otherwise."""
    with tempfile.TemporaryDirectory(prefix="torchyard-sync-") as tmp:
        path = Path(tmp) / name
        path.write_text(text)
        load_matrix(path)
