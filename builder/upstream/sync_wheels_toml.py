"""A `matrix sync --nvidia-wheel` proposal as matrix.toml text: the new versions appended to the entry holding the
newest recorded one (its other lines untouched), new [[nvidia_wheel]] entries right after it, and the source they
cite where the file lacks it. Each entry touched is also given as it then reads, for a person to review."""

from __future__ import annotations

import textwrap

from packaging.version import Version

from builder.core.errors import MatrixError
from builder.upstream.sync_toml import Block, after_sources, blocks, quote, toml_list
from builder.upstream.sync_wheels import Group, WheelProposal

SOURCE = "pypi-nvidia-wheels"
_SOURCE_BLOCK = (
    f"[sources.{SOURCE}]\n"
    "title = \"PyPI file lists (PEP 691 JSON) of the NVIDIA library wheels torch's pins install: the Linux platform "
    "tags of each release's wheels\"\n"
    'url = "https://pypi.org/project/nvidia-nccl-cu13/#files"\n'
    'confidence = "verified"\n'
)


def wheel_edits(text: str, p: WheelProposal, have: set[str]) -> tuple[str, list[str]]:
    """The file with the proposal in place, and each entry it touches as it then reads (with a comment why)."""
    lines = text.splitlines(keepends=True)
    holder = _holder_block(lines, p)
    recorded, *new = p.groups
    shown = []
    after = holder.end
    if recorded.versions:
        at, line = _versions_line(lines, holder, recorded.versions)
        lines[at[0] : at[1]] = [line]
        after += 1 - (at[1] - at[0])
        joins = "joins" if len(recorded.versions) == 1 else "join"
        why = f"# matrix sync: {_names(recorded.versions)} {joins} this entry: the same tags ({p.page})\n"
        shown.append(why + "".join(lines[holder.start : after]))
    added = [_new_block(p, group) for group in new]
    lines[after:after] = [f"\n{block}" for block in added]
    shown += added
    if added and SOURCE not in have:
        lines.insert(after_sources(lines), f"\n{_SOURCE_BLOCK}")
        shown.insert(0, _SOURCE_BLOCK)
    return "".join(lines), shown


def _holder_block(lines: list[str], p: WheelProposal) -> Block:
    for block in blocks(lines, "nvidia_wheel"):
        written = block.keys.get("versions", [])
        if block.keys.get("package") == p.package and any(Version(v) == p.newest for v in written):
            return block
    raise MatrixError(f"no [[nvidia_wheel]] entry of {p.package} lists {p.newest} in the file's text")


def _versions_line(lines: list[str], block: Block, versions: list[Version]) -> tuple[tuple[int, int], str]:
    """The lines of the entry's `versions` array, and the one line that replaces them with the releases added."""
    start = next(at for at in range(block.start, block.end) if lines[at].startswith("versions"))
    end = next(at for at in range(start, block.end) if lines[at].split("#")[0].rstrip().endswith("]")) + 1
    written = [*block.keys["versions"], *map(str, versions)]
    return (start, end), f"versions = {toml_list(written)}\n"


def _new_block(p: WheelProposal, group: Group) -> str:
    said = textwrap.wrap(
        f"matrix sync: the tags of {', '.join(group.files)} on {p.page}",
        110,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return (
        "".join(f"# {line}\n" for line in said) + "[[nvidia_wheel]]\n"
        f"package = {quote(p.package)}\n"
        f"versions = {toml_list([str(v) for v in group.versions])}\n"
        f"platform_tags = {toml_list(list(group.tags))}\n"
        f"note = {quote(group.note)}\n"
        f"source = {quote(SOURCE)}\n"
    )


def _names(versions: list[Version]) -> str:
    return ", ".join(map(str, versions))
