"""`publish --plan`: what a publish would do, asked of the registry, before anything runs (issue 44 item 8).

Each item: build (the registry lacks its immutable tag with this content), skip (it has it), or cannot plan; a
build with a refresh token that the run will compare with the published image, and keep that image when no package
changed, says so (builder/publish/refresh_plan.py).
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
from builder.publish.refresh_plan import CONTENT_TOO, NO_COMPARE, TOKEN_ONLY, refresh_kind

BUILD, SKIP, CANNOT = "build", "skip", "cannot plan"
MOVE, UNCHANGED, AFTER = "move", "unchanged", "moves after the build"
AFTER_REFRESH = "moves after the build (to the new image, or to the kept one)"
IF_CHANGED = "moves after the build if a package changed (it names the image a refresh keeps)"
KEPT_IF_SAME = "build (refresh: kept if no package changed)"
NEW_CONTENT_TOO = "build (refresh: its content changed too, so published anew)"
NEW_NOT_RECORDED = "build (refresh: the published image records no content hash without its token, so published anew)"
NEW = "(after the build)"


@dataclass(frozen=True)
class PlannedItem:
    id: str
    action: str  # build | skip | cannot plan
    ref: str  # the immutable tag ("" when it cannot be planned)
    digest: str  # what the registry holds under it now: a skip's, a refresh's that may be kept; else ""
    reason: str = ""
    # a refresh build (refresh_plan.py): "" (none) | token only (may be kept) | content too | not recorded
    refresh: str = NO_COMPARE

    @property
    def shown(self) -> str:
        """The action as the Markdown table says it."""
        if self.refresh == NO_COMPARE:
            return self.action
        return {TOKEN_ONLY: KEPT_IF_SAME, CONTENT_TOO: NEW_CONTENT_TOO}.get(self.refresh, NEW_NOT_RECORDED)


@dataclass(frozen=True)
class PlannedAlias:
    alias: str
    action: str  # move | unchanged | moves after the build | AFTER_REFRESH | IF_CHANGED
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
        lines += [f"| `{i.id}` | {i.shown} | `{i.ref}` | {_short(i.digest) or i.reason or '-'} |" for i in self.items]
        lines += ["", "| alias | action | follows | from | to |", "|---|---|---|---|---|"]
        lines += [f"| `{a.alias}` | {a.action} | `{a.target}` | {_short(a.before) or '(none)'} | {_short(a.after)} |"
                  for a in self.aliases]  # fmt: skip
        counts = {k: sum(1 for i in self.items if i.action == k) for k in (BUILD, SKIP, CANNOT)}
        moves = sum(1 for a in self.aliases if a.action not in (UNCHANGED, IF_CHANGED))
        maybe = sum(1 for a in self.aliases if a.action == IF_CHANGED)
        kept = sum(1 for i in self.items if i.refresh == TOKEN_ONLY)
        some = f" ({kept} kept if no package changed)" if kept else ""
        lines += ["", f"{counts[BUILD]} to build{some}, {counts[SKIP]} up to date, {counts[CANNOT]} cannot be "
                  f"planned; {moves} of {len(self.aliases)} aliases would move"
                  + (f", {maybe} more if a package changed." if maybe else ".")]  # fmt: skip
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
            refresh, keeps = (NO_COMPARE, "") if current else refresh_kind(group.plan, registry, ref)
            items.append(PlannedItem(item.id, SKIP if current else BUILD, ref, current or keeps, refresh=refresh))
            if current:
                digests[item.id] = current
    refs = {i.id: i.ref for i in items}
    kept = {i.id: i.digest for i in items if i.refresh == TOKEN_ONLY}  # item id -> the digest a refresh may keep
    aliases = [_alias(move, repo, registry, refs, digests, kept) for move in pplan.aliases if move.index is None]
    merged = tuple(f"{e.id} (publish[{e.entry}]): {e.reason}" for e in pplan.excluded if e.reason.startswith(WARNING))
    return Preview(repo, tuple(items), tuple(aliases), merged)


def _alias(
    move: AliasMove,
    repo: str,
    registry: Registry,
    refs: dict[str, str],
    digests: dict[str, str],
    kept: dict[str, str],
) -> PlannedAlias:
    before = registry.digest(f"{repo}:{move.alias}") or ""
    target = refs.get(move.owner.id) or move.owner.id
    after = digests.get(move.owner.id)
    if after is None:  # a kept refresh leaves its tag on the published image, and the alias follows the tag
        return PlannedAlias(move.alias, _after_build(kept.get(move.owner.id), before), target, before, NEW)
    return PlannedAlias(move.alias, UNCHANGED if before == after else MOVE, target, before, after)


def _after_build(keeps: str | None, before: str) -> str:
    """An alias whose image is built first: a refresh may keep the image it names now (then it stays)."""
    if keeps is None:
        return AFTER
    return IF_CHANGED if keeps == before else AFTER_REFRESH


def _short(digest: str) -> str:
    return digest if not digest.startswith("sha256:") else f"`{digest[:19]}`"
