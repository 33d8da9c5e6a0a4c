"""The security gate (issue 19, item 5) with recorded inputs: an image's dpkg status and os-release, the security
suite's InRelease and Packages index, PyPI's advisories, and allowlists in AWS DLC's format; then the gate in the
build pipeline (nothing tagged when it blocks) and the publish command's flags."""

from __future__ import annotations

import datetime
import hashlib
import json
import lzma
from pathlib import Path
from typing import Any

import pytest
from fake_engine import FakeEngine, FakeRegistry, contents_of, wall_off_the_engine
from http_kit import Answer, Net, json_answer
from render_kit import plan

from builder.cli.main import main
from builder.core.debversion import compare
from builder.core.errors import BuildError, UpstreamError, UsageError
from builder.core.kinds import Flavor
from builder.engine import ImageInfo, RunResult
from builder.pipeline.allowlist import Entry, judge, read_allowlist
from builder.pipeline.gate import SecurityGate
from builder.pipeline.pipeline import BuildSettings, build
from builder.pipeline.security import (
    DebPackage,
    Pending,
    Suite,
    fetch_suite,
    installed_packages,
    os_release,
    pending,
    release_hashes,
    suite_of,
)

TODAY = datetime.date(2026, 12, 1)
BASE = "http://deb.debian.org/debian-security/dists/bookworm-security"
BOOKWORM = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n'
STATUS = """\
Package: libssl3
Status: install ok installed
Architecture: amd64
Source: openssl
Version: 3.0.11-1~deb12u2
Description: Secure Sockets Layer toolkit - shared libraries
 This package is part of the OpenSSL project's implementation.

Package: libc6
Status: install ok installed
Architecture: amd64
Source: glibc
Version: 2.36-9+deb12u14

Package: tzdata
Status: install ok installed
Architecture: all
Version: 2025b-0+deb12u1

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0-1
"""
PACKAGES = """\
Package: libssl3
Source: openssl
Version: 3.0.15-1~deb12u1
Architecture: amd64

Package: libssl3
Source: openssl
Version: 3.0.13-1~deb12u1
Architecture: amd64

Package: libc6
Source: glibc
Version: 2.36-9+deb12u7
Architecture: amd64

Package: removed-one
Version: 1.0-2
Architecture: amd64
"""


def _inrelease(files: dict[str, bytes]) -> str:
    lines = "".join(f" {hashlib.sha256(d).hexdigest()} {len(d)} {p}\n" for p, d in files.items())
    return (
        "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nOrigin: Debian\nSuite: stable-security\n"
        f"Codename: bookworm-security\nMD5Sum:\n 0 0 main/Release\nSHA256:\n{lines}"
        "-----BEGIN PGP SIGNATURE-----\n\niQIzBAEBCAAdFiEE\n-----END PGP SIGNATURE-----\n"
    )


def _archive(net: Net, packages: str = PACKAGES, tamper: bool = False) -> None:
    data = lzma.compress(packages.encode())
    listed = lzma.compress(b"other") if tamper else data
    net.route("GET", f"{BASE}/InRelease", Answer(200, _inrelease({"main/binary-amd64/Packages.xz": listed})))
    net.route("GET", f"{BASE}/main/binary-amd64/Packages.xz", Answer(200, data))


# -- Debian's version order -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "sign"),
    [
        ("1.0~rc1", "1.0", -1),
        ("1.0", "1.0-1", -1),
        ("2:1.0", "1:9.9", 1),
        ("3.0.15-1~deb12u1", "3.0.11-1~deb12u2", 1),
        ("3.0.11-1~deb12u2", "3.0.11-1~deb12u2+b1", -1),
        ("2.36-9+deb12u4", "2.36-9+deb12u10", -1),
        ("1.0a", "1.0+", -1),
        ("0.1", "0.01", 0),
    ],
)
def test_versions_compare_as_dpkg_compares_them(a: str, b: str, sign: int) -> None:
    result = compare(a, b)
    assert (result > 0) - (result < 0) == sign
    assert (compare(b, a) > 0) - (compare(b, a) < 0) == -sign


