"""The compatibility page's data (builder/site/data.py) on the small test matrix with a publish set: every
selector answer equals what lookup decides for that query, restricted to the published combinations, and
the page is one self-contained file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from matrix_kit import BASE

from builder.matrix import Matrix, load_matrix
from builder.resolve.choose import choose_result
from builder.resolve.query import RawQuery, parse_query
from builder.resolve.report import verdict_line
from builder.resolve.resolver import lookup
from builder.site.data import page_data
from builder.site.render import render_page

PUBLISHED = (
    BASE
    + """
[[publish]]
name = "cuda12"
torch = "==2.5.1"
variants = ["cu124", "cu118"]
python = ["system", "3.12"]
os = ["debian12"]
flavors = ["runtime"]
"""
)


def small(tmp_path: Path) -> Matrix:
    path = tmp_path / "matrix.toml"
    path.write_text(PUBLISHED)
    return load_matrix(path)


def test_every_answer_is_lookups_answer(tmp_path: Path) -> None:
    m = small(tmp_path)
    data = page_data(m, "ghcr.io/acme/torchyard")
    combos = [c["id"] for c in data["combos"]]
    assert len(data["images"]) == 4 and len(combos) == 4
    checked = 0
    for d, driver in enumerate(data["drivers"]):
        for g, gpu in enumerate(data["gpus"]):
            for p, platform in enumerate(data["platforms"]):
                answer = data["answers"][data["cells"][d][g][p]]["ranks"]
                q = parse_query(m, RawQuery(driver=driver or None, gpus=(gpu,) if gpu else (), platform=platform))
                found = lookup(m, q)
                valid = [r.combo.id for r in found.valid if r.combo.id in combos]
                ranked = sorted((v, combos[i]) for i, v in enumerate(answer) if v >= 0)
                assert [c for _, c in ranked] == valid, (driver, gpu, platform)
                words = {r.combo.id: verdict_line(r.checks) for r in (*found.valid, *found.rejected)}
                for i, w in enumerate(data["answers"][data["cells"][d][g][p]]["verdicts"]):
                    assert (None if w is None else data["reasons"][w]) == words.get(combos[i]), (driver, gpu)
                reasons = {r.combo.id: r.first_failure for r in found.rejected if r.combo.id in combos}
                for i, v in enumerate(answer):
                    if v < 0 and combos[i] in reasons:
                        failure = reasons[combos[i]]
                        assert failure is not None
                        assert data["reasons"][-1 - v] == f"{failure.rule}: {failure.reason}"
                checked += 1
    assert checked == len(data["drivers"]) * len(data["gpus"]) * 2


def test_the_page_is_one_self_contained_file_with_its_data(tmp_path: Path) -> None:
    html = render_page(small(tmp_path), "ghcr.io/acme/torchyard")
    for needle in ("<link", " src=", "@import", "url(", "fetch(", "http://", "XMLHttpRequest"):
        assert needle not in html
    payload = html.split('<script id="data" type="application/json">', 1)[1].split("</script>", 1)[0]
    data = json.loads(payload)
    assert data["schema"] == 2 and data["repo"] == "ghcr.io/acme/torchyard"
    run = (
        "docker run --gpus all --rm -it --ipc=host ghcr.io/acme/torchyard:2.5.1-cuda12.4-cudnn9-py3.11-debian12-runtime"
    )
    assert run in {i["run"] for i in data["images"]}
    assert "<td>2.5.1</td>" in html and "sm_86 sm_90" in html


@pytest.mark.parametrize("narrow", [False, True], ids=["published", "narrow-publish-set"])
def test_every_cell_names_the_choosers_combination(tmp_path: Path, narrow: bool) -> None:
    """The page's choice for a driver and GPU is the one chooser's (doctor, lookup --here, run), published or
    not; an unpublished one comes with the build line that makes it (a publish set of one old variant)."""
    text = PUBLISHED.replace('variants = ["cu124", "cu118"]', 'variants = ["cu118"]') if narrow else PUBLISHED
    (tmp_path / "matrix.toml").write_text(text)
    m = load_matrix(tmp_path / "matrix.toml")
    data = page_data(m, "ghcr.io/acme/torchyard")
    published = {c["id"] for c in data["combos"]}
    unpublished = 0
    for d, driver in enumerate(data["drivers"]):
        for g, gpu in enumerate(data["gpus"]):
            for p, platform in enumerate(data["platforms"]):
                answer = data["answers"][data["cells"][d][g][p]]
                if "error" in answer:
                    continue
                best = choose_result(
                    m, parse_query(m, RawQuery(driver=driver or None, gpus=(gpu,) if gpu else (), platform=platform))
                )
                choice = None if answer["choice"] is None else data["choices"][answer["choice"]]
                assert (choice and choice["id"]) == (best and best.combo.id), (driver, gpu, platform)
                if choice and not choice["published"]:
                    unpublished += 1
                    assert choice["id"] not in published
                    assert choice["build"].startswith("torchyard build --torch ")
                if choice and choice["published"]:  # then it is the first published image that runs
                    ranks = answer["ranks"]
                    assert data["combos"][ranks.index(0)]["id"] == choice["id"]
    assert (unpublished > 0) == narrow  # the chooser prefers cu124 where the driver runs it
