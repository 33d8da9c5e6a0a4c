"""Properties of lookup and explain over the real matrix (hypothesis; example counts kept modest).

1. Every combination lookup returns passes explain when pinned to it exactly.
2. Raising the driver never removes a combination (without --forward-compat).
3. Adding --arch never adds a combination.
"""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from matrix_kit import query, real

from builder.core.versions import parse_driver
from builder.resolve.facts import Facts
from builder.resolve.resolver import Result, explain, lookup

M = real()
F = Facts(M)
SETTINGS = settings(max_examples=30, deadline=None)

_BRANCHES = [b.branch for b in M.driver_branches]
_TOOLKIT_DRIVERS = sorted({str(c.min_driver) for c in M.cuda if c.min_driver is not None})
_ARCHS = [a.name for a in M.archs]
_GPUS = [n for a in M.archs for n in (*a.gpus, *a.datacenter_gpus, *a.embedded_gpus)]
_TORCH_MINORS = sorted({f"{t.version.major}.{t.version.minor}" for t in M.torch})
_OSES = [o.name for o in M.os]

drivers = st.one_of(
    st.sampled_from(_BRANCHES).map(str),  # a bare branch: the newest driver of it
    st.sampled_from(_TOOLKIT_DRIVERS),  # exactly a toolkit's minimum
    st.builds(lambda b, x, y: f"{b}.{x}.{y:02d}", st.sampled_from(_BRANCHES), st.integers(0, 150), st.integers(0, 99)),
)
gpu_flags: st.SearchStrategy[dict[str, str]] = st.one_of(
    st.just({}),
    st.sampled_from(_ARCHS).map(lambda a: {"arch": a}),
    st.sampled_from(_GPUS).map(lambda g: {"gpu": g}),
)
filters = st.fixed_dictionaries(
    {},
    optional={
        "torch": st.sampled_from(_TORCH_MINORS),
        "os": st.sampled_from(_OSES),
        "python": st.sampled_from(["3.9", "3.10", "3.11", "3.12", "3.13"]),
    },
)


def _driver_order(text: str) -> tuple[float, ...]:
    """Older first; a bare branch stands for its newest driver, above every exact one of the branch."""
    d = parse_driver(text)
    return tuple(float(p) for p in d.parts) if d.exact else (float(d.branch), float("inf"))


def _ids(results: tuple[Result, ...]) -> set[str]:
    return {r.combo.id for r in results}


def _sample(results: tuple[Result, ...], most: int = 40) -> tuple[Result, ...]:
    step = max(1, len(results) // most)
    return results[::step]


@SETTINGS
@given(driver=st.none() | drivers, gpu=gpu_flags, rest=filters, forward_compat=st.booleans())
def test_every_lookup_result_passes_explain(
    driver: str | None, gpu: dict[str, str], rest: dict[str, str], forward_compat: bool
) -> None:
    flags: dict[str, Any] = {**gpu, **rest, "forward_compat": forward_compat}
    if driver is not None:
        flags["driver"] = driver
    for result in _sample(lookup(M, query(M, **flags)).valid):
        c = result.combo
        pinned = {
            **flags,
            "torch": str(c.torch.version),
            "variant": c.variant.name,
            "python": c.python,
            "os": c.os.name,
        }
        e = explain(M, query(M, **pinned))
        assert e.id == c.id
        assert e.valid, [(check.rule, check.reason) for check in e.checks if not check.ok]


@SETTINGS
@given(low=drivers, high=drivers, gpu=gpu_flags, rest=filters)
def test_raising_the_driver_never_removes_a_combination(
    low: str, high: str, gpu: dict[str, str], rest: dict[str, str]
) -> None:
    # Without --forward-compat only: forward compatibility is branch-specific by NVIDIA's design (an
    # image's cuda-compat package is meant for the driver branches it lists, e.g. 13.0 images list
    # 535, 550, 565, 570, 575 but not 560), so a newer branch can lose what an older one had. And only
    # below a legacy architecture's last branch: R495 dropped Kepler, R590 Maxwell, Pascal and Volta.
    low, high = sorted((low, high), key=_driver_order)
    last = _last_branch(gpu)
    assume(last is None or int(high.split(".")[0]) <= last)
    older = lookup(M, query(M, driver=low, **gpu, **rest))
    newer = lookup(M, query(M, driver=high, **gpu, **rest))
    assert _ids(older.valid) <= _ids(newer.valid), sorted(_ids(older.valid) - _ids(newer.valid))[:5]


def _last_branch(gpu: dict[str, str]) -> int | None:
    if not gpu:
        return None
    q = query(M, **gpu)
    return min((b for a in q.archs if (b := F.archs[a.base].driver_last_branch) is not None), default=None)


def test_a_newer_branch_drops_a_legacy_architecture() -> None:
    # The second documented exception: R590 no longer drives Volta (NVIDIA's architecture matrix: last R580).
    assert _ids(lookup(M, query(M, driver="580", gpu="V100")).valid)
    assert not _ids(lookup(M, query(M, driver="590", gpu="V100")).valid)


def test_forward_compatibility_is_branch_specific() -> None:
    # The documented exception to the property above: 550 is excepted by the 13.0 images, 560 is not.
    def cu130(driver: str) -> set[str]:
        q = query(M, driver=driver, gpu="H100", variant="cu130", torch="2.14.1", os="ubuntu24.04", forward_compat=True)
        return _ids(lookup(M, q).valid)

    assert cu130("550")
    assert not cu130("560")


@SETTINGS
@given(driver=st.none() | drivers, gpu=gpu_flags.filter(bool), rest=filters, forward_compat=st.booleans())
def test_adding_an_arch_never_adds_a_combination(
    driver: str | None, gpu: dict[str, str], rest: dict[str, str], forward_compat: bool
) -> None:
    flags: dict[str, Any] = {**rest, "forward_compat": forward_compat}
    if driver is not None:
        flags["driver"] = driver
    without = lookup(M, query(M, **flags))
    with_arch = lookup(M, query(M, **flags, **gpu))
    assert _ids(with_arch.valid) <= _ids(without.valid)