# -- what the image holds and what the suite offers ---------------------------------------------------------------


def test_only_installed_packages_count_with_their_source() -> None:
    assert installed_packages(STATUS) == (
        DebPackage("libc6", "2.36-9+deb12u14", "glibc"),
        DebPackage("libssl3", "3.0.11-1~deb12u2", "openssl"),
        DebPackage("tzdata", "2025b-0+deb12u1", "tzdata"),
    )


def test_a_newer_security_version_is_pending_an_older_one_is_not() -> None:
    offered = {"libssl3": "3.0.15-1~deb12u1", "libc6": "2.36-9+deb12u7", "removed-one": "1.0-2"}
    assert pending(installed_packages(STATUS), offered, "bookworm-security") == (
        Pending("libssl3", "openssl", "3.0.11-1~deb12u2", "3.0.15-1~deb12u1", "bookworm-security"),
    )


def test_the_suite_follows_the_image_os_and_platform() -> None:
    assert suite_of(os_release(BOOKWORM), "linux/amd64") == Suite(
        "http://deb.debian.org/debian-security", "bookworm-security", ("main",), "amd64"
    )
    jammy = os_release('ID=ubuntu\nVERSION_CODENAME=jammy\nPRETTY_NAME="Ubuntu 22.04.5 LTS"\n')
    ports = suite_of(jammy, "linux/arm64")
    assert isinstance(ports, Suite) and (ports.archive, ports.name) == (
        "http://ports.ubuntu.com/ubuntu-ports",
        "jammy-security",
    )
    assert suite_of(os_release('ID=alpine\nPRETTY_NAME="Alpine Linux v3.20"\n'), "linux/amd64") == (
        "no security suite known for Alpine Linux v3.20 on linux/amd64"
    )


def test_the_index_is_read_when_its_hash_is_the_one_inrelease_lists() -> None:
    net = Net()
    _archive(net)
    suite = Suite("http://deb.debian.org/debian-security", "bookworm-security", ("main",), "amd64")
    assert fetch_suite(net.http(), suite) == {
        "libssl3": "3.0.15-1~deb12u1",
        "libc6": "2.36-9+deb12u7",
        "removed-one": "1.0-2",
    }
    tampered = Net()
    _archive(tampered, tamper=True)
    with pytest.raises(UpstreamError, match=r"Packages\.xz: sha256 differs from the one its InRelease lists"):
        fetch_suite(tampered.http(), suite)


def test_release_hashes_reads_the_sha256_section_of_a_signed_inrelease() -> None:
    assert release_hashes(_inrelease({"main/binary-amd64/Packages.xz": b"x"})) == {
        "main/binary-amd64/Packages.xz": hashlib.sha256(b"x").hexdigest()
    }


# -- the allowlist ---------------------------------------------------------------------------------------------


def _allowlist(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "allowlist.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def _entry(**changes: Any) -> dict[str, Any]:
    entry = {
        "vulnerability_id": "DSA-5800-1",
        "package_name": "libssl3",
        "package_details": {
            "file_path": None,
            "name": "openssl",
            "package_manager": "OS",
            "version": "3.0.15-1~deb12u1",
        },
        "severity": "HIGH",
        "reason_to_ignore": "TLS is not used by the training jobs",
        "expiry": "2027-01-31",
    }
    return entry | changes


def test_an_allowlist_in_dlc_format_is_read_with_its_expiry(tmp_path: Path) -> None:
    path = _allowlist(tmp_path, {"openssl": [_entry()], "glibc": [_entry(package_name=None, package_details=None)]})
    assert read_allowlist(path) == (
        Entry("glibc", "DSA-5800-1", "TLS is not used by the training jobs", datetime.date(2027, 1, 31), None),
        Entry(
            "libssl3",
            "DSA-5800-1",
            "TLS is not used by the training jobs",
            datetime.date(2027, 1, 31),
            "3.0.15-1~deb12u1",
        ),
    )


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{not json", "not JSON"),
        ([_entry()], "expected an object keyed by package name"),
        ({"openssl": _entry()}, "'openssl': expected a list of entries"),
        ({"openssl": [_entry(vulnerability_id="")]}, r"openssl\[0\]: no vulnerability_id"),
        ({"openssl": [_entry(reason_to_ignore="N/A")]}, r"openssl\[0\] \(DSA-5800-1\): no reason_to_ignore"),
        ({"openssl": [_entry(expiry="next year")]}, r"expiry 'next year' is not a date \(YYYY-MM-DD\)"),
        ({"openssl": [_entry(), _entry(expiry=None)]}, r"openssl\[1\] \(DSA-5800-1\): expiry '' is not a date"),
    ],
)
def test_a_malformed_allowlist_is_one_usage_error_naming_the_entry(tmp_path: Path, doc: Any, message: str) -> None:
    path = _allowlist(tmp_path, doc)
    with pytest.raises(UsageError, match=f"allowlist {path}: .*{message}"):
        read_allowlist(path)


