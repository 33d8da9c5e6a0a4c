"""Issue 44 item 4: policy reaches what is published. The security gate judges an image a publish skips (the
registry holds it with its content) from the SBOM published with it, or the local image without --push; a blocked
one fails its item (exit 4) with no build, and its aliases are held. Also what the SBOM gives the gate."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import lzma
from pathlib import Path
from typing import Any

import pytest
from fake_engine import FakeRegistry
from http_kit import Answer, Net, json_answer
from packaging.version import Version
from publish_kit import (
    BOTH,
    REPO,
    PublishFakes,
    fakes_fixture,  # noqa: F401 (the `fakes` fixture)
    fakes_for,
)
from publish_kit import run_publish as run
from render_kit import ROOT

from builder.core.errors import BuildError
from builder.core.kinds import AliasStatus, Status
from builder.matrix import load_matrix
from builder.matrix.model import OSBase
from builder.pipeline.allowlist import Entry
from builder.pipeline.gate import SecurityGate
from builder.pipeline.security import DebPackage
from builder.publish import policy
from builder.publish.report import PublishInterrupted, Report
from builder.trust import cosign

TODAY = datetime.date(2026, 12, 1)
SUITE = "http://deb.debian.org/debian-security/dists/bookworm-security"
PACKAGES = "Package: libssl3\nSource: openssl\nVersion: 3.0.15-1~deb12u1\nArchitecture: amd64\n"
OLD_SSL = "3.0.11-1~deb12u2"


def _sbom(ssl: str = OLD_SSL, *, dpkg: bool = True) -> bytes:
    """An SBOM as builder/trust/sbom.py writes it (the fields the gate reads)."""
    deb = {"name": "libssl3", "version": ssl, "purl": f"pkg:deb/debian/libssl3@{ssl}?arch=amd64&distro=debian-12",
           "properties": [{"name": "torchyard:dpkg:source", "value": "openssl"}]}  # fmt: skip
    base = {"name": "base-files", "version": "12.4", "purl": "pkg:deb/debian/base-files@12.4?arch=amd64"}
    torch = {"name": "torch", "version": "2.14.1", "purl": "pkg:pypi/torch@2.14.1"}
    metadata: dict[str, Any] = {"properties": []}
    if not dpkg:
        metadata["properties"].append({"name": "torchyard:dpkg", "value": "no dpkg status database in the image"})
    doc = {"bomFormat": "CycloneDX", "specVersion": "1.6", "metadata": metadata, "components": [deb, base, torch]}
    return json.dumps(doc).encode() if dpkg else json.dumps(doc | {"components": [torch]}).encode()


def _gate(allow: bool = False) -> tuple[SecurityGate, Net]:
    net = Net()
    data = lzma.compress(PACKAGES.encode())
    listed = f"SHA256:\n {hashlib.sha256(data).hexdigest()} {len(data)} main/binary-amd64/Packages.xz\n"
    net.route("GET", f"{SUITE}/InRelease", Answer(200, listed.encode()))
    net.route("GET", f"{SUITE}/main/binary-amd64/Packages.xz", Answer(200, data))
    net.route("GET", "https://pypi.org/pypi/torch/2.14.1/json", json_answer({"vulnerabilities": []}))
    allowed = (Entry("openssl", "DSA-5800-1", "TLS is not used", TODAY, None),) if allow else ()
    return SecurityGate(net.http(), allowed, TODAY), net


def _published(monkeypatch: pytest.MonkeyPatch, sbom: bytes | None) -> list[str]:
    """The registry's SBOM referrer of every image: `sbom` (None: none attached); the digests asked about."""
    asked: list[str] = []

    def read_attached(client: object, repo: object, digest: str, artifact_type: str) -> tuple[str, bytes] | None:
        asked.append(digest)
        assert artifact_type == "application/vnd.cyclonedx+json"
        return None if sbom is None else ("sha256:" + "5b" * 32, sbom)

    monkeypatch.setattr(policy, "read_attached", read_attached)
    return asked


def _again(fakes: PublishFakes, tmp_path: Path, gate: SecurityGate, **options: Any) -> tuple[Report, list[str]]:
    """A first publish without the gate, then the same set again with it: every image is skipped."""
    run(fakes, tmp_path / "first", **options)
    fakes.engines.clear()
    return run(fakes, tmp_path / "again", security_gate=gate, **options)


