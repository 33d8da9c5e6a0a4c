"""The publish set's platforms checked against the wheels torch publishes (issue 15): an entry for linux/arm64
names only images with aarch64 wheels, and a multi-platform entry the same image on every platform."""

from __future__ import annotations

from builder.core.kinds import Platform
from builder.matrix.model import Matrix, TorchRelease
from builder.matrix.publish_set import PYPI_DEFAULT, SYSTEM_PYTHON, PublishEntry
from builder.matrix.reader import Context


def check_platforms(ctx: Context, m: Matrix) -> None:
    """An entry for a platform other than linux/amd64 must name only images that platform has wheels for, and
    a multi-platform entry the same image on every platform: never an index that silently lacks a platform."""
    for index, entry in enumerate(m.publish):
        if entry.platforms != (Platform.AMD64,):
            problem = _platform_problem(m, entry)
            if problem:
                ctx.fail(("publish", index, "platforms"), f"publish[{entry.name}].platforms", problem)


def _platform_problem(m: Matrix, entry: PublishEntry) -> str | None:
    for release in (t for t in m.torch if t.version in entry.torch):
        missing = [p.value for p in entry.platforms if release.on(p) is None]
        if missing:
            return f"torch {release.version} has no {', '.join(missing)} wheels (narrow torch = {str(entry.torch)!r})"
        for name in entry.variants:
            problem = _variant_problem(m, entry, release, name)
            if problem:
                return problem
    return None


def _variant_problem(m: Matrix, entry: PublishEntry, release: TorchRelease, name: str) -> str | None:
    wheels = {p: w for p in entry.platforms if (w := release.on(p)) is not None}
    chosen = {p: w.pypi_default if name == PYPI_DEFAULT else name for p, w in wheels.items()}
    if len(set(chosen.values())) > 1:
        said = ", ".join(f"{v} on {p.value}" for p, v in chosen.items())
        return (
            f"torch {release.version}'s PyPI default is {said}: one image index holds one variant "
            "(name it in variants, or narrow torch)"
        )
    variant = release.variant(next(iter(chosen.values())))
    if variant is None:
        return None  # no platform has it: listed as excluded, as for linux/amd64 alone
    for p in entry.platforms:
        if variant.build(p) is None:
            have = ", ".join(v.name for v in release.variants if v.build(p)) or "none"
            return f"torch {release.version} has no {p.value} {variant.name} wheels (its {p.value} variants: {have})"
    for base in (o for o in m.os if o.name in entry.os):
        for python in dict.fromkeys(base.system_python if x == SYSTEM_PYTHON else x for x in entry.python):
            lacking = [p.value for p, w in wheels.items() if python not in w.python]
            if lacking and len(lacking) < len(wheels):
                return f"torch {release.version} has no Python {python} wheels for {', '.join(lacking)}"
    return None
