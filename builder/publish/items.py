"""Expand the publish set into items (one image each), selectable by glob on their ids."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from builder.core.errors import MatrixError, UsageError
from builder.core.kinds import Flavor, Platform, Strategy
from builder.matrix.locate import Locator
from builder.matrix.lock import BaseLock
from builder.matrix.model import Matrix, OSBase
from builder.matrix.publish_set import PYPI_DEFAULT, SYSTEM_PYTHON, PublishEntry
from builder.render.network import Network
from builder.render.options import RenderOptions
from builder.render.spec import render_problem
from builder.render.tags import platform_suffix
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.resolver import evaluate


@dataclass(frozen=True)
class Item:
    """One image of the publish set: a combination, a flavor, and the options of its entry."""

    entry: PublishEntry
    combo: Combination
    flavor: Flavor
    options: RenderOptions

    @property
    def id(self) -> str:
        return item_id(self.combo.id, self.flavor, self.options)

    @property
    def index_id(self) -> str:
        """The id of the multi-platform image this item is one platform of (its id without the platform)."""
        return item_id(replace(self.combo, platform=Platform.AMD64).id, self.flavor, self.options)

    @property
    def group(self) -> str:
        """Items of one group share a plan (one Dockerfile, its shared stages built once)."""
        return f"{self.entry.name}/{self.combo.id}"


def item_id(combo_id: str, flavor: Flavor, options: RenderOptions) -> str:
    parts = [combo_id, flavor.value]
    if options.strategy is not Strategy.WHEELS:
        parts.append(options.strategy.value)
    if options.archs:
        parts.append("-".join(f"sm{a.cmake}" for a in options.archs))
    return "-".join(parts)


# What an entry gives the images it names, besides which ones (torch, variants, python, os, flavors): two entries
# naming one image must agree on these (strategy and archs are in the image's id).
IMAGE_SETTINGS = ("installer", "pip", "require_archs", "labels", "platforms")
WARNING = "warning: "  # an excluded image's reason that is a warning, not a problem (overlapping entries merged)


@dataclass(frozen=True)
class Excluded:
    entry: str
    id: str
    reason: str


@dataclass(frozen=True)
class _Unpublished:
    """A combination the entry names but torch does not publish (no such wheel variant)."""

    id: str
    reason: str


def expand(
    m: Matrix,
    network: Network | None = None,
    refresh: str = "",
    base_lock: BaseLock | None = None,
    registry_mirror: str | None = None,
) -> tuple[list[Item], list[Excluded]]:
    items: list[Item] = []
    excluded: list[Excluded] = []
    seen: dict[str, PublishEntry] = {}  # item id -> the entry that builds it
    f = Facts(m)
    for entry in m.publish:
        options = RenderOptions(
            strategy=entry.strategy,
            installer=entry.installer or RenderOptions.installer,
            archs=entry.archs,
            extra_pip=entry.pip,
            family_labels=entry.labels,
            network=network or Network(),
            refresh=refresh,
            base_lock=base_lock,
            registry_mirror=registry_mirror,
        )
        for found in _combinations(m, entry):
            if isinstance(found, _Unpublished):
                excluded += [Excluded(entry.name, item_id(found.id, fl, options), found.reason) for fl in entry.flavors]
                continue
            combos = [replace(found, platform=platform) for platform in entry.platforms]
            problem = _problem(m, f, combos, options)
            for combo in combos:
                for flavor in entry.flavors:
                    ident = item_id(combo.id, flavor, options)
                    why = problem or (overlap(m, seen[ident], entry, ident) if ident in seen else None)
                    if why is not None:  # overlapping entries: merged when alike (the later one says so), else refused
                        excluded.append(Excluded(entry.name, ident, why))
                    else:
                        items.append(Item(entry, combo, flavor, options))
                        seen[ident] = entry
    return items, excluded


def overlap(m: Matrix, first: PublishEntry, later: PublishEntry, ident: str) -> str:
    """An image two entries name: with the same settings, merged (built once, by the first; the later one lists it
    with this warning); with other settings, one of them would be lost: refused (MatrixError, exit 2), naming both
    entries where they are written."""
    differ = [name for name in IMAGE_SETTINGS if getattr(first, name) != getattr(later, name)]
    if not differ:
        return f"{WARNING}merged: publish[{first.name}] also names it, with the same settings, and builds it once"
    raise MatrixError(
        f"{_where(m, later)}: publish[{later.name}]: names {ident}, which publish[{first.name}] ({_where(m, first)}) "
        f"names too with another {', '.join(differ)}: one image has one set of settings; narrow the torch, variants, "
        "python, os or flavors of one entry"
    )


def _where(m: Matrix, entry: PublishEntry) -> str:
    """file:line of the entry's [[publish]] table (the file alone when it cannot be read again)."""
    name = m.publish_file or m.path
    index = next(i for i, e in enumerate(m.publish) if e is entry)
    try:
        line = Locator(Path(name).read_text()).line_of(("publish", index))
    except OSError:
        line = None
    return f"{name}:{line}" if line else name


def _problem(m: Matrix, f: Facts, combos: list[Combination], options: RenderOptions) -> str | None:
    """Why the image cannot be published; on a multi-platform entry, a problem on one platform excludes the
    image on every platform (an index never silently lacks one), and says which."""
    for combo in combos:
        found = _rules_problem(f, combo) or render_problem(m, combo, options.strategy)
        if found is not None:
            return found if len(combos) == 1 else f"on {combo.platform.value}: {found}"
    return None


def _combinations(m: Matrix, entry: PublishEntry) -> Iterator[Combination | _Unpublished]:
    """The entry's combinations on its first platform (whose PyPI default `pypi-default` names)."""
    platform = entry.platforms[0]
    for release in m.torch:
        wheels = release.on(platform)
        if release.version not in entry.torch or wheels is None:
            continue
        for base in (o for o in m.os if o.name in entry.os):
            for variant_name in entry.variants:
                name = wheels.pypi_default if variant_name == PYPI_DEFAULT else variant_name
                variant = release.variant(name)
                for python in _pythons(entry, base):
                    if variant is not None:
                        yield Combination(release, variant, python, base, platform)
                        continue
                    published = ", ".join(v.name for v in release.variants)
                    ident = f"torch{release.version}-{name}-py{python}-{base.name}{platform_suffix(platform)}"
                    yield _Unpublished(ident, f"torch {release.version} publishes no {name} wheels ({published})")


def _pythons(entry: PublishEntry, base: OSBase) -> tuple[str, ...]:
    return tuple(dict.fromkeys(base.system_python if p == SYSTEM_PYTHON else p for p in entry.python))


def _rules_problem(f: Facts, combo: Combination) -> str | None:
    failure = evaluate(f, Query(platform=combo.platform), combo).first_failure
    return None if failure is None else f"{failure.rule}: {failure.reason}"


def on_platforms(items: list[Item], platforms: tuple[Platform, ...]) -> list[Item]:
    """--platform: the items of these platforms only (all without; a multi-platform image's other platforms are
    then read from the registry when its index is written)."""
    return [i for i in items if not platforms or i.combo.platform in platforms]


def select(items: list[Item], patterns: tuple[str, ...]) -> list[Item]:
    """Items whose id matches any glob (all items without patterns); a glob matching nothing is an error."""
    if not patterns:
        return items
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(i.id, pattern) for i in items):
            raise UsageError(
                f"--only {pattern!r} matches no item of the publish set (torchyard matrix publish lists them)"
            )
    return [i for i in items if any(fnmatch.fnmatchcase(i.id, p) for p in patterns)]
