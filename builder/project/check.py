"""torchyard.toml against the matrix: names it knows (variant, OS, architectures, a combination id), a version range
some release meets, pins that agree with the exact combination they sit beside (without one: pins that some
combination has together). Each problem is one
`file:line: key: message` (exit 2). Then the file as a question: the RawQuery the resolver answers."""

from __future__ import annotations

import shlex
from dataclasses import replace

from builder.core.kinds import did_you_mean
from builder.core.versions import parse_spec
from builder.lock.resolve_id import find_combination
from builder.matrix.model import Matrix
from builder.project.config import CHOICE_KEYS, ProjectConfig
from builder.resolve.combos import Combination
from builder.resolve.query import RawQuery


def check_project(m: Matrix, config: ProjectConfig) -> Combination | None:
    """Refuse what the matrix does not know; the exact combination `id` names (None: the file leaves a choice)."""
    t, ctx = config.torch, config.source
    variants = sorted({v.name for r in m.torch for v in r.variants})
    for key, value, known in (("variant", t.variant, variants), ("os", t.os, [o.name for o in m.os])):
        if value is not None and value not in known:
            ctx.fail(("torch", key), f"torch.{key}", f"{value!r} is not in the matrix{did_you_mean(value, known)}; "
                     f"known: {', '.join(known)}")  # fmt: skip
    archs = [a.name for a in m.archs]
    for arch in t.archs:
        if arch not in archs:
            ctx.fail(("torch", "archs"), "torch.archs", f"{arch!r} is not a GPU architecture in the matrix"
                     f"{did_you_mean(arch, archs)}")  # fmt: skip
    if t.version is not None and not any(r.version in parse_spec(t.version, "version") for r in m.torch):
        newest = max(r.version for r in m.torch)
        ctx.fail(("torch", "version"), "torch.version", f"no torch release in the matrix matches {t.version!r} "
                 f"(the newest is {newest})")  # fmt: skip
    combo = _exact(m, config)
    cpu = (combo.variant.name if combo else t.variant) == "cpu"
    if cpu and t.archs:
        ctx.fail(("torch", "archs"), "torch.archs", "the cpu variant compiles no GPU code: leave archs out")
    if combo is None:
        _some_candidate(m, config)
    return combo


def _some_candidate(m: Matrix, config: ProjectConfig) -> None:
    """[torch]'s pins together name at least one combination of the matrix (on some platform); the rules and the
    machine decide later which of them runs. Pins that exclude each other are refused on the table's line."""
    from builder.core.kinds import Platform
    from builder.resolve.combos import enumerate_combinations
    from builder.resolve.query import parse_query

    t = config.torch
    pins = {key: getattr(t, key) for key in CHOICE_KEYS if getattr(t, key) is not None}
    if len(pins) < 2:  # one pin alone was checked against the matrix above
        return
    platforms = [t.platform] if t.platform else [p.value for p in Platform]
    asked = RawQuery(torch=t.version, variant=t.variant, python=t.python, os=t.os)
    if any(next(enumerate_combinations(m, parse_query(m, replace(asked, platform=p))), None) for p in platforms):
        return
    together = ", ".join(f"{key} {value!r}" for key, value in pins.items())
    flags = " ".join(f"--{'torch' if k == 'version' else k} {shlex.quote(v)}" for k, v in pins.items())
    config.source.fail(("torch",), "torch", f"no combination of the matrix has {together} together "
                       f"(torchyard lookup {flags} says why)")  # fmt: skip


def _exact(m: Matrix, config: ProjectConfig) -> Combination | None:
    t, ctx = config.torch, config.source
    if t.id is None:
        return None
    combo = find_combination(m, t.id)
    if combo is None:
        ctx.fail(("torch", "id"), "torch.id", f"{t.id!r} is not a combination of the matrix{_near(m, t.id)} "
                 "(torchyard lookup lists them)")  # fmt: skip
    for key in CHOICE_KEYS:
        found = contradiction(combo, key, getattr(t, key))
        if found is not None:
            ctx.fail(("torch", key), f"torch.{key}", f"{found}: it contradicts torch.id {combo.id}")
    return combo


def contradiction(c: Combination, key: str, value: str | None) -> str | None:
    """How `value` of [torch] `key` disagrees with combination c (None: it agrees, or is not set)."""
    if value is None:
        return None
    match key:
        case "version":
            actual, agrees = str(c.torch.version), c.torch.version in parse_spec(value, "version")
        case "python":
            actual, agrees = c.python, c.python in parse_spec(value, "python")
        case "variant":
            actual, agrees = c.variant.name, c.variant.name == value
        case "os":
            actual, agrees = c.os.name, c.os.name == value
        case _:
            actual, agrees = c.platform.value, c.platform.value == value
    return None if agrees else f"{value!r} excludes {actual}"


def _near(m: Matrix, ident: str) -> str:
    from builder.core.kinds import Platform
    from builder.resolve.combos import enumerate_combinations
    from builder.resolve.query import Query

    ids = [c.id for p in Platform for c in enumerate_combinations(m, Query(platform=p))]
    return did_you_mean(ident, ids)


def wish_of(m: Matrix, config: ProjectConfig, combo: Combination | None) -> RawQuery:
    """The file as a question for the resolver: the exact combination's pins, else what [torch] narrows."""
    t = config.torch
    if combo is not None:
        return pinned(combo, config)
    return RawQuery(
        torch=t.version,
        variant=t.variant,
        python=t.python,
        os=t.os,
        platform=t.platform,
        archs=t.archs,
    )


def pinned(c: Combination, config: ProjectConfig) -> RawQuery:
    """The question whose only answer is combination c (with the project's architectures)."""
    return RawQuery(
        torch=str(c.torch.version),
        variant=c.variant.name,
        python=c.python,
        os=c.os.name,
        platform=c.platform.value,
        archs=config.torch.archs,
    )
