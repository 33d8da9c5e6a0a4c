"""`publish --plan`: what a publish would do, asked of the registry, before anything runs (issue 44 item 8).

Each item: build (the registry lacks its immutable tag with this content), skip (it has it), or cannot plan.
Each alias: from the digest it names now to the digest it would name (its image's, when that is published and
up to date; "after the build" when its image is built first), or unchanged when the digests are equal. Reads
only: no build, no push. Printed as Markdown (a CI job's summary, a pull request comment) or JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from builder.pipeline.registry import Registry
from builder.publish.items import WARNING
from builder.publish.plan import AliasMove, PublishPlan

BUILD, SKIP, CANNOT = "build", "skip", "cannot plan"
MOVE, UNCHANGED, AFTER = "move", "unchanged", "moves after the build"
NEW = "(after the build)"


@dataclass(frozen=True)
class PlannedItem:
    id: str
    action: str  # build | skip | cannot plan
    ref: str  # the immutable tag ("" when it cannot be planned)
    digest: str  # what the registry holds under it now ("" when nothing, or it would be rebuilt)
    reason: str = ""


@dataclass(frozen=True)
class PlannedAlias:
    alias: str
    action: str  # move | unchanged | moves after the build
    target: str  # the tag it follows
    before: str  # the digest it names now ("" when the tag does not exist)
    after: str  # the digest it would name (NEW when its image is built first)


@dataclass(frozen=True)
class Preview:
    repo: str
    items: tuple[PlannedItem, ...]
    aliases: tuple[PlannedAlias, ...]
    warnings: tuple[str, ...] = ()  # overlapping publish entries merged (builder/publish/items.py: overlap)

    def as_json(self) -> dict[str, Any]:
        return {"schema": 1, "repo": self.repo, "items": [vars(i) for i in self.items],
                "aliases": [vars(a) for a in self.aliases], "warnings": list(self.warnings)}  # fmt: skip

    def markdown(self) -> str:
        lines = [f"## torchyard publish plan: {self.repo}", "", "| item | action | image | digest now |",
                 "|---|---|---|---|"]  # fmt: skip
        lines += [f"| `{i.id}` | {i.action} | `{i.ref}` | {_short(i.digest) or i.reason or '-'} |" for i in self.items]
        lines += ["", "| alias | action | follows | from | to |", "|---|---|---|---|---|"]
        lines += [f"| `{a.alias}` | {a.action} | `{a.target}` | {_short(a.before) or '(none)'} | {_short(a.after)} |"
                  for a in self.aliases]  # fmt: skip
        counts = {k: sum(1 for i in self.items if i.action == k) for k in (BUILD, SKIP, CANNOT)}
        moves = sum(1 for a in self.aliases if a.action != UNCHANGED)
        lines += ["", f"{counts[BUILD]} to build, {counts[SKIP]} up to date, {counts[CANNOT]} cannot be planned; "
                  f"{moves} of {len(self.aliases)} aliases would move."]  # fmt: skip
        lines += ["", *(f"- {line}" for line in self.warnings)] if self.warnings else []
        return "\n".join(lines) + "\n"


def preview(pplan: PublishPlan, registry: Registry, repo: str) -> Preview:
    """Ask the registry about every item's immutable tag and every alias (single-platform images; a multi-platform
    image's alias follows its index)."""
    items: list[PlannedItem] = []
    digests: dict[str, str] = {}  # item id -> the digest its image has, when it is published and up to date
    for group in pplan.groups:
        for item in group.items:
            if group.plan is None:
                items.append(PlannedItem(item.id, CANNOT, "", "", group.problem.splitlines()[0][:200]))
                continue
            ref = f"{repo}:{group.immutable(item)}"
            current = registry.holding(ref, group.plan.content_hash)
            items.append(PlannedItem(item.id, SKIP if current else BUILD, ref, current or ""))
            if current:
                digests[item.id] = current
    refs = {i.id: i.ref for i in items}
    aliases = [_alias(move, repo, registry, refs, digests) for move in pplan.aliases if move.index is None]
    merged = tuple(f"{e.id} (publish[{e.entry}]): {e.reason}" for e in pplan.excluded if e.reason.startswith(WARNING))
    return Preview(repo, tuple(items), tuple(aliases), merged)


def _alias(
    move: AliasMove, repo: str, registry: Registry, refs: dict[str, str], digests: dict[str, str]
) -> PlannedAlias:
    before = registry.digest(f"{repo}:{move.alias}") or ""
    target = refs.get(move.owner.id) or move.owner.id
    after = digests.get(move.owner.id)
    if after is None:
        return PlannedAlias(move.alias, AFTER, target, before, NEW)
    return PlannedAlias(move.alias, UNCHANGED if before == after else MOVE, target, before, after)


def _short(digest: str) -> str:
    return digest if not digest.startswith("sha256:") else f"`{digest[:19]}`"
