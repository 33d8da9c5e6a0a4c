"""What publish hands on and reports, precisely (written for the survivors of `bench/mutation.py publish`,
docs/mutation.md): every publish setting reaches each group's build, the registry login reaches every registry
client, --jobs bounds the groups built at once, Ctrl-C waits for the running groups and says so, a group's
failure is in its log and its items, excluded items are reported, and the set's expansion and plan keep each
entry's own options, reasons and aliases. Fakes at the seam."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from fake_engine import FakeEngine, wall_off_the_engine
from publish_kit import (
    BOTH,
    REPO,
    SET,
    PublishFakes,
    fakes_fixture,  # noqa: F401 (the `fakes` fixture)
    fakes_for,
    matrix_with,
    planning_fails,
)
from publish_kit import run_publish as run

import builder.publish.items as publish_items
import builder.publish.run as publish_run
from builder.core.errors import BuildError, Interrupted, TorchyardError
from builder.core.kinds import AliasStatus, Platform, Status
from builder.engine import RegistryAuth
from builder.pipeline.gate import SecurityGate
from builder.pipeline.pipeline import BuildSettings
from builder.publish.items import Excluded, expand
from builder.publish.plan import plan_publish
from builder.publish.report import ItemResult, Report
from builder.publish.run import PublishSettings, publish
from builder.render.network import Network
from builder.trust.attest import TrustSettings

CU130 = "cu130/torch2.14.1-cu130-py3.11-debian12"
AUTH = RegistryAuth("ci", "s3cret-token")


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


# --- run: what each group's build is given ------------------------------------------------------------------


def test_every_publish_setting_reaches_each_groups_build(tmp_path: Path) -> None:
    fakes = fakes_for(
        SET.replace('flavors = ["runtime", "devel"]', 'flavors = ["runtime", "devel"]\nrequire_archs = ["sm_90"]'),
        tmp_path,
    )
    group = plan_publish(fakes.m, fakes.items, []).groups[0]
    assert group.require_archs == ("sm_90",)
    trust, gate = TrustSettings(facts={"matrix": "abc"}), cast(SecurityGate, object())
    settings = PublishSettings(
        repo=REPO, out_root=tmp_path, jobs=2, gpus="all", auth=AUTH, push=False, pip_conf="[global]\n",
        provenance=(("source", "https://example.org/repo"),), trust=trust, security_gate=gate, epoch=1700000000,
    )  # fmt: skip
    assert publish_run._build_settings(group, settings, tmp_path / "g") == BuildSettings(
        repo=REPO,
        flavors=tuple(i.flavor for i in group.items),
        out_dir=tmp_path / "g",
        push=False,
        auth=AUTH,
        gpus="all",
        pip_conf="[global]\n",
        aliases=False,
        require_archs=group.require_archs,
        force=True,
        provenance=(("source", "https://example.org/repo"),),
        trust=trust,
        member=False,
        security_gate=gate,
        epoch=1700000000,
        keep_unchanged=True,  # a refresh that changed no package leaves the published image
    )


def test_the_registry_login_reaches_every_registry_client(
    fakes: PublishFakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[RegistryAuth | None] = []

    def registry_for(auth: RegistryAuth | None) -> Any:
        asked.append(auth)
        return fakes.registry

    monkeypatch.setattr(publish_run, "write_zstd_copies", lambda *args: [])
    settings = PublishSettings(repo=REPO, out_root=tmp_path / "work", auth=AUTH, zstd=True)
    pplan = plan_publish(fakes.m, fakes.items, [])
    publish(pplan, settings, print, fakes.factory, registry_for)
    publish(pplan, replace(settings, aliases_only=True, zstd=False), print, fakes.factory, registry_for)
    # the push check's, a client per group, the aliases', the build tags', the zstd copies'; then --aliases-only: the
    # push check's, the look-up of what is published, the aliases'
    assert len(asked) == 1 + 3 + 1 + 1 + 1 + 1 + 1 + 1
    assert set(map(id, asked)) == {id(AUTH)}


def test_the_zstd_copies_are_signed_with_the_publishs_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []

    def write_zstd_copies(*args: Any) -> list[object]:
        calls.append(args)
        return []

    monkeypatch.setattr(publish_run, "write_zstd_copies", write_zstd_copies)
    key = object()
    settings = PublishSettings(repo=REPO, out_root=tmp_path, trust=TrustSettings(key=key))  # type: ignore[arg-type]
    fakes = fakes_for(SET, tmp_path)
    pplan = plan_publish(fakes.m, fakes.items, [])
    publish_run._zstd_copies(pplan, Report([], [], 0.0), settings, fakes.registry, print)
    [(client, repo, published, _, signing_key)] = calls
    assert (client, repo, published.images, signing_key) == (fakes.registry.client, REPO, (), key)


# --- run: groups in parallel, and Ctrl-C ----------------------------------------------------------------------


class Watch:
    """FakeEngine.build, slowed down and watched: how many builds run at once, in which threads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, seconds: float, together: int = 1) -> None:
        self.together = together  # builds running at once that each build waits for (at most 10 s) before it goes on
        self.lock = threading.Lock()
        self.running = self.most = self.started = 0
        self.met = threading.Event()  # `together` builds ran at once (a poll could miss that moment)
        self.threads: set[str] = set()
        real = FakeEngine.build

        def build(engine: FakeEngine, request: Any, on_line: Any) -> str:
            with self.lock:
                self.running += 1
                self.started += 1
                first = self.started <= self.together
                self.most = max(self.most, self.running)
                if self.running >= self.together:
                    self.met.set()
                self.threads.add(threading.current_thread().name)
            try:
                if first:  # the first ones meet however slow the machine; one that --jobs holds back goes on
                    self.met.wait(10)
                if engine.fail_build is None:
                    time.sleep(seconds)
                return real(engine, request, on_line)
            finally:
                with self.lock:
                    self.running -= 1

        monkeypatch.setattr(FakeEngine, "build", build)


