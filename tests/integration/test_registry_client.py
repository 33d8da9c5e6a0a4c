"""The OCI client against real registries: the local one (no auth), the htpasswd one (:5001), and a
bearer-token registry (tests/integration/token_registry.py) in front of the local one. Reading labels,
promoting registry-side (mount, copy across registries, content check), writing a multi-platform index
that the engine then pulls per platform."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit import AUTH_REGISTRY, AUTH_USER, REGISTRY, docker, one_line_error, registry_password, torchyard
from oci_kit import push_image
from token_registry import PASSWORD, USER, TokenRealm, token_registry

from builder.core.errors import PushError, UsageError
from builder.engine import RegistryAuth
from builder.net.http import Http, Policy
from builder.oci.client import Distribution
from builder.oci.index import IndexEntry, write_index
from builder.oci.promote import promote
from builder.oci.refs import parse_ref, parse_repo
from builder.pipeline.registry import Registry

pytestmark = pytest.mark.docker

RUN = uuid.uuid4().hex[:8]
HASH = "ab" * 32
LABELS = {"io.torchyard.content-hash": HASH}


@pytest.fixture(autouse=True)
def no_docker_login(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    return tmp_path / "docker-config"


@pytest.fixture
def realm() -> Iterator[TokenRealm]:
    with token_registry() as found:
        yield found


def client(auth: RegistryAuth | None = None) -> Distribution:
    return Distribution(Http(Policy(timeout=30, retries=1)), auth)


def password_auth() -> RegistryAuth:
    return RegistryAuth(AUTH_USER, registry_password())


def repo(host: str, name: str) -> str:
    return f"{host}/torchyard-test-{RUN}/{name}"


# --- reading -------------------------------------------------------------------------------------------------


def test_labels_and_holds_on_the_open_registry() -> None:
    pushed = push_image(client(), parse_repo(repo(REGISTRY, "read")), "v1", labels=LABELS)
    reader = Registry()
    assert reader.labels(pushed.ref) == {"io.torchyard.content-hash": HASH}
    assert reader.holds(pushed.ref, HASH) and not reader.holds(pushed.ref, "cd" * 32)
    assert reader.labels(f"{pushed.repo}:missing") is None
    assert client().platforms(pushed.repo, "v1") == {"linux/amd64": pushed.digest}


def test_the_htpasswd_registry_with_and_without_credentials(no_docker_login: Path) -> None:
    where = parse_repo(repo(AUTH_REGISTRY, "basic"))
    pushed = push_image(client(password_auth()), where, "v1", labels=LABELS)
    assert Registry(password_auth()).holds(pushed.ref, HASH)
    with pytest.raises(PushError, match=rf"^registry {AUTH_REGISTRY} refused to read .* \(HTTP 401\)"):
        Registry().labels(pushed.ref)
    no_docker_login.mkdir()
    login = f"{AUTH_USER}:{registry_password()}".encode()
    import base64

    config = {"auths": {AUTH_REGISTRY: {"auth": base64.b64encode(login).decode()}}}
    (no_docker_login / "config.json").write_text(json.dumps(config))
    assert Registry().holds(pushed.ref, HASH)  # the user's docker login


def test_the_token_registry_issues_anonymous_pull_tokens_and_push_tokens_for_credentials(realm: TokenRealm) -> None:
    where = parse_repo(repo(realm.host, "token"))
    with pytest.raises(PushError, match=rf"^registry {realm.host} refused to write .* \(HTTP 401\)"):
        push_image(client(), where, "v1")  # anonymous: pull only
    pushed = push_image(client(RegistryAuth(USER, PASSWORD)), where, "v1", labels=LABELS)
    assert Registry().holds(pushed.ref, HASH)  # anonymous pull
    assert [f"repository:{where.name}:pull,push"] in realm.asked
    assert [f"repository:{where.name}:pull"] in realm.asked
    with pytest.raises(PushError, match=r"^token service http://127\.0\.0\.1:\d+/token refused \(HTTP 401\)$"):
        Registry(RegistryAuth(USER, "wrong")).labels(pushed.ref)


# --- promotion -----------------------------------------------------------------------------------------------


def test_promote_mounts_every_blob_and_keeps_the_digest() -> None:
    source = push_image(client(), parse_repo(repo(REGISTRY, "candidates")), "t1", labels=LABELS)
    target = parse_ref(repo(REGISTRY, "public") + ":t1")
    done = promote(client(), parse_ref(source.ref), target, HASH)
    assert (done.digest, done.mounted, done.copied, done.bytes_copied) == (source.digest, 2, 0, 0)
    assert client().manifest(target.repo, "t1").digest == source.digest  # type: ignore[union-attr]
    again = promote(client(), parse_ref(source.ref), target, HASH)
    assert again.unchanged and again.mounted == 0
    pulled = docker("pull", str(target))
    try:
        assert pulled.returncode == 0, pulled.stderr
        labels = docker("image", "inspect", "--format", "{{json .Config.Labels}}", str(target)).stdout
        assert json.loads(labels) == {"io.torchyard.content-hash": HASH}
    finally:
        docker("rmi", str(target))


def test_promote_across_registries_copies_and_a_wrong_content_hash_promotes_nothing() -> None:
    source = push_image(client(), parse_repo(repo(REGISTRY, "cross")), "t1", labels=LABELS)
    target = parse_ref(repo(AUTH_REGISTRY, "cross") + ":t1")
    refused = r"carries content hash (ab){32}, not (cd){32}: it is not the image that was verified; nothing promoted$"
    with pytest.raises(PushError, match=refused):
        promote(client(password_auth()), parse_ref(source.ref), target, "cd" * 32)
    assert client(password_auth()).manifest(target.repo, "t1") is None
    done = promote(client(password_auth()), parse_ref(source.ref), target, HASH)
    assert (done.copied, done.mounted, done.bytes_copied) == (2, 0, source.layer_bytes)
    assert client(password_auth()).manifest(target.repo, "t1").digest == source.digest  # type: ignore[union-attr]


def test_promote_through_the_token_registry_asks_for_the_mount_scopes(realm: TokenRealm) -> None:
    robot = RegistryAuth(USER, PASSWORD)
    source = push_image(client(robot), parse_repo(repo(realm.host, "cand")), "t1")
    target = parse_ref(repo(realm.host, "pub") + ":t1")
    done = promote(client(robot), parse_ref(source.ref), target)
    assert (done.mounted, done.copied) == (2, 0)
    assert [f"repository:{target.repo.name}:pull,push", f"repository:{source.repo.name}:pull"] in realm.asked


def test_the_promote_command_end_to_end() -> None:
    source = push_image(client(), parse_repo(repo(REGISTRY, "cli")), "t1", labels=LABELS)
    target = repo(REGISTRY, "cli-public") + ":t1"
    run = torchyard("promote", source.ref, target, "--content-hash", HASH, "--json")
    assert run.code == 0, run.text
    assert json.loads(run.out)["digest"] == source.digest
    wrong = torchyard("promote", source.ref, target + "x", "--content-hash", "cd" * 32)
    assert wrong.code == 5 and "nothing promoted" in one_line_error(wrong)
    missing = torchyard("promote", source.ref.replace(":t1", ":nope"), target)
    assert missing.code == 5 and one_line_error(missing).endswith("does not exist: nothing to promote")
    bad = torchyard("promote", source.ref, repo(REGISTRY, "x"))
    assert bad.code == 2 and "name a tag" in one_line_error(bad)


# --- multi-platform index ------------------------------------------------------------------------------------


def test_write_index_joins_platform_images_the_engine_pulls_per_platform() -> None:
    where = parse_repo(repo(REGISTRY, "multi"))
    amd = push_image(client(), where, "amd64", arch="amd64", labels=LABELS)
    arm = push_image(client(), where, "arm64", arch="arm64", labels={"io.torchyard.content-hash": "cd" * 32})
    entries = [IndexEntry(arm.digest, "linux/arm64"), IndexEntry(amd.digest, "linux/amd64")]
    written = write_index(client(), where, "2.14.1", entries)
    assert written.changed
    assert client().platforms(where, "2.14.1") == {"linux/amd64": amd.digest, "linux/arm64": arm.digest}
    assert client().manifest(where, "2.14.1").media_type == "application/vnd.oci.image.index.v1+json"  # type: ignore[union-attr]
    assert write_index(client(), where, "2.14.1", list(reversed(entries))) == type(written)(written.digest, False)
    assert Registry().holds(f"{where}:2.14.1", "cd" * 32, "linux/arm64")
    ref = f"{where}:2.14.1"
    pulled = docker("pull", "--platform", "linux/amd64", ref)
    try:
        assert pulled.returncode == 0, pulled.stderr
        inspected = docker("image", "inspect", "--format", "{{.Architecture}} {{index .RepoDigests 0}}", ref).stdout
        assert inspected.split()[0] == "amd64"
    finally:
        docker("rmi", ref)


def test_write_index_refuses_a_wrong_platform_a_missing_digest_and_duplicates() -> None:
    where = parse_repo(repo(REGISTRY, "multi-bad"))
    amd = push_image(client(), where, "amd64", arch="amd64")
    with pytest.raises(UsageError, match=r"is a linux/amd64 image, not linux/arm64$"):
        write_index(client(), where, "t", [IndexEntry(amd.digest, "linux/arm64")])
    with pytest.raises(PushError, match=r"does not exist: push the linux/arm64 image first$"):
        write_index(client(), where, "t", [IndexEntry("sha256:" + "0" * 64, "linux/arm64")])
    with pytest.raises(UsageError, match=r"lists each platform once"):
        write_index(client(), where, "t", [IndexEntry(amd.digest, "linux/amd64")] * 2)
    assert client().manifest(where, "t") is None


def test_write_index_through_the_token_registry(realm: TokenRealm) -> None:
    robot = RegistryAuth(USER, PASSWORD)
    where = parse_repo(repo(realm.host, "multi"))
    amd = push_image(client(robot), where, "amd64", arch="amd64")
    written = write_index(client(robot), where, "v1", [IndexEntry(amd.digest, "linux/amd64")])
    assert client().platforms(where, "v1") == {"linux/amd64": amd.digest}
    assert written.changed
