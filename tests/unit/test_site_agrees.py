"""The compatibility page and lookup give the same answer for the same driver and GPU, on the real matrix and its
publish set: each published image's rank or reason, and lookup's verdict for it (RUNS, WILL NOT RUN, CANNOT TELL
and what is not recorded). A cell is computed as page_data computes every cell (builder/site/data.py), for a few
queries only: the whole page takes too long for a unit test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from matrix_kit import real

from builder.publish.items import expand
from builder.resolve.combos import Combination
from builder.resolve.query import RawQuery, parse_query
from builder.resolve.report import verdict_line
from builder.resolve.resolver import lookup
from builder.resolve.verdict import Answer, verdict
from builder.site.data import _answer, _Answers, _Picks

M = real()
PLATFORM = "linux/amd64"
COMBOS: list[Combination] = list({item.combo.id: item.combo for item in expand(M)[0]}.values())
LEGACY = ("NVIDIA V100", "GeForce GTX 1080 Ti")  # Volta and Pascal end with the R580 branch


def cell(driver: str, gpu: str) -> tuple[dict[str, Any], _Answers]:
    table = _Answers()
    picks = _Picks(M, "ghcr.io/acme/torchyard", {c.id for c in COMBOS})
    return _answer(M, COMBOS, driver, gpu, PLATFORM, table, picks), table


PAIRS = [(d, g) for g in ("NVIDIA T4", *LEGACY, "GeForce RTX 2080 Ti", "NVIDIA A10G") for d in ("535", "580", "590")]
PAIRS += [("550", "NVIDIA T4"), ("535", "GeForce GTX 750 Ti"), ("", "NVIDIA V100")]


@pytest.mark.parametrize(("driver", "gpu"), PAIRS)
def test_the_page_answers_each_published_image_as_lookup_does(driver: str, gpu: str) -> None:
    answer, table = cell(driver, gpu)
    q = parse_query(M, RawQuery(driver=driver or None, gpus=(gpu,), platform=PLATFORM))
    found = lookup(M, q)
    valid = {r.combo.id: r for r in found.valid}
    rejected = {r.combo.id: r for r in found.rejected}
    asked = 0
    for i, combo in enumerate(COMBOS):
        rank, words = answer["ranks"][i], answer["verdicts"][i]
        if combo.id in valid:
            assert rank >= 0 and table.reasons[words] == verdict_line(valid[combo.id].checks), combo.id
        elif combo.id in rejected:
            failure = rejected[combo.id].first_failure
            assert failure is not None and rank < 0
            assert table.reasons[-1 - rank] == f"{failure.rule}: {failure.reason}"
            assert table.reasons[words] == "WILL NOT RUN"
        else:
            assert words is None, combo.id  # not asked: another platform, or a CPU build with a GPU named
            continue
        asked += 1
    assert asked > 0
    ranked = sorted((r, COMBOS[i].id) for i, r in enumerate(answer["ranks"]) if r >= 0)
    assert [c for _, c in ranked] == [r.combo.id for r in found.valid if r.combo.id in {c.id for c in COMBOS}]


@pytest.mark.parametrize(("driver", "gpu"), [(d, g) for d, g in PAIRS if d and g != "GeForce GTX 750 Ti"])
def test_the_common_gpus_get_answers_on_the_page(driver: str, gpu: str) -> None:
    """Where lookup's first row RUNS, the page's first image runs too; no image is left at CANNOT TELL for lack of a
    first driver; a legacy GPU on 590 is refused by driver-gpu, naming the driver."""
    answer, table = cell(driver, gpu)
    asked = [(r, table.reasons[w]) for r, w in zip(answer["ranks"], answer["verdicts"], strict=True) if w is not None]
    assert not any(w.startswith("CANNOT TELL") and "first driver" in w for _, w in asked)
    if driver == "590" and gpu in LEGACY:
        assert {w for _, w in asked} == {"WILL NOT RUN"}
        reasons = {table.reasons[-1 - r] for r, _ in asked}
        assert reasons == {
            f"driver-gpu: {gpu} ({'Volta' if 'V100' in gpu else 'Pascal'}) is supported up to the 580 driver branch "
            "(legacy); driver 590 (any 590.x, read as the newest) no longer supports it: use a 580.x driver"
        }
    else:
        first = answer["ranks"].index(0)
        assert table.reasons[answer["verdicts"][first]] == "RUNS"


def test_the_page_says_cannot_tell_where_lookup_cannot() -> None:
    """A GPU whose first driver is not recorded (Maxwell): lookup cannot tell, and neither can the page."""
    answer, table = cell("535", "GeForce GTX 750 Ti")
    q = parse_query(M, RawQuery(driver="535", gpus=("GTX 750 Ti",), platform=PLATFORM))
    assert verdict(lookup(M, q).valid[0].checks).answer is Answer.CANNOT_TELL
    first = answer["ranks"].index(0)
    assert table.reasons[answer["verdicts"][first]] == (
        "CANNOT TELL: driver-gpu: the first driver of GeForce GTX 750 Ti is not recorded "
        "(record it in matrix.toml, with its source)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "--repo REGISTRY/NAME is needed: a public page's `docker run` lines name a repository its readers can "
             "pull (ghcr.io/acme/torch; or $TORCHYARD_REPO)"),
        (("--repo", "torchyard"), "--repo torchyard: names no registry (ghcr.io/acme/torch, "
                                  "registry.example.com/ml/torch): a public page's `docker run` lines need a "
                                  "repository its readers can pull"),
    ],
)  # fmt: skip
def test_a_page_without_a_pullable_repository_is_refused(
    args: tuple[str, ...], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:  # fmt: skip
    from builder.cli.main import main

    monkeypatch.delenv("TORCHYARD_REPO", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["matrix", "html", "-o", str(tmp_path / "site"), *args])
    assert exited.value.code == 2
    assert capsys.readouterr().err == f"torchyard: error: {message}\n"
    assert not (tmp_path / "site").exists()