def test_turning_on_the_gate_fails_the_next_run_on_what_is_published_without_a_build(
    fakes: PublishFakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _published(monkeypatch, _sbom())
    report, log = _again(fakes, tmp_path, _gate()[0])
    assert {i.status for i in report.items} == {Status.FAILED}
    runtime = next(i for i in report.items if i.id == "torch2.14.1-cu130-py3.11-debian12-runtime")
    assert runtime.reason == (
        f"security gate: 1 package(s) of {REPO}:2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime have a pending "
        f"bookworm-security update: libssl3 {OLD_SSL} -> 3.0.15-1~deb12u1 (no allowlist entry covers it); rebuild "
        "with --refresh, or add an allowlist entry (docs/security-gate.md)"
    )
    assert report.failed  # the CLI exits 4
    assert [op for op, _ in fakes.ops() if op in ("build", "push", "pull")] == []  # nothing rebuilt, nothing pulled
    assert {a.status for a in report.aliases} == {AliasStatus.HELD}
    assert len(asked) == 4 and all(d.startswith("sha256:") for d in asked)
    assert any(line.startswith("FAIL  torch2.14.1-cu130-py3.11-debian12-runtime: security gate") for line in log)


def test_an_allowed_update_lets_the_skipped_image_pass_with_the_gates_findings(
    fakes: PublishFakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _published(monkeypatch, _sbom())
    report, log = _again(fakes, tmp_path, _gate(allow=True)[0])
    assert {i.status for i in report.items} == {Status.SKIPPED} and not report.failed
    found = report.items[0].security
    assert found["os"] == "1 pending bookworm-security update(s), each allowed"
    assert found["python"] == "no advisories known to PyPI for 1 distributions"
    assert AliasStatus.HELD not in {a.status for a in report.aliases}
    assert sum(line.startswith("GATE  ") for line in log) == 4


def test_a_published_image_without_an_sbom_is_not_checked_so_not_passed(
    fakes: PublishFakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _published(monkeypatch, None)
    gate, net = _gate()
    report, _ = _again(fakes, tmp_path, gate)
    ref = f"{REPO}:2.15.0-cuda13.2-cudnn9-py3.11-debian12-runtime"
    newest = next(i for i in report.items if i.ref == ref)
    assert (newest.status, newest.reason) == (
        Status.FAILED,
        f"security gate not checked: {ref} has no SBOM attached (publish with --attest or --sign-key); "
        "not checked, so not passed",
    )
    assert net.urls() == []  # nothing asked of the archive or PyPI for an image it could not read


def test_without_push_the_gate_reads_the_local_image_it_skipped(fakes: PublishFakes, tmp_path: Path) -> None:
    status = "Package: libssl3\nStatus: install ok installed\nSource: openssl\nVersion: 3.0.11-1~deb12u2\n"
    files = {"/usr/lib/os-release": b"ID=debian\nVERSION_CODENAME=bookworm\n", "/var/lib/dpkg/status": status.encode()}
    fakes.every["read_file"] = lambda image, path, limit=1 << 20: files.get(path)
    fakes.every["scripted"] = {}
    report, _ = _again(fakes, tmp_path, _gate()[0], push=False)
    assert {i.status for i in report.items} == {Status.FAILED}
    assert "libssl3 3.0.11-1~deb12u2 -> 3.0.15-1~deb12u1" in report.items[0].reason
    assert [op for op, _ in fakes.ops() if op == "build"] == []


def test_a_blocked_platform_of_a_published_multi_platform_image_holds_its_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _published(monkeypatch, _sbom())
    fakes = fakes_for(BOTH, tmp_path)
    report, _ = _again(fakes, tmp_path, _gate()[0])
    amd64 = next(i for i in report.items if i.id == "torch2.14.1-cu130-py3.11-debian12-runtime")
    assert amd64.status is Status.FAILED and amd64.reason.startswith("security gate: 1 package(s) of ")
    [index] = report.indexes
    assert index.status is AliasStatus.HELD and "security gate" in index.reason
    assert {a.status for a in report.aliases} == {AliasStatus.HELD}
    assert [op for op, _ in fakes.ops() if op == "build"] == []


def test_a_stop_while_the_gate_reads_what_is_published_still_gives_a_report(
    fakes: PublishFakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(fakes, tmp_path / "first")

    def stopped(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(policy, "read_attached", stopped)
    with pytest.raises(PublishInterrupted) as caught:
        run(fakes, tmp_path / "again", security_gate=_gate()[0])
    assert str(caught.value) == policy.GATE_STOPPED
    assert {a.status for a in caught.value.report.aliases} == {AliasStatus.HELD}
    assert {i.status for i in caught.value.report.items} == {Status.SKIPPED}


class _Key:
    def public(self) -> str:
        return "the public key"


def test_with_a_key_an_sbom_not_signed_with_it_is_not_checked_so_not_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _published(monkeypatch, _sbom())
    checked: list[tuple[str, object]] = []

    def signed_by(client: object, repo: object, digest: str, key: object) -> str | None:
        checked.append((digest, key))
        return "no signature by this key"

    monkeypatch.setattr(cosign, "signed_by", signed_by)
    registry = FakeRegistry()
    ref = f"{REPO}:tag"
    registry.images[ref] = ("linux/amd64", "sha256:" + "1a" * 32)
    with pytest.raises(BuildError) as caught:
        policy.published_packages((registry, _Key()), ref, "linux/amd64", DEBIAN12)  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"security gate not checked: the SBOM of {ref} is not signed with this run's key (no signature by this "
        "key); not checked, so not passed"
    )
    assert asked == ["sha256:" + "1a" * 32] and checked == [("sha256:" + "5b" * 32, "the public key")]
    assert policy.published_packages((registry, None), ref, "linux/amd64", DEBIAN12).debian  # no key: read as is


# -- what the SBOM gives the gate ---------------------------------------------------------------------------------

DEBIAN12 = OSBase(name="debian12", image="debian:bookworm-slim", family="debian", system_python="3.11",
                  glibc=Version("2.36"), python_images=(),
                  python_image="", sources=(), codename="bookworm")  # fmt: skip


def test_the_sbom_gives_packages_with_their_source_and_the_matrix_the_codename() -> None:
    found = policy.packages_of_sbom(_sbom(), "repo:tag", DEBIAN12)
    assert found.debian == (DebPackage("base-files", "12.4", "base-files"), DebPackage("libssl3", OLD_SSL, "openssl"))
    assert found.release == {"ID": "debian", "VERSION_CODENAME": "bookworm", "PRETTY_NAME": "debian12"}
    assert [(d.name, d.version) for d in found.python] == [("torch", "2.14.1")]


def test_what_the_sbom_or_matrix_does_not_record_is_not_checked() -> None:
    gate = _gate()[0]
    none = policy.packages_of_sbom(_sbom(dpkg=False), "repo:tag", DEBIAN12)
    result = gate.check_packages(none, "linux/amd64")
    assert result.os == "not checked: repo:tag: no dpkg status database in the image (its SBOM)"
    unnamed = policy.packages_of_sbom(_sbom(), "repo:tag", dataclasses.replace(DEBIAN12, codename=""))
    result = gate.check_packages(unnamed, "linux/amd64")
    assert result.os == (
        "not checked: no security suite known for debian12 (matrix.toml records no codename) on linux/amd64"
    )
    with pytest.raises(ValueError, match="not a CycloneDX document"):
        policy.packages_of_sbom(b"[]", "repo:tag", DEBIAN12)


def test_a_blocked_sbom_names_the_published_ref() -> None:
    with pytest.raises(BuildError, match=r"of repo:tag have a pending bookworm-security update: libssl3"):
        _gate()[0].check_packages(policy.packages_of_sbom(_sbom(), "repo:tag", DEBIAN12), "linux/amd64")


def test_every_os_the_matrix_lists_records_its_codename() -> None:
    m = load_matrix(ROOT / "matrix.toml")
    assert {o.name: o.codename for o in m.os} == {
        "debian13": "trixie",
        "debian12": "bookworm",
        "ubuntu20.04": "focal",
        "ubuntu22.04": "jammy",
        "ubuntu24.04": "noble",
    }
    assert all(o.codename in o.python_image for o in m.os if o.python_image)
