"""Evaluate every rule on every combination, rank what passes, and group why the rest failed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from packaging.version import Version

from builder.core.archs import Arch
from builder.matrix.model import Matrix, OSBase
from builder.resolve import lifecycle
from builder.resolve.combos import Combination, enumerate_combinations, selected
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.rules import (
    COMBO_RULES,
    INFERENCE_RULES,
    VARIANT_RULES,
    ArchSupport,
    Check,
    DriverMode,
    driver_mode,
    worst_support,
)
from builder.resolve.rules.check import Missing


@dataclass(frozen=True)
class Result:
    """A combination with every rule's verdict, and how the driver and the GPU would run it."""

    combo: Combination
    checks: tuple[Check, ...]
    driver_mode: DriverMode | None
    arch_support: ArchSupport | None
    arch_code: Arch | None

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def first_failure(self) -> Check | None:
        return next((check for check in self.checks if not check.ok), None)

    @property
    def unrecorded(self) -> tuple[Check, ...]:
        """The rules not checked because the matrix lacks a fact (lookup ranks these below known-good ones)."""
        return tuple(c for c in self.checks if c.missing is Missing.FACT)


@dataclass(frozen=True)
class Lookup:
    """What lookup found: the valid combinations ranked, the rejected ones, and filter notes."""

    valid: tuple[Result, ...]
    rejected: tuple[Result, ...]
    notes: tuple[str, ...]  # why a filter admitted nothing (no variant, no release, ...)

    def reasons(self) -> list[tuple[str, int]]:
        """The rejected combinations grouped by their first failed rule, most common first."""
        counts = Counter(f"{r.first_failure.reason}" for r in self.rejected if r.first_failure)
        return [(note, 0) for note in self.notes] + counts.most_common()


@dataclass(frozen=True)
class _VariantVerdict:
    """The rules that depend only on the wheel variant, evaluated once per variant."""

    checks: tuple[Check, ...]
    driver_mode: DriverMode | None
    arch_support: ArchSupport | None
    arch_code: Arch | None


def _variant_verdict(f: Facts, q: Query, combo: Combination) -> _VariantVerdict:
    checks = tuple(rule(f, q, combo) for rule in VARIANT_RULES)
    cuda, sass = combo.variant.cuda, combo.sass
    mode: DriverMode | None = None
    if q.driver is not None and cuda is not None and f.unrecorded_driver(q.driver) is None:
        mode = driver_mode(f, q, cuda)[0]  # a driver newer than every recorded branch: no mode is known
    support, code = (None, None)
    if q.archs and sass is not None and cuda is not None:
        support, code = worst_support(q.archs, sass, combo.ptx)
    return _VariantVerdict(checks, mode, support, code)


@dataclass
class _Cache:
    """Verdicts shared between combinations: variant rules per wheel variant, the others per
    (wheel variant, Python, OS, platform), since neither depends on the rest of the combination (glibc-os reads the
    variant's NVIDIA wheels)."""

    variants: dict[int, _VariantVerdict]
    combos: dict[tuple[int, str, str, str], tuple[Check, ...]]
    failed: dict[int, bool] = field(default_factory=dict)  # variant -> a variant rule failed (first_valid)


def _verdict(f: Facts, q: Query, combo: Combination, cache: _Cache) -> _VariantVerdict:
    verdict = cache.variants.get(id(combo.variant))
    if verdict is None:
        verdict = cache.variants[id(combo.variant)] = _variant_verdict(f, q, combo)
    return verdict


def evaluate(f: Facts, q: Query, combo: Combination, cache: _Cache | None = None) -> Result:
    cache = cache or _Cache({}, {})
    verdict = _verdict(f, q, combo, cache)
    key = (id(combo.variant), combo.python, combo.os.name, combo.platform.value)  # glibc-os reads the variant
    rest = cache.combos.get(key)
    if rest is None:
        rest = cache.combos[key] = tuple(rule(f, q, combo) for rule in COMBO_RULES)
    if q.inference:  # depends on the variant, the Python and the platform: not shared through either cache
        rest += tuple(rule(f, q, combo) for rule in INFERENCE_RULES)
    return Result(combo, verdict.checks + rest, verdict.driver_mode, verdict.arch_support, verdict.arch_code)


_MODE_RANK = {DriverMode.FULL: 0, DriverMode.MINOR_VERSION: 1, DriverMode.FORWARD_COMPAT: 2, None: 0}
_ARCH_RANK = {ArchSupport.NATIVE: 0, ArchSupport.COMPATIBLE: 1, ArchSupport.PTX: 2, ArchSupport.NONE: 3, None: 0}


