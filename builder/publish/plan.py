"""The publish set planned once, before anything runs: groups of items sharing one build plan, and the
aliases each group's images carry. Pure (no engine, no registry): `publish` executes it, the exports and
`publish --dry-run` print it, so all four read the same tags and content hashes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from builder.errors import TorchyardError
from builder.matrix.model import Matrix
from builder.plan import Plan, make_plan
from builder.publish.items import Excluded, Item


@dataclass(frozen=True)
class Group:
    """Items that share one plan: one Dockerfile, its shared stages built once, one log folder.
    `plan` is None when planning failed (`problem` says why): its items fail, the others go on."""

    name: str
    items: tuple[Item, ...]
    plan: Plan | None
    problem: str = ""

    @property
    def folder(self) -> str:
        return self.name.replace("/", "__")

    @property
    def require_archs(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.items[0].entry.require_archs)

    def immutable(self, item: Item) -> str:
        assert self.plan is not None, "an unplanned group has no tags"
        return self.plan.target(item.flavor).tags.immutable


@dataclass(frozen=True)
class AliasMove:
    """A floating tag, the image it should name (`owner`: the newest torch among its carriers), and every
    item that carries it: it moves only when all of them passed."""

    alias: str
    owner: Item
    carriers: tuple[Item, ...]


@dataclass(frozen=True)
class PublishPlan:
    groups: tuple[Group, ...]
    excluded: tuple[Excluded, ...]
    aliases: tuple[AliasMove, ...]

    @property
    def items(self) -> tuple[Item, ...]:
        return tuple(i for g in self.groups for i in g.items)

    def group_of(self, item: Item) -> Group:
        return next(g for g in self.groups if g.name == item.group)

    def planned(self) -> tuple[tuple[Item, Plan], ...]:
        """Every item whose group planned, with its plan (the exports and the dry run list these)."""
        return tuple((i, g.plan) for g in self.groups if g.plan is not None for i in g.items)


def plan_publish(m: Matrix, items: list[Item], excluded: list[Excluded]) -> PublishPlan:
    members: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        members[item.group].append(item)
    groups = tuple(_group(m, name, tuple(group_items)) for name, group_items in members.items())
    return PublishPlan(groups, tuple(excluded), _aliases(groups))


def _group(m: Matrix, name: str, items: tuple[Item, ...]) -> Group:
    first = items[0]
    try:
        return Group(name, items, make_plan(m, first.combo, first.options))
    except TorchyardError as exc:
        return Group(name, items, None, str(exc))


def _aliases(groups: tuple[Group, ...]) -> tuple[AliasMove, ...]:
    carriers: dict[str, list[Item]] = defaultdict(list)
    for group in groups:
        if group.plan is None:
            continue
        for item in group.items:
            for alias in group.plan.target(item.flavor).tags.aliases:
                carriers[alias].append(item)
    return tuple(
        AliasMove(alias, max(carried, key=lambda i: i.combo.torch.version), tuple(carried))
        for alias, carried in sorted(carriers.items())
    )
