"""Issue 19 in the docker tier: the e2e runtime image signed with a test key, its SBOM and provenance attached
in the real registry (docker-registry 2.8: no referrers API, so the sha256-<hex> tag fallback), read back by
digest and compared with what is in the image; verify-image, the standard-tool check (skopeo, jq, openssl:
scripts/verify-signature) and skopeo under a sigstoreSigned policy (Debian 13's skopeo: sigstore_policy.py)
accept it and refuse a tampered copy pushed under the same tag and an unsigned image.

The images are the e2e fixture's: the build here finds the runtime up to date in the registry (no build, no
push) and only attests it, which is also what a rerun after a refused upload does.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import E2E, RUN_ID, Signed
from kit import AUTH_USER, ROOT, Run, docker, registry_password, torchyard
from sigstore_policy import policy_copy

from builder.engine import DockerEngine, RegistryAuth
from builder.oci.client import Distribution, Manifest
from builder.oci.referrers import sig_tag
from builder.oci.refs import parse_ref
from builder.trust.attest import read_attached
from builder.trust.sbom import MEDIA_TYPE as SBOM_TYPE
from builder.trust.sbom import validate
from builder.trust.slsa import MEDIA_TYPE as PROVENANCE_TYPE

pytestmark = pytest.mark.docker


def _client() -> Distribution:
    return Distribution(auth=RegistryAuth(AUTH_USER, registry_password()), docker_login=False)


def _env() -> dict[str, str]:
    return {"TORCHYARD_REGISTRY_PASSWORD": registry_password()}


def test_the_rerun_attests_without_building_and_the_key_is_nowhere(signed: Signed) -> None:
    assert "is up to date in the registry: no build, no push" in signed.run.out
    # test_promote_trust (earlier in the session) may have attached the SBOM and provenance unsigned already:
    # then this run signs them, writes them as cosign attestations, and writes nothing else
    attested = (
        r"\[runtime\] attested sha256:\w+: sbom sha256:\w+, provenance sha256:\w+ (under the sha256-<hex> "
        r"tag \(no referrers API\); wrote sbom, provenance, signature, attestation|\(attached before\); wrote "
        r"signature, attestation) \("
    )
    assert re.search(attested, signed.run.out), signed.run.out
    secret = signed.key.read_text().splitlines()[1]
    files = [p.read_text(errors="replace") for p in signed.out_dir.rglob("*") if p.is_file()]
    assert not [text for text in (signed.run.text, *files) if secret in text]
    history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", signed.ref).stdout
    assert secret not in history and "sign" not in history


def test_verify_image_and_the_standard_tools_accept_the_signed_image(signed: Signed) -> None:
    run = torchyard("verify-image", signed.ref, "--key", str(signed.public), "--registry-user", AUTH_USER, env=_env())
    assert run.code == 0, run.text
    assert [line.split()[0] for line in run.out.splitlines()[:-1]] == ["passed"] * 7  # referrers and .att
    plain = _standard(signed.ref, signed.public)
    assert plain.returncode == 0 and plain.stdout.startswith(f"VERIFIED {signed.ref}: sha256:"), plain.stdout
    policy = _policy(signed.ref, signed.public)
    assert policy.returncode == 0 and "Writing manifest to image destination" in policy.stdout, policy.stderr


def _standard(ref: str, public: Path) -> subprocess.CompletedProcess[str]:
    creds = f"{AUTH_USER}:{registry_password()}"
    command = [str(ROOT / "scripts" / "verify-signature"), ref, str(public), "--tls-verify=false", "--creds", creds]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def _policy(ref: str, public: Path) -> subprocess.CompletedProcess[str]:
    """skopeo under a sigstoreSigned policy (Debian 13's skopeo where the host's is Debian 12's: sigstore_policy)."""
    return policy_copy(ref, public, f"{AUTH_USER}:{registry_password()}")


def _manifest(ref: str) -> Manifest:
    image = parse_ref(ref)
    found = _client().manifest(image.repo, image.reference)
    assert found is not None
    return found


def test_the_sbom_read_back_by_digest_lists_all_of_dpkg_and_pip_freeze(signed: Signed) -> None:
    image = parse_ref(signed.ref)
    digest = _manifest(signed.ref).digest
    attached = read_attached(_client(), image.repo, digest, SBOM_TYPE)
    assert attached is not None
    validate(attached[1].decode())
    components = json.loads(attached[1])["components"]
    debs = {(c["name"], c["version"]) for c in components if c["purl"].startswith("pkg:deb/")}
    listed = docker("run", "--rm", "--entrypoint", "dpkg-query", signed.ref, "-W", "-f", "${Package}\t${Version}\n")
    assert listed.returncode == 0, listed.stderr
    assert debs == {tuple(line.split("\t")) for line in listed.stdout.splitlines()}
    frozen = docker("run", "--rm", "--entrypoint", "python", signed.ref, "-m", "pip", "freeze", "--all")
    assert frozen.returncode == 0, frozen.stderr
    dists = {(_canonical(c["name"]), c["version"]) for c in components if c["purl"].startswith("pkg:pypi/")}
    assert dists == {_pair(line, dists) for line in frozen.stdout.splitlines() if line.strip()}
    assert len(debs) > 50 and len(dists) > 20
    statement = json.loads(read_attached(_client(), image.repo, digest, PROVENANCE_TYPE)[1])  # type: ignore[index]
    assert statement["subject"][0]["digest"]["sha256"] == digest.removeprefix("sha256:")
    names = [d.get("name") for d in statement["predicate"]["buildDefinition"]["resolvedDependencies"]]
    assert names[0] == "matrix.toml" and "Dockerfile" in names


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pair(line: str, known: set[tuple[str, str]]) -> tuple[str, str]:
    """A freeze line as (name, version); `name @ url` (a direct install) has no version there: the SBOM's."""
    if " @ " in line:
        name = _canonical(line.split(" @ ", maxsplit=1)[0])
        return next((n, v) for n, v in known if n == name)
    name, _, version = line.partition("==")
    return _canonical(name), version


def test_a_tampered_copy_under_the_same_tag_and_an_unsigned_image_are_refused(
    signed: Signed, e2e: E2E, tmp_path: Path
) -> None:
    image = parse_ref(signed.ref)
    client = _client()
    original = _manifest(signed.ref)
    tag = f"{image.repo}:trust-{RUN_ID}"
    client.put_manifest(image.repo, f"trust-{RUN_ID}", original.raw, original.media_type)  # the signed image
    assert _verify(tag, signed).code == 0
    (tmp_path / "Dockerfile").write_text(f"FROM {signed.ref}\nLABEL org.opencontainers.image.title=tampered\n")
    assert docker("build", "-t", tag, str(tmp_path)).returncode == 0
    try:
        DockerEngine().push(tag, RegistryAuth(AUTH_USER, registry_password()), lambda line: None)
        tampered = _manifest(tag)
        signature = client.manifest(image.repo, sig_tag(original.digest))
        assert signature is not None and tampered.digest != original.digest
        client.put_manifest(image.repo, sig_tag(tampered.digest), signature.raw, signature.media_type)  # copied
        refused = _verify(tag, signed)
        assert refused.code == 4 and "a copy under another digest" in refused.err, refused.text
        plain = _standard(tag, signed.public)
        assert plain.returncode == 1 and plain.stdout.startswith(f"REFUSED {tag}: no signature by"), plain.stdout
        policy = _policy(tag, signed.public)
        refused_copy = f"Source image rejected: Signature for digest {original.digest} does not match"
        assert policy.returncode == 1 and refused_copy in policy.stderr, policy.stderr
    finally:
        docker("rmi", tag)
    unsigned = _verify(e2e.ref("devel"), signed)
    assert unsigned.code == 4 and ": refused: signature of sha256:" in unsigned.err and "no signature" in unsigned.err
    plain = _standard(e2e.ref("devel"), signed.public)
    assert plain.returncode == 1 and plain.stdout.startswith(f"REFUSED {e2e.ref('devel')}: no signature for sha256:")
    policy = _policy(e2e.ref("devel"), signed.public)
    unsigned_refused = "Source image rejected: A signature was required, but no signature exists"
    assert policy.returncode == 1 and unsigned_refused in policy.stderr, policy.stderr


def _verify(ref: str, signed: Signed) -> Run:
    return torchyard("verify-image", ref, "--key", str(signed.public), "--registry-user", AUTH_USER, env=_env())


def test_the_standard_tool_check_tells_an_unreadable_image_from_a_refusal(signed: Signed) -> None:
    """Issue 42: HTTPS asked of the HTTP test registry is UNREADABLE, exit 5 with the fix, never REFUSED (exit 1)."""
    creds = f"{AUTH_USER}:{registry_password()}"
    command = [str(ROOT / "scripts" / "verify-signature"), signed.ref, str(signed.public), "--creds", creds]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 5, done.stdout + done.stderr
    assert done.stdout.startswith(f"UNREADABLE {signed.ref}: ") and "add --tls-verify=false" in done.stdout