@pytest.mark.parametrize("jobs", [1, 2])
def test_jobs_bound_the_groups_built_at_once(
    fakes: PublishFakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    watch = Watch(monkeypatch, 0.3, together=jobs)
    report, _ = run(fakes, tmp_path, jobs=jobs)
    assert not report.failed
    assert watch.most == jobs
    assert watch.threads == {f"publish_{n}" for n in range(jobs)}


def test_ctrl_c_waits_for_the_running_groups_and_says_what_it_stopped(
    fakes: PublishFakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = Watch(monkeypatch, 0.5, together=3)
    fakes.fault(CU130, fail_build=KeyboardInterrupt())
    with pytest.raises(Interrupted) as raised:
        run(fakes, tmp_path, jobs=3)
    assert watch.running == 0, "publish returned while a group was still building"
    assert str(raised.value) == (
        "interrupted: run the same publish again to finish (it skips what is published, and with --sign-key or "
        "--attest signs and attests an image pushed just before the stop)"
    )


def test_ctrl_c_logs_how_many_builds_it_stopped(fakes: PublishFakes, tmp_path: Path) -> None:
    fakes.fault(CU130, fail_build=KeyboardInterrupt())
    log: list[str] = []
    settings = PublishSettings(repo=REPO, out_root=tmp_path / "work")
    with pytest.raises(Interrupted):
        publish(plan_publish(fakes.m, fakes.items, []), settings, log.append, fakes.factory, fakes.registry_for)
    assert log[-1] == "interrupted: stopped 0 running build(s); no alias was moved (the report lists what was pushed)"


# --- run: what a group's failure leaves ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "line"),
    [
        (Interrupted("interrupted: stopped by https://ci:hunter2@registry.example/v2/"), "INTERRUPTED: "),
        (BuildError("pip: https://ci:hunter2@pypi.example/simple/ answered 401"), "FAILED: "),
    ],
)
def test_a_failed_group_says_why_in_its_log_and_its_items_with_secrets_masked(
    fakes: PublishFakes, tmp_path: Path, fault: TorchyardError, line: str
) -> None:
    fakes.fault(CU130, fail_build=fault)
    report, _ = run(fakes, tmp_path)
    failed = [i for i in report.items if i.status == Status.FAILED]
    assert [i.id for i in failed] == [
        "torch2.14.1-cu130-py3.11-debian12-runtime",
        "torch2.14.1-cu130-py3.11-debian12-devel",
    ]
    masked = str(fault).replace("ci:hunter2@", "***@")
    if isinstance(fault, BuildError):  # a failed build's line ends with its log's path
        masked += f". Log: {tmp_path / 'work' / CU130.replace('/', '__') / 'build-runtime.log'}"
    assert {i.reason for i in failed} == {masked}
    assert all(isinstance(i.seconds, float) and 0 < i.seconds < 60 for i in failed)
    group_log = (tmp_path / "work" / CU130.replace("/", "__") / "publish.log").read_text()
    assert f"{line}{masked}\n" in group_log and "hunter2" not in group_log


def test_each_item_reports_its_time_and_security_and_logs_ok_then_skip(fakes: PublishFakes, tmp_path: Path) -> None:
    report, log = run(fakes, tmp_path)
    assert all(isinstance(i.seconds, float) and i.seconds > 0 and i.security == {} for i in report.items)
    first = report.items[0]
    assert f"OK    {first.id}: built {first.ref}" in log
    again = PublishFakes(fakes.m, fakes.items, registry=fakes.registry)
    _, log = run(again, tmp_path / "again")
    assert f"SKIP  {first.id}: skipped {first.ref}" in log


def test_excluded_items_are_reported_last_with_their_reason(fakes: PublishFakes, tmp_path: Path) -> None:
    excluded = [Excluded("legacy", "torch2.14.1-cu118-py3.11-debian12-runtime", "no cu118 wheels")]
    settings = PublishSettings(repo=REPO, out_root=tmp_path / "work", aliases=False)
    report = publish(plan_publish(fakes.m, fakes.items, excluded), settings, print, fakes.factory, fakes.registry_for)
    assert report.items[-1] == ItemResult(
        "torch2.14.1-cu118-py3.11-debian12-runtime", Status.EXCLUDED, reason="no cu118 wheels"
    )
    data = report.as_json()
    assert (data["indexes"], data["aliases"], data["summary"]["excluded"]) == ([], [], 1)
    assert 0 <= report.seconds < 60


# --- plan ----------------------------------------------------------------------------------------------------


def failing_plan(monkeypatch: pytest.MonkeyPatch, variant: str) -> None:
    planning_fails(monkeypatch, lambda combo: combo.variant.name == variant, f"no base image for {variant}")


def test_a_group_that_cannot_be_planned_says_why_and_the_later_groups_keep_their_aliases(
    fakes: PublishFakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_plan(monkeypatch, "cu130")
    pplan = plan_publish(fakes.m, fakes.items, [])
    assert [(g.name, g.problem) for g in pplan.groups if g.plan is None] == [(CU130, "no base image for cu130")]
    assert sorted(a.alias for a in pplan.aliases) == [  # SET is on Debian 12, off the default platform
        "2.14-cuda12.6-py3.11-debian12-runtime",
        "2.15-cuda13.2-py3.11-debian12-runtime",
    ]


def test_a_run_without_a_multi_platform_item_plans_no_index(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH + SET.rsplit("\n\n", maxsplit=1)[-1].replace("newest", "single"), tmp_path)
    single = [i for i in fakes.items if not i.entry.multi_platform]
    assert single and len(single) < len(fakes.items)
    assert plan_publish(fakes.m, single, [], fakes.items).indexes == ()


# --- items ---------------------------------------------------------------------------------------------------


def test_a_problem_on_one_platform_excludes_the_image_on_every_platform_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        publish_items,
        "_rules_problem",
        lambda f, combo: "python-torch: no wheels" if combo.platform is Platform.ARM64 else None,
    )
    items, excluded = expand(matrix_with(BOTH, tmp_path))
    assert items == []
    assert [(e.entry, e.id, e.reason) for e in excluded] == [
        ("both", "torch2.14.1-cu130-py3.11-debian12-runtime", "on linux/arm64: python-torch: no wheels"),
        ("both", "torch2.14.1-cu130-py3.11-debian12-arm64-runtime", "on linux/arm64: python-torch: no wheels"),
    ]


def test_a_problem_of_a_single_platform_entry_is_its_reason_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(publish_items, "_rules_problem", lambda f, combo: "python-torch: no wheels")
    _, excluded = expand(matrix_with(SET, tmp_path))
    assert {e.reason for e in excluded} == {"python-torch: no wheels"}


def test_the_entrys_options_and_the_runs_reach_every_item(tmp_path: Path) -> None:
    two_archs = SET.rsplit("\n\n", maxsplit=1)[-1] + 'archs = ["sm_89", "sm_90"]\ninstaller = "pip"\n'
    network = Network(pip_index_url="https://pypi.example/simple")
    items, _ = expand(matrix_with(two_archs, tmp_path), network=network, registry_mirror="mirror.example:5000")
    [item] = items
    assert item.id == "torch2.15.0-cu132-py3.11-debian12-runtime-sm89-sm90"
    assert (item.options.installer.value, item.options.network, item.options.registry_mirror) == (
        "pip",
        network,
        "mirror.example:5000",
    )


def test_an_alias_without_push_needs_the_image_in_the_local_engine(fakes: PublishFakes, tmp_path: Path) -> None:
    settings = PublishSettings(repo=REPO, out_root=tmp_path, push=False)
    immutable = f"{REPO}:2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
    moved = publish_run._move(fakes.factory(), fakes.registry, immutable, f"{REPO}:2.14-cuda13.0-runtime",
                              settings, print)  # fmt: skip
    assert (moved.alias, moved.status, moved.target, moved.reason) == (
        "2.14-cuda13.0-runtime",
        AliasStatus.HELD,
        immutable,
        f"{immutable} is not in the local engine",
    )
