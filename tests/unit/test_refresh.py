"""Refreshes that say what changed (issue 44 item 3): a refresh whose package set is the published image's pushes
nothing and keeps its digest; one that changes packages is published with the changes listed; a published image
without an SBOM is not compared (and published as before); a base without a security suite is reported.

The published image's SBOM is planted in an in-memory registry under the digest the fake registry holds for the
tag: a "package change" here is an SBOM that lists another version than the rebuilt image's inventory has (what
a real refresh's apt-get upgrade would make), said so in each test."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fake_engine import FakeEngine, FakeRegistry, wall_off_the_engine
from publish_kit import BOTH, REPO, PublishFakes, matrix_with
from publish_kit import run_publish as run
from test_trust_sbom import INVENTORY
from trust_kit import registry, write_key

from builder.cli.main import main
from builder.core.kinds import Flavor, Status
from builder.engine import RunResult
from builder.image.inventory import INVENTORY_MARK
from builder.oci.client import OCI_INDEX, OCI_MANIFEST, Manifest
from builder.oci.referrers import attach
from builder.oci.refs import parse_repo, platform_fields
from builder.pipeline.pipeline import BuildSettings, build
from builder.pipeline.plan import CONTENT_LABEL
from builder.pipeline.refresh import NO_SECURITY, read_sources, security_suites
from builder.publish.items import expand
from builder.publish.notes import release_notes
from builder.publish.report import ItemResult, Report
from builder.trust import sbom
from builder.trust.inventory import parse_inventory
from builder.trust.keys import signing_key
from builder.trust.sbom_diff import Change, diff, of_inventory, of_sbom

TOKEN = "2026-W49"
ONE = """
[[publish]]
name = "newest"
torch = "==2.15.0"
os = ["debian12"]
flavors = ["runtime"]
"""
IMMUTABLE = f"{REPO}:2.15.0-cuda13.2-cudnn9-py3.11-debian12-runtime"
DEBIAN = "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
SECURITY = DEBIAN + "\nTypes: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n"


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


def _sbom_of(data: dict[str, Any]) -> bytes:
    subject = sbom.Subject(repo="127.0.0.1:5000/team/torch", digest="sha256:" + "0" * 64, platform="linux/amd64")
    return sbom.make_sbom(parse_inventory(data), subject, {}, datetime(2026, 12, 1, tzinfo=UTC)).encode()


def _older_libc() -> dict[str, Any]:
    """INVENTORY as last week's image held it: libc6 (amd64) one Debian update behind."""
    dpkg = [dict(p, version="2.36-9+deb12u9") if p["package"] == "libc6" and p["architecture"] == "amd64" else p
            for p in _listed("dpkg")]  # fmt: skip
    return dict(INVENTORY, dpkg=dpkg)


