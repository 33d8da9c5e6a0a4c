"""The data of the compatibility page, computed by the resolver's own rules (no rule is written twice):

- the torch x CUDA grid (driver floors, cuDNN, NCCL) and each wheel's architecture coverage per platform;
- the published images (the publish set: tags, `docker run` lines);
- for every selector query the page offers (a driver branch or none, a GPU by name or none, a platform),
  each published image's verdict: its rank among the valid ones (resolver.rank_key), or the reason of the
  first rule it fails (resolver.evaluate), exactly as `torchyard lookup --driver B --gpu G --platform P`
  would decide; and its answer in lookup's words (RUNS, RUNS WITH ..., WILL NOT RUN, CANNOT TELL: what is not
  recorded), so that the page never shows as running what lookup cannot tell. The page only looks answers up;
  the Python filter is a plain comparison.
- for every cell, torchyard's choice: the one combination doctor, `lookup --here`, build and `torchyard run`
  would name for that driver and GPU (resolve.choose.choose_result, the one chooser), published or not; when
  it is not in the publish set the page says so and gives the `torchyard build` line that makes it.
Identical answers are stored once (most GPUs of one architecture answer alike).
"""

from __future__ import annotations

from typing import Any

from builder.core.errors import UsageError
from builder.core.kinds import Flavor, Platform, Strategy
from builder.core.versions import minor_str
from builder.host.doctor import build_command
from builder.host.locate import expected_size
from builder.matrix.model import Build, Matrix
from builder.publish.items import Item, expand
from builder.render.tags import image_tags
from builder.resolve import lifecycle
from builder.resolve.choose import choose_result
from builder.resolve.combos import Combination, selected
from builder.resolve.facts import Facts
from builder.resolve.gpus import catalogue
from builder.resolve.query import Query, RawQuery, parse_query
from builder.resolve.report import min_driver, verdict_line
from builder.resolve.resolver import evaluate, rank_key

SCHEMA = 2


def page_data(m: Matrix, repo: str) -> dict[str, Any]:
    items, _ = expand(m)
    images = [_image(m, item, repo) for item in items]
    combos = list({item.combo.id: item.combo for item in items}.values())
    drivers = ["", *(str(b.branch) for b in m.driver_branches)]
    gpus = ["", *sorted({k.gpu.name for k in catalogue(m)})]
    platforms = [p.value for p in Platform]
    table = _Answers()
    picks = _Picks(m, repo, {c.id for c in combos})
    cells = [
        [[table.index(_answer(m, combos, d, g, p, table, picks)) for p in platforms] for g in gpus] for d in drivers
    ]
    return {
        "schema": SCHEMA,
        "matrix": m.path.rsplit("/", 1)[-1],
        "repo": repo,
        "drivers": drivers,
        "branches": {str(b.branch): minor_str_tuple(b.reports_cuda) for b in m.driver_branches},
        "lifecycle": lifecycle_notes(m),
        "gpus": gpus,
        "platforms": platforms,
        "pythons": sorted({c.python for c in combos}, key=lambda p: tuple(int(x) for x in p.split("."))),
        "combos": [{"id": c.id, "python": c.python, "platform": c.platform.value} for c in combos],
        "images": images,
        "cells": cells,
        "answers": table.answers,
        "reasons": table.reasons,
        "choices": picks.choices,
        "grid": grid(m),
    }


def lifecycle_notes(m: Matrix) -> dict[str, Any]:
    """On the day the page is written: each driver branch past its end (with the long-term branch to move to,
    for any GPU), each OS past its regular support; what doctor and lookup say (builder/resolve/lifecycle.py)."""
    day = lifecycle.today()
    target = lifecycle.move_to(m, (), day)
    move = f"; {lifecycle.move_line(target)}" if target else ""
    branches = {str(b.branch): f"{note}{move}" for b in m.driver_branches if (note := lifecycle.branch_note(b, day))}
    oses = {o.name: note for o in m.os if (note := lifecycle.os_note(o, day))}
    return {"day": day.isoformat(), "branches": branches, "os": oses}


def minor_str_tuple(reports: tuple[int, int]) -> str:
    return f"{reports[0]}.{reports[1]}"


def _image(m: Matrix, item: Item, repo: str) -> dict[str, Any]:
    from builder.pipeline.plan import make_plan  # the tags of the image: the plan computes them

    tags = make_plan(m, item.combo, item.options).target(item.flavor).tags
    gpus = " --gpus all" if item.combo.variant.cuda is not None else ""
    return {
        "id": item.id,
        "combo": item.combo.id,
        "flavor": item.flavor.value,
        "tag": f"{repo}:{tags.immutable}",
        "aliases": [f"{repo}:{alias}" for alias in tags.aliases],
        "run": f"docker run{gpus} --rm -it --ipc=host {repo}:{tags.immutable}",  # as doctor's: DataLoader, NCCL
        "torch": item.combo.local_version,
        "python": item.combo.python,
        "os": item.combo.os.name,
        "platform": item.combo.platform.value,
    }


class _Answers:
    """Answers and reasons stored once: an answer holds, per published combination, its rank >= 0 or -1 - the
    index of its reason ("ranks"), and the index of its verdict words, null where the query does not ask about
    it ("verdicts"); or {"error": reason index} when the query cannot be asked."""

    def __init__(self) -> None:
        self.answers: list[Any] = []
        self.reasons: list[str] = []
        self._answers: dict[str, int] = {}
        self._reasons: dict[str, int] = {}

    def reason(self, text: str) -> int:
        if text not in self._reasons:
            self._reasons[text] = len(self.reasons)
            self.reasons.append(text)
        return self._reasons[text]

    def index(self, answer: Any) -> int:
        key = repr(answer)
        if key not in self._answers:
            self._answers[key] = len(self.answers)
            self.answers.append(answer)
        return self._answers[key]


