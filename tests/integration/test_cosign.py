"""Issue 43 item 3 in the docker tier: the real cosign (2.5: scripts/services installs Debian 13's) accepts the e2e
runtime image as `torchyard build --sign-key` signed and attested it (conftest's `signed`): `cosign verify` its
signature, `cosign verify-attestation --type slsaprovenance1` and `--type cyclonedx` its provenance and SBOM
(DSSE envelopes under `sha256-<hex>.att`). It refuses a tampered copy pushed under the same tag (one label changed,
the original's .sig and .att copied next to it) and a key other than the one that signed.

The signatures carry no transparency-log entry: `--insecure-ignore-tlog=true`, as docs/trust.md says. The registry
(127.0.0.1:5001, plain HTTP) needs no cosign flag: go-containerregistry speaks HTTP to 127.0.0.1 by itself
(pkg/name/registry.go, Scheme). cosign reads the registry's credentials from $DOCKER_CONFIG: a folder of the
test's own, never the user's docker config.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import RUN_ID, Signed
from kit import AUTH_REGISTRY, AUTH_USER, registry_password, torchyard

from builder.engine import RegistryAuth
from builder.oci.client import Distribution, Manifest, digest_of
from builder.oci.referrers import att_tag, sig_tag
from builder.oci.refs import RepoRef, parse_ref
from builder.trust.intoto import CYCLONEDX
from builder.trust.slsa import PREDICATE_TYPE as SLSA

pytestmark = pytest.mark.docker

IGNORE_TLOG = "--insecure-ignore-tlog=true"  # no Rekor entry: torchyard signs offline with the team's key
KINDS = {"slsaprovenance1": SLSA, "cyclonedx": CYCLONEDX}  # cosign's --type -> the statement's predicateType


@pytest.fixture(scope="module")
def cosign_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment cosign runs in: its registry credentials in a docker config folder of this test's own."""
    if shutil.which("cosign") is None:
        pytest.fail(
            "cosign is not installed: `sudo scripts/services start` installs it (Debian 13's cosign 2.5); the "
            "cosign checks of docs/trust.md cannot run without it",
            pytrace=False,
        )
    folder = tmp_path_factory.mktemp("cosign-docker-config")
    login = base64.b64encode(f"{AUTH_USER}:{registry_password()}".encode()).decode()
    config = folder / "config.json"
    config.touch(mode=0o600)
    config.write_text(json.dumps({"auths": {AUTH_REGISTRY: {"auth": login}}}))
    return {**os.environ, "DOCKER_CONFIG": str(folder)}


def _cosign(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["cosign", *args], env=env, capture_output=True, text=True, timeout=300, check=False)


def _verify(env: dict[str, str], ref: str, public: Path) -> subprocess.CompletedProcess[str]:
    return _cosign(env, "verify", "--key", str(public), IGNORE_TLOG, ref)


def _verify_attestation(env: dict[str, str], ref: str, public: Path, kind: str) -> subprocess.CompletedProcess[str]:
    return _cosign(env, "verify-attestation", "--key", str(public), IGNORE_TLOG, "--type", kind, ref)


def _statements(stdout: str) -> list[dict[str, Any]]:
    """The in-toto statements of the envelopes verify-attestation printed (one JSON envelope a line)."""
    return [json.loads(base64.b64decode(json.loads(line)["payload"])) for line in stdout.splitlines() if line]


def _client() -> Distribution:
    return Distribution(auth=RegistryAuth(AUTH_USER, registry_password()), docker_login=False)


def _manifest(ref: str) -> Manifest:
    image = parse_ref(ref)
    found = _client().manifest(image.repo, image.reference)
    assert found is not None
    return found


def test_cosign_accepts_the_signature_and_both_attestations(signed: Signed, cosign_env: dict[str, str]) -> None:
    digest = _manifest(signed.ref).digest
    run = _verify(cosign_env, signed.ref, signed.public)
    assert run.returncode == 0, run.stderr
    assert "The signatures were verified against the specified public key" in run.stderr
    payloads = json.loads(run.stdout)
    assert [p["critical"]["image"]["docker-manifest-digest"] for p in payloads] == [digest]
    for kind, predicate_type in KINDS.items():
        run = _verify_attestation(cosign_env, signed.ref, signed.public, kind)
        assert run.returncode == 0, run.stderr
        (statement,) = _statements(run.stdout)  # --type keeps the one of its predicate type
        assert statement["predicateType"] == predicate_type
        assert statement["subject"][0]["digest"] == {"sha256": digest.removeprefix("sha256:")}


def test_cosign_refuses_a_tampered_copy_under_the_same_tag(signed: Signed, cosign_env: dict[str, str]) -> None:
    image = parse_ref(signed.ref)
    client, original = _client(), _manifest(signed.ref)
    tag = f"{image.repo}:cosign-{RUN_ID}"
    client.put_manifest(image.repo, f"cosign-{RUN_ID}", original.raw, original.media_type)  # the signed image
    assert _verify(cosign_env, tag, signed.public).returncode == 0
    tampered = _relabelled(client, image.repo, original, f"cosign-{RUN_ID}")
    for name in (sig_tag, att_tag):  # what anyone can copy without the key
        copied = client.manifest(image.repo, name(original.digest))
        assert copied is not None
        client.put_manifest(image.repo, name(tampered), copied.raw, copied.media_type)
    run = _verify(cosign_env, tag, signed.public)
    assert run.returncode != 0 and f"invalid or missing digest in claim: {original.digest}" in run.stderr, run.stderr
    for kind in KINDS:
        run = _verify_attestation(cosign_env, tag, signed.public, kind)
        assert run.returncode != 0 and "no matching subject digest found" in run.stderr, run.stderr
    env = {"TORCHYARD_REGISTRY_PASSWORD": registry_password()}
    ours = torchyard("verify-image", tag, "--key", str(signed.public), "--registry-user", AUTH_USER, env=env)
    assert ours.code == 4 and ours.out.count("(a copy under another digest)") == 3, ours.text  # .sig and both .att


def _relabelled(client: Distribution, repo: RepoRef, original: Manifest, tag: str) -> str:
    """The image with one label changed (a new config, so another digest), pushed under `tag`: its digest. Only
    the config blob is new: the layers are the original's, already in the repository."""
    config = client.blob_json(repo, str(original.data["config"]["digest"]))
    settings = config.setdefault("config", {})
    settings["Labels"] = {**(settings.get("Labels") or {}), "org.opencontainers.image.title": "tampered"}
    raw = json.dumps(config).encode()
    client.upload(repo, raw)
    manifest = {**original.data, "config": {**original.data["config"], "digest": digest_of(raw), "size": len(raw)}}
    return client.put_manifest(repo, tag, json.dumps(manifest).encode(), original.media_type)


def test_cosign_refuses_another_key(signed: Signed, cosign_env: dict[str, str], tmp_path: Path) -> None:
    other = tmp_path / "other.pub"
    made = subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout"], capture_output=True,
                          check=True)  # fmt: skip
    subprocess.run(["openssl", "ec", "-pubout", "-out", str(other)], input=made.stdout, capture_output=True, check=True)
    run = _verify(cosign_env, signed.ref, other)
    assert run.returncode != 0 and "no matching signatures" in run.stderr, run.stderr
    for kind in KINDS:
        run = _verify_attestation(cosign_env, signed.ref, other, kind)
        assert run.returncode != 0 and "no matching attestations" in run.stderr, run.stderr