def _listed(key: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = INVENTORY[key]  # type: ignore[assignment]  # the test data's JSON shape
    return found


# -- the diff ------------------------------------------------------------------------------------------------------


def test_an_sbom_and_the_inventory_it_was_made_from_hold_the_same_packages() -> None:
    assert diff(of_sbom(_sbom_of(INVENTORY)), of_inventory(parse_inventory(INVENTORY))) == ()


def test_the_diff_lists_each_package_added_removed_or_at_another_version() -> None:
    newer = dict(INVENTORY, distributions=[*_listed("distributions")[:3], {"name": "Typing_Extensions",
                 "version": "4.15.0", "license": None, "sha256": None}])  # fmt: skip
    changes = diff(of_sbom(_sbom_of(_older_libc())), of_inventory(parse_inventory(newer)))

    assert [c.describe() for c in changes] == [
        "deb libc6 2.36-9+deb12u9 -> 2.36-9+deb12u10",
        "pypi pip 25.0 (removed)",
        "pypi typing-extensions 4.15.0 (added)",
    ]
    assert changes[0] == Change("deb", "libc6", "amd64", "2.36-9+deb12u9", "2.36-9+deb12u10")  # i386's is the same
    assert changes[1].as_json()["change"] == "removed"


def test_a_document_that_is_not_an_sbom_is_refused() -> None:
    with pytest.raises(ValueError):
        of_sbom(b'{"components": "none"}')


@pytest.mark.parametrize(
    ("sources", "suites"),
    [
        (SECURITY, ["bookworm-security"]),
        (DEBIAN, []),
        ("deb [arch=amd64 signed-by=/k.gpg] http://archive.ubuntu.com/ubuntu jammy-security main\n",
         ["jammy-security"]),
        ("deb http://deb.debian.org/debian buster main\ndeb http://security.debian.org buster/updates main\n",
         ["buster/updates"]),
        ("# deb http://security.ubuntu.com/ubuntu jammy-security main\ndeb-src http://x jammy-security main\n", []),
    ],
)  # fmt: skip
def test_the_security_suite_is_found_in_one_line_and_deb822_sources(sources: str, suites: list[str]) -> None:
    assert security_suites(sources) == suites


# -- a publish with a refresh token --------------------------------------------------------------------------------


def _published(tmp_path: Path, day: str = "20261128") -> PublishFakes:
    """Last week's publish of ONE (build tag of `day`), then the fakes of this week's refresh over its registry."""
    m = matrix_with(ONE, tmp_path)
    last = PublishFakes(m, expand(m)[0])
    report, _ = run(last, tmp_path / "last", build_tags=True, build_day=day)
    assert [i.status for i in report.items] == [Status.BUILT]
    fakes = PublishFakes(m, expand(m, refresh=TOKEN)[0], registry=last.registry)
    fakes.registry.client = registry()[1]
    fakes.every = {"scripted": {"python": _inventory(INVENTORY), "sh": RunResult(0, f"### /x.sources\n{SECURITY}")}}
    return fakes


def _inventory(data: dict[str, Any]) -> RunResult:
    return RunResult(0, INVENTORY_MARK + json.dumps(data) + "\n")


def _plant(fakes: PublishFakes, content: bytes, ref: str = IMMUTABLE) -> str:
    """`content` attached as the SBOM of the image published under `ref`; its digest."""
    found = fakes.registry.read(ref)
    assert found is not None
    subject = Manifest(OCI_MANIFEST, found.digest, b"{}", {})
    attach(fakes.registry.client, parse_repo(REPO), subject, sbom.MEDIA_TYPE, content, {})
    return found.digest


def _smoke_runs(fakes: PublishFakes) -> int:
    return sum(1 for e in fakes.engines for c in e.of("run") if c.mounts)


def test_a_refresh_that_changes_no_package_pushes_nothing_and_keeps_the_digest(tmp_path: Path) -> None:
    fakes = _published(tmp_path)
    digest = _plant(fakes, _sbom_of(INVENTORY))
    before = dict(fakes.registry.images)
    report, log = run(fakes, tmp_path / "week", build_tags=True, build_day="20261205")

    [item] = report.items
    assert item.status == Status.SKIPPED and item.digest == digest and not item.build_tag
    assert item.refresh["packages"] == "unchanged" and item.refresh["compared_with"] == digest
    assert fakes.pushed() == [] and fakes.registry.images == before, "every tag names what it named"
    assert _smoke_runs(fakes) == 0, "no smoke suite for an image that is not pushed"
    assert [a.status for a in report.aliases] == ["unchanged"] * len(report.aliases)
    assert f"SAME  {item.id}: refresh {TOKEN} changed no package: {digest} kept" in log
    assert not report.failed


def test_the_aliases_job_after_a_keep_counts_the_kept_image_as_published(tmp_path: Path) -> None:
    """The exported workflow's aliases job runs --aliases-only with the week's token after promote kept an image:
    the kept image (built with no token or an older one, the same content) is published, not a MISS."""
    fakes = _published(tmp_path)
    digest = _plant(fakes, _sbom_of(INVENTORY))
    run(fakes, tmp_path / "week")
    report, log = run(fakes, tmp_path / "aliases", aliases_only=True)

    assert [(i.status, i.ref) for i in report.items] == [(Status.SKIPPED, IMMUTABLE)] and not report.failed
    assert f"KEPT  {IMMUTABLE}: this content (built with no refresh token), kept: no package changed since" in log
    assert fakes.registry.images[IMMUTABLE][1] == digest
    fakes.registry.refs[IMMUTABLE][CONTENT_LABEL] = "sha256:" + "0" * 64  # other content: not this plan's
    again, _ = run(fakes, tmp_path / "again", aliases_only=True)
    assert [i.status for i in again.items] == [Status.FAILED]


def test_a_published_image_of_other_content_is_published_anew_whatever_its_packages(tmp_path: Path) -> None:
    """A refresh replaces only packages: when the published image's Dockerfile, build arguments or files differ
    (here: its content hash is another), the same packages keep nothing, and the new content is published."""
    fakes = _published(tmp_path)
    old = _plant(fakes, _sbom_of(INVENTORY))
    fakes.registry.refs[IMMUTABLE][CONTENT_LABEL] = "sha256:" + "0" * 64  # built from another Dockerfile
    report, _ = run(fakes, tmp_path / "week")

    [item] = report.items
    assert item.status == Status.BUILT and item.digest != old and fakes.pushed() == [IMMUTABLE]
    assert item.refresh["packages"] == (
        f"not compared: {IMMUTABLE} differs in more than its refresh token (Dockerfile, build arguments or context "
        "files)"
    )


def test_a_planted_package_change_is_published_with_a_new_build_tag_and_listed(tmp_path: Path) -> None:
    fakes = _published(tmp_path)
    old = _plant(fakes, _sbom_of(_older_libc()))  # the published SBOM says libc6 was one update behind
    report, log = run(fakes, tmp_path / "week", build_tags=True, build_day="20261205")

    [item] = report.items
    assert item.status == Status.BUILT and item.digest != old and fakes.pushed() == [IMMUTABLE]
    assert item.build_tag == f"{IMMUTABLE}-20261205"
    assert fakes.registry.images[f"{IMMUTABLE}-20261128"][1] == old, "last week's build tag was not rewritten"
    assert item.refresh["packages"] == "1 change(s)"
    assert item.refresh["changes"] == [{"kind": "deb", "name": "libc6", "arch": "amd64", "change": "changed",
                                        "old": "2.36-9+deb12u9", "new": "2.36-9+deb12u10"}]  # fmt: skip
    assert f"CHG   {item.id}: deb libc6 2.36-9+deb12u9 -> 2.36-9+deb12u10" in log
    assert _smoke_runs(fakes) == 1
    assert report.as_json()["items"][0]["refresh"]["token"] == TOKEN


def test_a_published_image_without_an_sbom_is_not_compared_and_published(tmp_path: Path) -> None:
    fakes = _published(tmp_path)
    old = fakes.registry.images[IMMUTABLE][1]
    report, log = run(fakes, tmp_path / "week")

    [item] = report.items
    assert item.status == Status.BUILT and fakes.pushed() == [IMMUTABLE]
    assert item.refresh["packages"] == f"not compared: {IMMUTABLE} ({old}) has no SBOM"
    assert f"NEW   {item.id}: refresh {TOKEN}: packages not compared: {IMMUTABLE} ({old}) has no SBOM" in log


def test_an_sbom_not_signed_with_the_runs_key_is_not_compared(tmp_path: Path) -> None:
    from builder.pipeline.refresh import compare

    fakes = _published(tmp_path)
    _plant(fakes, _sbom_of(INVENTORY))  # the same packages, but anyone with push rights could have written it
    key = signing_key(write_key(tmp_path), {})
    engine = fakes.factory()
    unrefreshed = fakes.registry.refs[IMMUTABLE][CONTENT_LABEL]  # published without a token: its content hash
    verdict, _, changes = compare(engine, fakes.registry, IMMUTABLE, "sha256:new", key, unrefreshed)

    assert verdict.startswith(f"not compared: the SBOM of {IMMUTABLE} (sha256:") and "not signed" in verdict
    assert changes == ()


def test_a_base_without_a_security_suite_is_reported_before_the_build(tmp_path: Path) -> None:
    fakes = _published(tmp_path)
    _plant(fakes, _sbom_of(INVENTORY))
    fakes.every["scripted"] = dict(fakes.every["scripted"], sh=RunResult(0, f"### /x.sources\n{DEBIAN}"))
    report, log = run(fakes, tmp_path / "week")

    [item] = report.items
    assert item.refresh["sources"] == NO_SECURITY
    assert f"WARN  {item.id}: {NO_SECURITY}" in log
    group_log = next((tmp_path / "week").glob("work/*/publish.log")).read_text()
    assert f"WARNING: [runtime] refresh {TOKEN}, apt sources of the built image (no local base): " in group_log


def test_a_local_base_is_read_before_the_build(tmp_path: Path) -> None:
    fakes = _published(tmp_path)
    plan = next(iter(fakes.plans.values()))
    base = plan.spec.base_image(plan.targets[0].flavor)
    engine = fakes.factory()  # the shared fake daemon: it holds the base now
    engine.images["base"] = _image("base")
    engine.tags[base] = "base"
    run(fakes, tmp_path / "week")

    ops = [(c.op, c.args[:2]) for e in fakes.engines for c in e.calls if c.op in ("build", "run")]
    assert ops[0] == ("run", (base, "sh")), "the base's sources are read before anything is built"
    group_log = next((tmp_path / "week").glob("work/*/publish.log")).read_text()
    assert f"[runtime] refresh {TOKEN}, apt sources of the base {base}: lists bookworm-security" in group_log


def _image(image_id: str) -> Any:
    from builder.engine import ImageInfo

    return ImageInfo(id=image_id, labels={}, tags=(), digests=(), size=1)


# -- the release notes ---------------------------------------------------------------------------------------------


def test_the_release_notes_list_the_package_changes_and_the_new_build_tag(tmp_path: Path) -> None:
    fakes = _published(tmp_path)
    _plant(fakes, _sbom_of(_older_libc()))  # planted: the published SBOM says libc6 was one update behind
    report, _ = run(fakes, tmp_path / "week", build_tags=True, build_day="20261205")
    notes = release_notes(report)

    [item] = report.items
    assert f"| `{IMMUTABLE}` | built and pushed | `{item.digest}` | `{IMMUTABLE}-20261205` |" in notes
    assert f"## Package changes (refresh {TOKEN})" in notes
    assert "- deb `libc6` 2.36-9+deb12u9 → 2.36-9+deb12u10" in notes


def test_the_release_notes_of_an_unchanged_refresh_say_the_digest_was_kept(tmp_path: Path) -> None:
    fakes = _published(tmp_path)
    digest = _plant(fakes, _sbom_of(INVENTORY))
    fakes.every["scripted"] = dict(fakes.every["scripted"], sh=RunResult(0, f"### /x.sources\n{DEBIAN}"))
    report, _ = run(fakes, tmp_path / "week")
    notes = release_notes(report)

    assert f"| `{IMMUTABLE}` | unchanged by the refresh (kept) | `{digest}` | none this run |" in notes
    assert f"> **Warning:** {NO_SECURITY}" in notes
    assert f"No package changed: the published image {digest} stays." in notes


@pytest.mark.parametrize("other", ["--plan", "--dry-run"])
def test_notes_are_written_by_a_publish_only(other: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["publish", other, "--notes", "notes.md"])
    assert exit_.value.code == 2
    assert "--notes writes what a publish did" in capsys.readouterr().err


def test_a_multi_platform_refresh_that_changes_nothing_keeps_the_index_and_each_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = matrix_with(BOTH, tmp_path)
    last = PublishFakes(m, expand(m)[0])
    first, _ = run(last, tmp_path / "last", build_tags=True, build_day="20261128")
    [index] = first.indexes
    fakes = PublishFakes(m, expand(m, refresh=TOKEN)[0], registry=last.registry)
    fakes.registry.client = registry()[1]
    fakes.every = {"scripted": {"python": _inventory(INVENTORY), "sh": RunResult(0, f"### /x.sources\n{SECURITY}")}}
    for platform in ("amd64", "arm64"):
        _plant(fakes, _sbom_of(INVENTORY), f"{REPO}:{index.tag}-{platform}")
    monkeypatch.setattr(fakes.registry, "read", _reading_indexes(fakes.registry))
    before = (dict(fakes.registry.images), dict(fakes.registry.indexes))
    report, log = run(fakes, tmp_path / "week", build_tags=True, build_day="20261205")

    assert [i.status for i in report.items] == [Status.SKIPPED, Status.SKIPPED] and fakes.pushed() == []
    assert [i.status for i in report.indexes] == ["unchanged"] and not report.indexes[0].build_tag
    assert (fakes.registry.images, fakes.registry.indexes) == before, "no image, index or alias was written"
    assert (
        f"SKIP  {REPO}:{index.tag}: the index and its aliases already list these images (a refresh changed none)" in log
    )


def _reading_indexes(fake: FakeRegistry) -> Callable[[str], Manifest | None]:
    """The fake registry's read, also answering for the indexes it holds (as the real registry does)."""
    read = fake.read

    def reading(ref: str) -> Manifest | None:
        if ref not in fake.indexes:
            return read(ref)
        members, content_hash = fake.indexes[ref]
        digest = "sha256:" + hashlib.sha256(json.dumps([members, content_hash], sort_keys=True).encode()).hexdigest()
        entries = [{"digest": d, "platform": platform_fields(p)} for p, d in members.items()]
        return Manifest(OCI_INDEX, digest, b"{}", {"manifests": entries})

    return reading


def test_build_push_publishes_every_refresh_for_the_workflow_to_promote(tmp_path: Path) -> None:
    """`torchyard build --push` pushes the candidate the exported workflow promotes with the planned content hash:
    it compares nothing and pushes the refreshed image (only publish keeps an unchanged one)."""
    fakes = _published(tmp_path)
    _plant(fakes, _sbom_of(INVENTORY))
    plan = next(iter(fakes.plans.values()))
    settings = BuildSettings(repo=REPO, flavors=(Flavor.RUNTIME,), out_dir=tmp_path / "ctx", push=True, aliases=False,
                             force=True)  # fmt: skip
    log: list[str] = []
    [outcome] = build(fakes.factory(), plan, settings, log.append, fakes.registry)

    assert outcome.status is Status.BUILT and fakes.pushed() == [IMMUTABLE]
    assert outcome.refresh is not None and outcome.refresh.sources == "lists bookworm-security"
    assert outcome.refresh.packages == "not compared: only a publish that pushes compares with the published image"


@pytest.mark.parametrize(
    ("result", "verdict"),
    [
        (RunResult(0, ""), f"{NO_SECURITY} (it has no apt source file)"),
        (RunResult(126, "exec format error"), "not checked: reading the apt sources of img exited 126"),
        (RunResult(137, "", timed_out=True), "not checked: reading the apt sources of img timed out"),
    ],
)
def test_sources_that_cannot_be_read_are_not_checked_and_none_at_all_list_no_suite(
    result: RunResult, verdict: str
) -> None:
    engine = FakeEngine({}, scripted={"sh": result})
    assert read_sources(engine, "img") == verdict


def test_the_release_notes_name_what_failed_and_say_when_nothing_was_published() -> None:
    failed = ItemResult("torch2.15.0-runtime", Status.FAILED, reason="smoke suite failed, nothing tagged\nsecond line")
    notes = release_notes(Report([failed], [], 1.0))

    assert notes.startswith("# Published images\n\nNothing was published.\n")
    assert "- `torch2.15.0-runtime`: smoke suite failed, nothing tagged\n" in notes and "second line" not in notes