def _py(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def rank_key(m: Matrix, q: Query, r: Result) -> tuple[object, ...]:
    """A combination every rule could check before one with facts not recorded; then newest torch; the newest
    CUDA the driver runs at full level (PyPI's default when no driver
    is given); native code over compatible over PTX; an OS inside its regular support over one past it; the OS's
    own Python; matrix order of OS bases."""
    c = r.combo
    cuda = c.variant.cuda.release if c.variant.cuda is not None else (-1,)
    default_first = 0 if q.driver is None and c.is_pypi_default else 1
    system_python = 0 if c.python == c.os.system_python else 1
    os_index = [o.name for o in m.os].index(c.os.name)
    neg_py = tuple(-p for p in _py(c.python))
    return (
        1 if r.unrecorded else 0,
        tuple(-p for p in c.torch.version.release),
        _MODE_RANK[r.driver_mode],
        default_first,
        tuple(-p for p in cuda),
        _ARCH_RANK[r.arch_support],
        _phase(c.os),
        system_python,
        os_index,
        neg_py,
    )


def _phase(o: OSBase) -> int:
    """The OS's lifecycle phase on the day (regular support first), as rank_key's term."""
    return int(lifecycle.os_phase(o, lifecycle.today()))


def lookup(m: Matrix, q: Query) -> Lookup:
    f = _facts(m)
    cache = _Cache({}, {})
    results = [evaluate(f, q, combo, cache) for combo in enumerate_combinations(m, q)]
    valid = sorted((r for r in results if r.ok), key=lambda r: rank_key(m, q, r))
    rejected = tuple(r for r in results if not r.ok)
    return Lookup(tuple(valid), rejected, tuple(_filter_notes(m, q)) if not results else ())


def first_valid(m: Matrix, q: Query) -> Result | None:
    """lookup(m, q).valid[0] without evaluating every release: rank_key orders known-good before unrecorded,
    then newest torch first, so the first release (newest first) with a known-good valid combination holds the
    answer. Only when no release has one does every result count (the unrecorded tier). A combination whose
    variant already failed is not evaluated further. The page asks this for every driver x GPU cell, doctor
    once; a test holds it equal to lookup's first row."""
    f = _facts(m)
    cache = _Cache({}, _COMBO_CHECKS.setdefault(id(m), {}))
    by_release: dict[int, list[Combination]] = {}
    for combo in enumerate_combinations(m, q):
        by_release.setdefault(id(combo.torch), []).append(combo)
    unrecorded: list[Result] = []
    for group in sorted(by_release.values(), key=lambda g: g[0].torch.version, reverse=True):
        candidates = [c for c in group if _variant_passes(f, q, c, cache)]
        valid = [r for r in (evaluate(f, q, c, cache) for c in candidates) if r.ok]
        known = [r for r in valid if not r.unrecorded]
        if known:
            return min(known, key=lambda r: rank_key(m, q, r))
        unrecorded.extend(valid)
    return min(unrecorded, key=lambda r: rank_key(m, q, r)) if unrecorded else None


def valid_newer(m: Matrix, q: Query, than: Version) -> list[Result]:
    """lookup(m, q).valid's rows with a torch newer than `than`, evaluating only those releases (doctor asks
    what a newer torch would need, having chosen with first_valid)."""
    f = _facts(m)
    cache = _Cache({}, _COMBO_CHECKS.setdefault(id(m), {}))
    newer = (c for c in enumerate_combinations(m, q) if c.torch.version > than)
    valid = (r for r in (evaluate(f, q, c, cache) for c in newer if _variant_passes(f, q, c, cache)) if r.ok)
    return sorted(valid, key=lambda r: rank_key(m, q, r))


def _variant_passes(f: Facts, q: Query, combo: Combination, cache: _Cache) -> bool:
    """Whether every variant rule passes, stopping at the first that fails (most variants of an old driver do)."""
    if id(combo.variant) in cache.variants:
        return all(check.ok for check in cache.variants[id(combo.variant)].checks)
    failed = cache.failed.get(id(combo.variant))
    if failed is None:
        failed = cache.failed[id(combo.variant)] = not all(rule(f, q, combo).ok for rule in VARIANT_RULES)
    return not failed


# The rules of COMBO_RULES read the combination only (never the query): their checks are shared by every
# query on one matrix (keyed with the platform, which the combination carries).
_COMBO_CHECKS: dict[int, dict[tuple[int, str, str, str], tuple[Check, ...]]] = {}


def _filter_notes(m: Matrix, q: Query) -> list[str]:
    releases = [t for t in m.torch if q.torch is None or t.version in q.torch]
    if not releases:
        return [f"no torch release in the matrix matches --torch {q.torch} (newest: {m.torch[-1].version})"]
    notes = []
    for release in releases:
        if not any(selected(q, release, v) for v in release.variants):
            published = ", ".join(v.name for v in release.variants)
            notes.append(f"torch {release.version} publishes {published}: none matches the --cuda/--variant asked")
    return notes or [f"no Python matching --python {q.python} is offered by a selected torch release or OS"]


_FACTS: dict[int, Facts] = {}


def _facts(m: Matrix) -> Facts:
    return _FACTS.setdefault(id(m), Facts(m))


# --- explain ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Explanation:
    """Every rule for one pinned combination, and how the unpinned flags were chosen."""

    id: str
    pinned: tuple[str, ...]  # how each unspecified dimension was chosen
    checks: tuple[Check, ...]
    result: Result | None

    @property
    def valid(self) -> bool:
        return all(c.ok for c in self.checks)


def explain(m: Matrix, q: Query) -> Explanation:
    """The combination lookup would pick for these flags, with every rule; when none is valid, the nearest
    candidate (the fewest failed rules, then lookup's ranking) and every rule it fails."""
    found = lookup(m, q)
    if found.valid:
        best = found.valid[0]
        how = f"the best of {len(found.valid)} valid combinations for these flags (lookup's first row)"
        return Explanation(best.combo.id, (how,), best.checks, best)
    if not found.rejected:
        check = Check("selection", False, "; ".join(found.notes), ("pytorch-variants",))
        return Explanation("none", ("no combination matches the flags",), (check,), None)
    nearest = min(found.rejected, key=lambda r: (sum(not c.ok for c in r.checks), rank_key(m, q, r)))
    failed = sum(not c.ok for c in nearest.checks)
    how = (
        f"no valid combination for these flags ({len(found.rejected)} ruled out); "
        f"the nearest candidate, failing {failed} rule{'s' if failed > 1 else ''}"
    )
    return Explanation(nearest.combo.id, (how,), nearest.checks, nearest)