def _answer(
    m: Matrix, combos: list[Combination], driver: str, gpu: str, platform: str, table: _Answers, picks: _Picks
) -> Any:
    """Per published combination: its rank among the valid ones, or why it is not valid, and lookup's answer
    for it; and the chooser's combination for the cell (an index into "choices", None when nothing is valid)."""
    raw = RawQuery(driver=driver or None, gpus=(gpu,) if gpu else (), platform=platform)
    try:
        q = parse_query(m, raw)
    except UsageError as exc:  # the query itself cannot be asked (a GPU that only sits in another host)
        return {"error": table.reason(str(exc).split(": ", 1)[-1])}
    found = _verdicts(m, combos, q)
    ranks = [v if isinstance(v, int) else -1 - table.reason(v) for v, _ in found]
    words = [None if w is None else table.reason(w) for _, w in found]
    return {"ranks": ranks, "verdicts": words, "choice": picks.pick(q)}


class _Picks:
    """The chooser's combination per distinct question, stored once. GPUs of one architecture, class, host
    and first driver ask the rules the same question (their names only change the wording of a reason)."""

    def __init__(self, m: Matrix, repo: str, published: set[str]) -> None:
        self.m, self.repo, self.published = m, repo, published
        self.choices: list[dict[str, Any]] = []
        self._by_query: dict[tuple[object, ...], int | None] = {}
        self._by_combo: dict[str, int] = {}

    def pick(self, q: Query) -> int | None:
        key = (q.driver, q.archs, tuple((g.arch, g.kind, g.host, g.driver_min) for g in q.gpus), q.platform)
        if key not in self._by_query:
            result = choose_result(self.m, q)
            self._by_query[key] = None if result is None else self._index(result.combo)
        return self._by_query[key]

    def _index(self, combo: Combination) -> int:
        if combo.id not in self._by_combo:
            self._by_combo[combo.id] = len(self.choices)
            self.choices.append(_choice(self.m, combo, self.repo, combo.id in self.published))
        return self._by_combo[combo.id]


def _choice(m: Matrix, combo: Combination, repo: str, published: bool) -> dict[str, Any]:
    """One chosen combination: its runtime image's tag and run line (as doctor gives them), and how to make
    it when it is not published."""
    tag = f"{repo}:{image_tags(m, combo, Flavor.RUNTIME, Strategy.WHEELS, ()).immutable}"
    gpus = " --gpus all" if combo.variant.cuda is not None else ""
    return {
        "id": combo.id,
        "published": published,
        "tag": tag,
        "run": f"docker run{gpus} --rm -it --ipc=host {tag}",
        "build": build_command(combo, repo),
        "size": expected_size(str(combo.torch.version), combo.variant.name, combo.platform.value),
        "torch": combo.local_version,
        "python": combo.python,
        "os": combo.os.name,
    }


def _verdicts(m: Matrix, combos: list[Combination], q: Any) -> list[tuple[int | str, str | None]]:
    """Per combination: its rank or why it is not valid, and lookup's answer where the query asks about it."""
    f = Facts(m)
    verdicts: dict[str, int | str] = {}
    words: dict[str, str] = {}
    valid = []
    for combo in combos:
        if combo.platform is not q.platform:
            verdicts[combo.id] = f"an image for {combo.platform.value}; the query is for {q.platform.value}"
        elif not selected(q, combo.torch, combo.variant):
            verdicts[combo.id] = "a CPU build: lookup lists GPU builds when a driver or GPU is given"
        else:
            result = evaluate(f, q, combo)
            words[combo.id] = verdict_line(result.checks)
            if result.ok:
                valid.append(result)
            else:
                failure = result.first_failure
                verdicts[combo.id] = f"{failure.rule}: {failure.reason}" if failure else "not valid"
    for rank, result in enumerate(sorted(valid, key=lambda r: rank_key(m, q, r))):
        verdicts[result.combo.id] = rank
    return [(verdicts[c.id], words.get(c.id)) for c in combos]


def grid(m: Matrix) -> list[dict[str, Any]]:
    """Every torch release and variant: CUDA, driver floor, cuDNN, NCCL, and the code each platform's
    wheels carry."""
    f = Facts(m)
    rows = []
    for release in m.torch:
        for variant in release.variants:
            any_os = m.os[0]
            combo = Combination(release, variant, release.python[0], any_os)
            rows.append(
                {
                    "torch": str(release.version),
                    "variant": variant.name,
                    "cuda": minor_str(variant.cuda) if variant.cuda else None,
                    "min_driver": min_driver(f, combo),
                    "cudnn": str(variant.cudnn) if variant.cudnn else None,
                    "nccl": str(variant.nccl) if variant.nccl else None,
                    "pypi_default": [w.platform.value for w in release.wheels if w.pypi_default == variant.name],
                    "code": [_code(variant.build(p), variant.cuda is not None) for p in Platform],
                }
            )
    return rows


def _code(build: Build | None, cuda: bool) -> dict[str, str]:
    """One grid cell: the GPU code of a variant's wheels on one platform."""
    if build is None:
        return {"kind": "none", "text": "no wheels"}
    if not cuda or build.sass is None:
        return {"kind": "none", "text": "not recorded" if cuda else "CPU"}
    ptx = f" + PTX {' '.join(a.name for a in build.ptx)}" if build.ptx else ""
    return {"kind": "archs", "text": " ".join(a.name for a in build.sass) + ptx}
