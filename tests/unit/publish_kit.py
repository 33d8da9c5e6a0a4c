"""Helpers for the publish tests: the real matrix with a publish set of the test's own, and fake engines
that behave like one Docker daemon shared by the publish run's threads.

`PublishFakes.factory` hands a new FakeEngine to every group (as publish makes one client per group);
they share images and tags (one daemon) and one FakeRegistry, and each picks the contents of what it
builds from the content-hash label of the build, so any item of the set builds with the right labels and
versions. Faults are set per group: `fault(group, fail_push=...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fake_engine import FakeEngine, FakeRegistry, contents_of
from render_kit import ROOT

import builder.publish.plan as publish_plan
from builder.core.errors import TorchyardError
from builder.core.process import reset_cancel
from builder.engine import BuildRequest, RegistryAuth
from builder.matrix import Matrix, load_matrix
from builder.pipeline.plan import CONTENT_LABEL, Plan, make_plan
from builder.publish.items import Item, expand
from builder.publish.plan import plan_publish
from builder.publish.report import Report
from builder.publish.run import PublishSettings, publish
from builder.resolve.combos import Combination

REPO = "127.0.0.1:5000/team/torch"

# Three groups: torch 2.14.1 cu130 (runtime + devel), 2.14.1 cu126 (runtime), the newest torch's runtime.
SET = """
[[publish]]
name = "cu130"
torch = "==2.14.1"
os = ["debian12"]
flavors = ["runtime", "devel"]

[[publish]]
name = "cu126"
torch = "==2.14.1"
variants = ["cu126"]
os = ["debian12"]
flavors = ["runtime"]

[[publish]]
name = "newest"
torch = "==2.15.0"
os = ["debian12"]
flavors = ["runtime"]
"""

# One multi-platform image (arm64 listed first), and two of them (Python 3.11 and 3.12).
BOTH = """
[[publish]]
name = "both"
torch = "==2.14.1"
os = ["debian12"]
flavors = ["runtime"]
platforms = ["linux/arm64", "linux/amd64"]
"""
TWO = BOTH + BOTH.replace('name = "both"', 'name = "both312"').replace(
    'flavors = ["runtime"]', 'flavors = ["runtime"]\npython = ["3.12"]'
)


def matrix_with(publish: str, folder: Path) -> Matrix:
    """The real matrix.toml with its [[publish]] entries replaced by `publish`."""
    text = (ROOT / "matrix.toml").read_text()
    path = folder / "matrix.toml"
    path.write_text(text[: text.index("[[publish]]")] + publish)
    return load_matrix(path)


@dataclass
class PublishFakes:
    m: Matrix
    items: list[Item]
    registry: FakeRegistry = field(default_factory=FakeRegistry)
    engines: list[FakeEngine] = field(default_factory=list)
    faults: dict[str, dict[str, Any]] = field(default_factory=dict)  # group -> knobs
    every: dict[str, Any] = field(default_factory=dict)  # knobs of every engine made from now on
    plans: dict[str, Plan] = field(default_factory=dict)  # content hash -> plan
    groups: dict[str, str] = field(default_factory=dict)  # content hash -> group

    def __post_init__(self) -> None:
        for item in self.items:
            plan = make_plan(self.m, item.combo, item.options)
            self.plans[plan.content_hash] = plan
            self.groups[plan.content_hash] = item.group
        self._images: dict[str, Any] = {}
        self._tags: dict[str, str] = {}
        self._built: dict[str, str] = {}

    def fault(self, group: str, **knobs: Any) -> None:
        assert group in self.groups.values(), f"no group {group}"
        self.faults[group] = knobs

    def factory(self) -> FakeEngine:
        engine = _SharedFake(self, {}, registry=self.registry)
        engine.images, engine.tags, engine.built_target = self._images, self._tags, self._built
        for knob, value in self.every.items():
            setattr(engine, knob, value)
        self.engines.append(engine)
        return engine

    def registry_for(self, auth: RegistryAuth | None) -> FakeRegistry:
        return self.registry

    def ops(self) -> list[tuple[str, tuple[str, ...]]]:
        """Every engine call of the run, engine by engine (each group's calls are in order)."""
        return [(c.op, c.args) for e in self.engines for c in e.calls]

    def pushed(self) -> list[str]:
        return [ref for e in self.engines for ref in e.pushed()]

    def tagged(self) -> set[str]:
        return set(self._tags)


class _SharedFake(FakeEngine):
    """Builds whatever plan the content-hash label names, with that plan's group's faults."""

    def __init__(self, fakes: PublishFakes, contents: Any, registry: FakeRegistry) -> None:
        super().__init__(contents, registry=registry)
        self.fakes = fakes

    def build(self, request: BuildRequest, on_line: Any) -> str:
        content_hash = dict(request.labels)[CONTENT_LABEL]
        self.contents = contents_of(self.fakes.plans[content_hash])
        for knob, value in self.fakes.faults.get(self.fakes.groups[content_hash], {}).items():
            setattr(self, knob, value)
        return super().build(request, on_line)


def fakes_for(publish: str, folder: Path) -> PublishFakes:
    m = matrix_with(publish, folder)
    items, excluded = expand(m)
    assert items, f"the publish set selects nothing: {excluded}"
    return PublishFakes(m, items)


def run_publish(
    fakes: PublishFakes, tmp_path: Path, every: list[Item] | None = None, **options: Any
) -> tuple[Report, list[str]]:
    """Plan and publish `fakes`' items (`every`: the whole set, for --only runs) into tmp_path/work; the report
    and the log lines."""
    options.setdefault("build_tags", False)  # tests/unit/test_publish_build_tags.py turns them on
    settings = PublishSettings(repo=REPO, out_root=tmp_path / "work", **options)
    log: list[str] = []
    pplan = plan_publish(fakes.m, fakes.items, [], every)
    return publish(pplan, settings, log.append, fakes.factory, fakes.registry_for), log


def planning_fails(monkeypatch: pytest.MonkeyPatch, when: Callable[[Combination], bool], message: str) -> None:
    """publish's planning of a combination `when` holds raises TorchyardError(message), as a matrix without a
    base image for it would make it (the fakes plan every item with the real make_plan)."""

    def failing(m: Matrix, combo: Combination, options: Any) -> Plan:
        if when(combo):
            raise TorchyardError(message)
        return make_plan(m, combo, options)

    monkeypatch.setattr(publish_plan, "make_plan", failing)


@pytest.fixture(name="fakes")
def fakes_fixture(tmp_path: Path) -> Iterator[PublishFakes]:
    """The publish set SET over a fake engine and registry; a test module uses it by importing it."""
    yield fakes_for(SET, tmp_path)
    # a Ctrl-C test leaves the process-wide cancel flag set (the CLI exits then): a later build in this pytest
    # process would stop "before tagging" (seen when mutmut's fast_first ran the tests in another order)
    reset_cancel()
