"""The publish set planned once, before anything runs: groups of items sharing one build plan, and the
aliases each group's images carry. Pure (no engine, no registry): `publish` executes it, the exports and
`publish --dry-run` print it, so all four read the same tags and content hashes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from builder.core.errors import TorchyardError
from builder.matrix.model import Matrix
from builder.pipeline.multiplatform import combined_hash, index_tags
from builder.pipeline.plan import Plan, make_plan
from builder.publish.items import Excluded, Item
from builder.render.tags import ImageTags, member_tag
from builder.resolve.rules.arch import arch_support
from builder.resolve.rules.check import ArchSupport


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
        """The tag the item's image is pushed under: its immutable tag, or <tag>-<arch> as one platform of a
        multi-platform image (the index takes the platform-free tags)."""
        assert self.plan is not None, "an unplanned group has no tags"
        tag = self.plan.target(item.flavor).tags.immutable
        return member_tag(tag, item.combo.platform) if item.entry.multi_platform else tag


@dataclass(frozen=True)
class IndexMember:
    """One platform's image of a multi-platform image: pushed as `tag` (<immutable>-<arch>)."""

    item: Item
    tag: str
    content_hash: str
    selected: bool  # this run builds it; else (--only) the registry must already hold it with this content


@dataclass(frozen=True)
class IndexPlan:
    """One multi-platform image: a member per platform, and the index written over their images (under the
    platform-free immutable tag; its aliases move with the others). `tags` is None when a member could not be
    planned (`problem` says why): the index is then held."""

    id: str
    members: tuple[IndexMember, ...]
    tags: ImageTags | None
    content_hash: str = ""
    problem: str = ""

    @property
    def selected(self) -> tuple[Item, ...]:
        return tuple(m.item for m in self.members if m.selected)


@dataclass(frozen=True)
class AliasMove:
    """A floating tag, the image it should name (`owner`: the newest torch among its carriers), and every
    item that carries it: it moves only when all of them passed. `index`: the owner's multi-platform image
    (the alias then names its index)."""

    alias: str
    owner: Item
    carriers: tuple[Item, ...]
    index: IndexPlan | None = None


@dataclass(frozen=True)
class PublishPlan:
    groups: tuple[Group, ...]
    excluded: tuple[Excluded, ...]
    aliases: tuple[AliasMove, ...]
    indexes: tuple[IndexPlan, ...] = ()

    @property
    def items(self) -> tuple[Item, ...]:
        return tuple(i for g in self.groups for i in g.items)

    def group_of(self, item: Item) -> Group:
        return next(g for g in self.groups if g.name == item.group)

    def planned(self) -> tuple[tuple[Item, Plan], ...]:
        """Every item whose group planned, with its plan (the exports and the dry run list these)."""
        return tuple((i, g.plan) for g in self.groups if g.plan is not None for i in g.items)


def plan_publish(
    m: Matrix, items: list[Item], excluded: list[Excluded], every: list[Item] | None = None
) -> PublishPlan:
    """`items`: what this run builds; `every`: the whole set (default: `items`), for the platforms of a
    multi-platform image this run does not build (--only, one platform per CI job) but its index lists."""
    members: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        members[item.group].append(item)
    groups = tuple(_group(m, name, tuple(group_items)) for name, group_items in members.items())
    indexes = _indexes(m, groups, every if every is not None else items)
    return PublishPlan(groups, tuple(excluded), _aliases(groups, indexes), indexes)


def _group(m: Matrix, name: str, items: tuple[Item, ...]) -> Group:
    first = items[0]
    problem = _arch_problem(first)
    if problem is not None:  # before any build, up to date or not: a policy reaches what is published too
        return Group(name, items, None, problem)
    try:
        return Group(name, items, make_plan(m, first.combo, first.options))
    except TorchyardError as exc:
        return Group(name, items, None, str(exc))


def _arch_problem(item: Item) -> str | None:
    """The entry's require_archs against the GPU code matrix.toml records for the torch build: an arch it has no
    code for (no SASS that runs there, no PTX to compile) fails the group at plan time. Not recorded: the check
    in the built image decides (it runs only when the image is built)."""
    c, required = item.combo, item.entry.require_archs
    if not required:
        return None
    if c.variant.cuda is None:
        return f"require_archs {' '.join(a.name for a in required)}: a CPU build of torch carries no GPU code"
    if c.sass is None:
        return None
    missing = [a.name for a in required if arch_support(a, c.sass, c.ptx)[0] is ArchSupport.NONE]
    if not missing:
        return None
    code = " ".join(a.name for a in c.sass) + (f"; PTX {' '.join(a.name for a in c.ptx)}" if c.ptx else "; no PTX")
    return f"require_archs {' '.join(missing)}: torch {c.local_version} carries no code for it ({code}; matrix.toml)"


def _indexes(m: Matrix, groups: tuple[Group, ...], every: list[Item]) -> tuple[IndexPlan, ...]:
    """The multi-platform images with at least one platform in this run, by entry and platform-free id."""
    plans = {item.id: g.plan for g in groups for item in g.items}
    selected = {key for item in plans if (key := _key_of(every, item))}
    found: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for item in every:
        if item.entry.multi_platform and (item.entry.name, item.index_id) in selected:
            found[(item.entry.name, item.index_id)].append(item)
    return tuple(_index(m, ident, tuple(items), plans) for (_, ident), items in found.items())


def _key_of(every: list[Item], ident: str) -> tuple[str, str] | None:
    item = next((i for i in every if i.id == ident), None)
    return (item.entry.name, item.index_id) if item is not None and item.entry.multi_platform else None


def _index(m: Matrix, ident: str, items: tuple[Item, ...], planned: dict[str, Plan | None]) -> IndexPlan:
    members, plans = [], {}
    for item in items:
        plan, problem = planned.get(item.id), "its group could not be planned"
        if item.id not in planned:
            try:
                plan = make_plan(m, item.combo, item.options)
            except TorchyardError as exc:
                problem = str(exc)
        if plan is None:
            return IndexPlan(ident, (), None, problem=f"{item.id}: {problem}")
        tag = member_tag(plan.target(item.flavor).tags.immutable, item.combo.platform)
        members.append(IndexMember(item, tag, plan.content_hash, item.id in planned))
        plans[item.combo.platform] = plan
    tags = index_tags({p: plan.target(items[0].flavor).tags for p, plan in plans.items()})
    return IndexPlan(ident, tuple(members), tags, combined_hash({p: plan.content_hash for p, plan in plans.items()}))


def _aliases(groups: tuple[Group, ...], indexes: tuple[IndexPlan, ...]) -> tuple[AliasMove, ...]:
    """Single images carry their plan's aliases; a multi-platform image's aliases are its index's."""
    carriers: dict[str, list[Item]] = defaultdict(list)
    index_of: dict[str, IndexPlan] = {}
    for group in groups:
        if group.plan is None:
            continue
        for item in group.items:
            if not item.entry.multi_platform:
                for alias in group.plan.target(item.flavor).tags.aliases:
                    carriers[alias].append(item)
    for index in indexes:
        for alias in index.tags.aliases if index.tags else ():
            carriers[alias] += index.selected  # the others are checked in the registry when the index is written
            index_of.update({item.id: index for item in index.selected})
    moves = []
    for alias, carried in sorted(carriers.items()):
        owner = max(carried, key=lambda i: i.combo.torch.version)
        moves.append(AliasMove(alias, owner, tuple(carried), index_of.get(owner.id)))
    return tuple(moves)