FINDING = Pending("libssl3", "openssl", "3.0.11-1~deb12u2", "3.0.15-1~deb12u1", "bookworm-security")


def test_judge_allows_a_current_entry_fails_an_expired_one_and_an_uncovered_update() -> None:
    current = Entry("openssl", "DSA-5800-1", "not reachable", datetime.date(2026, 12, 1), None)
    expired = Entry("libssl3", "DSA-5800-1", "not reachable", datetime.date(2026, 11, 30), None)
    other_version = Entry("libssl3", "DSA-5900-1", "x", datetime.date(2027, 1, 1), "3.0.16-1~deb12u1")
    (allowed,) = judge((FINDING,), (expired, current), TODAY)
    assert allowed.allowed and allowed.why == "allowed until 2026-12-01 (DSA-5800-1: not reachable)"
    (stale,) = judge((FINDING,), (expired,), TODAY)
    assert not stale.allowed and stale.why == "its allowlist entry DSA-5800-1 expired on 2026-11-30"
    (uncovered,) = judge((FINDING,), (other_version,), TODAY)
    assert not uncovered.allowed and uncovered.why == "no allowlist entry covers it"


# -- the gate on an image --------------------------------------------------------------------------------------


def _image_engine(status: str = STATUS, release: str = BOOKWORM) -> FakeEngine:
    report = {
        "schema": 1,
        "python": "3.11.2",
        "machine": "x86_64",
        "prefix": "/opt/venv",
        "dists": [
            {"name": "torch", "version": "2.14.1", "tags": [], "installer": "uv", "direct_url": None},
            {
                "name": "mine",
                "version": "1.0",
                "tags": [],
                "installer": "pip",
                "direct_url": {"url": "file:///w/m.whl"},
            },
        ],
    }
    engine = FakeEngine(contents={}, scripted={"python": RunResult(0, json.dumps(report))})
    engine.images["sha256:abc"] = ImageInfo(id="sha256:abc", labels={}, tags=(), digests=(), size=1)
    files = {"/usr/lib/os-release": release.encode(), "/var/lib/dpkg/status": status.encode()}
    setattr(engine, "read_file", lambda image, path, limit=1 << 20: files.get(path))  # noqa: B010  every image
    return engine


def _pypi(net: Net, vulnerabilities: list[dict[str, Any]] | None = None) -> None:
    net.route("GET", "https://pypi.org/pypi/torch/2.14.1/json", json_answer({"vulnerabilities": vulnerabilities or []}))


def test_a_pending_update_without_an_entry_blocks_the_image_naming_the_package() -> None:
    net = Net()
    _archive(net)
    gate = SecurityGate(net.http(), (), TODAY)
    with pytest.raises(BuildError) as failed:
        gate.check(_image_engine(), "sha256:abc", "linux/amd64")
    assert failed.value.exit_code == 4
    assert "pending bookworm-security update: libssl3 3.0.11-1~deb12u2 -> 3.0.15-1~deb12u1" in str(failed.value)
    assert "(no allowlist entry covers it)" in str(failed.value)


