"""`torchyard promote --keep-unchanged` (issue 44 item 3 in the exported workflow, builder/publish/promote_refresh.py):
a refreshed candidate whose SBOM lists the packages of DST's signed SBOM leaves DST as it is (no copy, signature or
build tag: DST's digest unchanged); one with another package set is promoted with the changes listed; what cannot
be compared is promoted as before, with why. In-memory registry, driven through the command as the workflow runs
it (`promote CANDIDATE PUBLIC --content-hash H --keep-unchanged --attest` with $TORCHYARD_SIGN_KEY's key).

A "package change" here is a candidate whose SBOM was made from an inventory with another pip version: what a
refresh's apt-get upgrade or pip would make, said so in each test."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from http_kit import Net
from registry_kit import MemoryRegistry
from test_trust_registry import FACTS
from test_trust_sbom import INVENTORY
from trust_kit import HOST, write_key

from builder.cli.main import main
from builder.core.errors import PushError
from builder.oci.client import Distribution
from builder.oci.promote import CONTENT_LABEL
from builder.oci.referrers import attach
from builder.oci.refs import parse_ref, parse_repo
from builder.pipeline.plan import REFRESH_LABEL, UNREFRESHED_LABEL
from builder.publish.promote_refresh import check_packages
from builder.trust import sbom
from builder.trust.attest import Target, TrustSettings, attest
from builder.trust.inventory import parse_inventory
from builder.trust.sbom import Subject

CAND, PUB = parse_repo(f"{HOST}/team/cand"), parse_repo(f"{HOST}/team/pub")
DST = f"{HOST}/team/pub:t1"
W49, W50 = "2026-W49", "2026-W50"


class World:
    """The registry, a client of it, and the command run against it (requests go to the in-memory registry)."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        self.net = Net()
        self.memory = MemoryRegistry(HOST).attach(self.net)
        self.client = Distribution(self.net.http(), docker_login=False)
        self.key = write_key(tmp_path)
        self.capsys = capsys
        import docker  # the SDK's APIClient subclasses requests.Session: imported before the fake replaces it

        assert docker
        monkeypatch.setattr("requests.Session", self.net.session)
        monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))

    def candidate(
        self, token: str | None, *, pip: str = "25.0", sbom_attached: bool = True, content: str = "same"
    ) -> str:
        """The candidate `build --push --attest [--refresh token]` pushes: its labels name the token, a content
        hash of its own and, for a refresh, the hash of its content without the token (`content`: the Dockerfile
        and files it was built from); its SBOM (unsigned: the build job holds no key) lists this pip version."""
        refresh = {REFRESH_LABEL: token, UNREFRESHED_LABEL: _hash(None, content)} if token else {}
        labels = {CONTENT_LABEL: _hash(token, pip)} | refresh
        tag = token or "plain"
        digest = self.memory.add_image("team/cand", tag, labels=labels)
        if sbom_attached:
            manifest = self.client.manifest(CAND, digest)
            assert manifest is not None
            subject = Subject(repo=str(CAND), digest=digest, platform="linux/amd64", os_id="debian-12")
            contents = parse_inventory(_inventory(pip))
            target = Target(client=self.client, repo=CAND, manifest=manifest, subject=subject,
                            contents=lambda: contents)  # fmt: skip
            attest(target, TrustSettings(key=None), FACTS)
        return digest

    def promote(
        self, source_tag: str, *flags: str, content_hash: str | None = None, key: bool = True, carry: bool = True
    ) -> str:
        """The workflow's promote command (`carry`: with --attest); its output (exit 0 asserted)."""
        argv = ["promote", f"{HOST}/team/cand:{source_tag}", DST, *(["--attest"] if carry else []), "--keep-unchanged"]
        argv += flags
        argv += ["--content-hash", content_hash] if content_hash else []
        argv += ["--sign-key", str(self.key)] if key else []
        with pytest.raises(SystemExit) as exited:
            main(argv)
        out, err = self.capsys.readouterr()
        assert exited.value.code in (0, None), err
        return out

    def dst(self) -> str:
        found = self.client.manifest(PUB, "t1")
        assert found is not None
        return found.digest

    def public(self) -> set[tuple[str, str]]:
        """Every (repository, tag or digest) the public repository holds: what a kept DST must leave as it was."""
        return {k for k in self.memory.manifests if k[0] == "team/pub"}


def _hash(token: str | None, pip: str) -> str:
    return hashlib.sha256(f"{token} {pip}".encode()).hexdigest()


def _inventory(pip: str) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(INVENTORY)
    for dist in data["distributions"]:
        if dist["name"] == "pip":
            dist["version"] = pip
    return data


@pytest.fixture
def world(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> World:
    return World(tmp_path, capsys, monkeypatch)


def _published(world: World) -> str:
    """Last week's image, promoted (signed) by the workflow: DST's digest."""
    world.candidate(W49)
    out = world.promote(W49)
    assert f"packages not compared: {DST} is not in the registry (a first promotion)" in out
    return world.dst()


def test_a_refresh_that_changed_no_package_keeps_dst_its_digest_and_writes_nothing(world: World) -> None:
    before = _published(world)
    held = world.public()
    new = world.candidate(W50)  # a new digest (the token is in its labels), the same packages
    out = world.promote(W50, content_hash=_hash(W50, "25.0"))
    assert out == f"kept: refresh {W50} changed no package; {DST} stays {before}\n"
    assert world.dst() == before and new != before
    assert world.public() == held  # no blob manifest, signature, attestation or build tag written


def test_a_candidate_of_other_content_is_promoted_whatever_its_packages(world: World) -> None:
    """A refresh replaces only packages: a candidate whose Dockerfile or files changed too is never kept."""
    before = _published(world)
    new = world.candidate(W50, content="a new smoke suite")  # the same packages
    out = world.promote(W50)
    assert "differs in more than its refresh token (Dockerfile, build arguments or context files)" in out
    assert world.dst() == new != before


def test_the_kept_json_says_kept_with_dsts_digest(world: World) -> None:
    before = _published(world)
    world.candidate(W50)
    found = json.loads(world.promote(W50, "--json"))
    assert found["kept"] is True and found["digest"] == before and found["build_tag"] is None
    assert found["refresh"] == {"token": W50, "packages": "unchanged", "compared_with": before, "changes": []}


def test_a_package_change_is_promoted_and_listed(world: World) -> None:
    before = _published(world)
    new = world.candidate(W50, pip="25.1")  # planted: another pip version than last week's SBOM lists
    out = world.promote(W50)
    assert f"promoted {HOST}/team/cand:{W50} -> {DST} ({new})" in out
    assert f"refresh {W50}: 1 change(s) against {DST} ({before})\n  pypi pip 25.0 -> 25.1\n" in out
    assert f"build tag {DST}-" in out and world.dst() == new


def test_a_package_change_in_json(world: World) -> None:
    _published(world)
    world.candidate(W50, pip="25.1")
    found = json.loads(world.promote(W50, "--json"))
    assert found["kept"] is False and found["refresh"]["packages"] == "1 change(s)"
    change = {"kind": "pypi", "name": "pip", "arch": "", "change": "changed", "old": "25.0", "new": "25.1"}
    assert found["refresh"]["changes"] == [change] and found["build_tag"]


def test_a_dst_sbom_not_signed_with_the_runs_key_is_not_compared(world: World) -> None:
    world.candidate(W49)
    world.promote(W49, key=False)  # published unsigned: its SBOM is anyone's claim
    before = world.dst()
    new = world.candidate(W50)
    out = world.promote(W50)
    assert f"packages not compared: the SBOM of {DST} ({before}) is not signed with this run's key" in out
    assert world.dst() == new


def test_without_a_key_unsigned_sboms_are_compared(world: World) -> None:
    world.candidate(W49)
    world.promote(W49, key=False)
    before = world.dst()
    world.candidate(W50)
    assert world.promote(W50, key=False) == f"kept: refresh {W50} changed no package; {DST} stays {before}\n"


def test_a_candidate_that_is_not_a_refresh_is_promoted_and_says_why_not_compared(world: World) -> None:
    _published(world)
    new = world.candidate(None)
    out = world.promote("plain")
    assert f"packages not compared: {HOST}/team/cand:plain is not a refresh build (no {REFRESH_LABEL} label)" in out
    assert world.dst() == new


def test_a_candidate_without_the_planned_content_hash_is_refused_not_kept(world: World) -> None:
    """--content-hash checks SRC before anything: a stale candidate neither keeps DST nor is promoted (exit 5)."""
    before = _published(world)
    world.candidate(W50)
    with pytest.raises(SystemExit) as exited:
        main(["promote", f"{HOST}/team/cand:{W50}", DST, "--keep-unchanged", "--content-hash", "f" * 64])
    assert exited.value.code == 5
    err = world.capsys.readouterr().err
    assert err.count("\n") == 1 and "it is not the image that was verified; nothing promoted" in err
    assert world.dst() == before


def test_the_same_digest_again_is_not_compared_and_nothing_is_done(world: World) -> None:
    before = _published(world)
    out = world.promote(W49)
    assert f"{DST} already is {before}: nothing to do" in out
    assert f"packages not compared: {DST} already is {before}" in out


def test_without_the_flag_a_refresh_is_promoted_as_before(world: World) -> None:
    _published(world)
    new = world.candidate(W50)
    with pytest.raises(SystemExit) as exited:
        main(["promote", f"{HOST}/team/cand:{W50}", DST, "--json"])
    assert exited.value.code in (0, None)
    found = json.loads(world.capsys.readouterr().out)
    assert found["digest"] == new and "kept" not in found and "refresh" not in found


def test_a_candidate_without_an_sbom_is_not_compared(world: World) -> None:
    _published(world)
    new = world.candidate(W50, sbom_attached=False)
    found = check_packages(world.client, parse_ref(f"{HOST}/team/cand:{W50}"), parse_ref(DST), None, None)
    assert found.packages == f"not compared: {HOST}/team/cand:{W50} ({new}) has no SBOM" and not found.unchanged
    assert found.lines(DST) == [f"packages {found.packages}"]


def test_an_unreadable_sbom_is_not_compared(world: World) -> None:
    world.candidate(W49, sbom_attached=False)
    world.promote(W49, key=False, carry=False)
    before = world.dst()
    attach(world.client, PUB, _manifest(world, before), sbom.MEDIA_TYPE, b"not json", {})
    world.candidate(W50)
    found = check_packages(world.client, parse_ref(f"{HOST}/team/cand:{W50}"), parse_ref(DST), None, None)
    assert found.packages.startswith(f"not compared: the SBOM of {DST} ({before}) could not be read (")
    assert found.compared_with == before


def test_an_index_is_not_compared(world: World) -> None:
    child = world.candidate(W50)
    world.memory.add_index("team/cand", "multi", {"linux/amd64": child})
    found = check_packages(world.client, parse_ref(f"{HOST}/team/cand:multi"), parse_ref(DST), None, None)
    why = f"{HOST}/team/cand:multi is an image index (an SBOM is attached to each image)"
    assert found.packages == f"not compared: {why}"


def _manifest(world: World, digest: str) -> Any:
    found = world.client.manifest(PUB, digest)
    assert found is not None
    return found


def test_a_registry_that_cannot_be_read_is_not_compared(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise PushError("registry 127.0.0.1:5000 answered 500")

    monkeypatch.setattr(world.client, "manifest", refuse)
    found = check_packages(world.client, parse_ref(f"{HOST}/team/cand:{W50}"), parse_ref(DST), None, None)
    assert found.packages == "not compared: reading the registry failed (registry 127.0.0.1:5000 answered 500)"