def test_an_allowed_update_passes_and_the_python_part_reports_advisories_and_what_it_could_not_check() -> None:
    net = Net()
    _archive(net)
    _pypi(net, [{"id": "GHSA-1", "fixed_in": ["2.15.0"]}, {"id": "PYSEC-2", "withdrawn": "2026-01-01"}])
    entry = Entry("openssl", "DSA-5800-1", "not reachable", TODAY, None)
    result = SecurityGate(net.http(), (entry,), TODAY).check(_image_engine(), "sha256:abc", "linux/amd64")
    assert result.os == "1 pending bookworm-security update(s), each allowed"
    assert result.advisories == ("torch 2.14.1: GHSA-1 (fixed in: 2.15.0)",)
    assert result.python == "1 advisories known to PyPI (reported, not gating); not checked (not on PyPI): mine"
    assert result.as_json()["os_pending"][0]["why"] == "allowed until 2026-12-01 (DSA-5800-1: not reachable)"


def test_python_advisories_are_not_checked_never_clean_when_pypi_fails() -> None:
    net = Net()
    _archive(net, packages="")
    net.route("GET", "https://pypi.org/pypi/torch/2.14.1/json", Answer(503, b"down"))
    result = SecurityGate(net.http(), (), TODAY).check(_image_engine(), "sha256:abc", "linux/amd64")
    assert result.os == "clean: no pending bookworm-security update"
    assert result.python.startswith("not checked: PyPI's advisories could not be read")


def test_an_unreadable_suite_fails_and_an_unknown_os_is_not_checked() -> None:
    net = Net()  # every request: 404
    with pytest.raises(BuildError, match=r"could not read bookworm-security .*: not checked, so not passed"):
        SecurityGate(net.http(), (), TODAY).check(_image_engine(), "sha256:abc", "linux/amd64")
    _pypi(net)
    alpine = _image_engine(release='ID=alpine\nPRETTY_NAME="Alpine Linux v3.20"\n')
    result = SecurityGate(net.http(), (), TODAY).check(alpine, "sha256:abc", "linux/amd64")
    assert result.os == "not checked: no security suite known for Alpine Linux v3.20 on linux/amd64"


def test_in_the_pipeline_a_blocked_image_is_not_tagged_or_pushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wall_off_the_engine(monkeypatch)
    p = plan("torch2.14.1-cu130-py3.11-debian12")
    engine = FakeEngine(contents_of(p), registry=FakeRegistry())
    files = {"/usr/lib/os-release": BOOKWORM.encode(), "/var/lib/dpkg/status": STATUS.encode()}
    setattr(engine, "read_file", lambda image, path, limit=1 << 20: files.get(path))  # noqa: B010
    net = Net()
    _archive(net)
    settings = BuildSettings(repo="127.0.0.1:5000/t", flavors=(Flavor.RUNTIME,), out_dir=tmp_path / "ctx", push=True,
                             security_gate=SecurityGate(net.http(), (), TODAY))  # fmt: skip
    assert engine.registry is not None
    with pytest.raises(BuildError, match="libssl3"):
        build(engine, p, settings, lambda line: None, engine.registry)
    assert engine.of("tag") == [] and engine.pushed() == []


def test_publish_refuses_an_allowlist_without_the_gate(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["publish", "--allowlist", "a.json", "--dry-run"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "torchyard: error: --allowlist is the security gate's: give --security-gate too\n"


def test_a_dry_run_refuses_a_bad_allowlist_as_a_real_run_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _allowlist(tmp_path, {"openssl": [_entry(reason_to_ignore="")]})
    only = "torch2.14.1-cu130-py3.13-debian13-runtime"  # an item of the real publish set (cuda13-debian)
    with pytest.raises(SystemExit) as exit_:
        main(["publish", "--dry-run", "--security-gate", "--allowlist", str(path), "--only", only])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        f"torchyard: error: allowlist {path}: openssl[0] (DSA-5800-1): no reason_to_ignore: "
        "say why the update may wait\n"
    )
