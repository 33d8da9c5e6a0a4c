"""The publish workflow's trust path in the docker tier (docs/trust.md, "Promoted images"): the e2e runtime image
attested in its repository (as `build --push --attest` does on the build runner, no key), then promoted
registry-side to a public repository with the key, which signs there; verify-image and the standard-tool check
(scripts/verify-signature: skopeo, jq, openssl) accept the public copy. An image without attestations is not
promoted: exit 5, one line, and the public tag is never written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import E2E, RUN_ID
from kit import AUTH_REGISTRY, AUTH_USER, REGISTRY, ROOT, docker, registry_password, torchyard

from builder.oci.client import Distribution
from builder.oci.refs import parse_ref

pytestmark = pytest.mark.docker

PUBLIC = f"{AUTH_REGISTRY}/torchyard-public/{RUN_ID}"


def _env() -> dict[str, str]:
    return {"TORCHYARD_REGISTRY_PASSWORD": registry_password()}


def _key(folder: Path) -> tuple[Path, Path]:
    key, public = folder / "key.pem", folder / "key.pub"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
    key.chmod(0o600)
    subprocess.run(["openssl", "ec", "-in", str(key), "-pubout", "-out", str(public)], check=True, capture_output=True)
    return key, public


def test_a_promoted_image_is_signed_in_the_public_repository(e2e: E2E, tmp_path: Path) -> None:
    args = list(e2e.args)
    args[args.index("--target") + 1] = "runtime"
    args[args.index("-o") + 1] = str(tmp_path / "out")
    attested = torchyard("build", *args, "--attest", env=_env())  # up to date in the registry: attests only
    assert attested.code == 0, attested.text[-3000:]
    key, public = _key(tmp_path)
    source = e2e.ref("runtime")
    target = f"{PUBLIC}:{source.rsplit(':', 1)[1]}"
    run = torchyard("promote", source, target, "--attest", "--sign-key", str(key), "--registry-user", AUTH_USER,
                    env=_env())  # fmt: skip
    assert run.code == 0, run.text
    assert "attestations: 2 copied, 0 already there; 3 signature(s) written" in run.out, run.out
    assert key.read_text().splitlines()[1] not in run.text
    verified = torchyard("verify-image", target, "--key", str(public), "--registry-user", AUTH_USER, env=_env())
    assert verified.code == 0, verified.text
    assert [line.split()[0] for line in verified.out.splitlines()[:-1]] == ["passed"] * 7
    creds = f"{AUTH_USER}:{registry_password()}"
    plain = subprocess.run(
        [str(ROOT / "scripts" / "verify-signature"), target, str(public), "--tls-verify=false", "--creds", creds],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert plain.returncode == 0 and plain.stdout.startswith(f"VERIFIED {target}: sha256:"), plain.stdout
    # the candidate's own copy carries no signature by this key: a signature names its repository
    assert torchyard("verify-image", source, "--key", str(public), "--registry-user", AUTH_USER, env=_env()).code != 0


def test_an_image_without_attestations_is_not_promoted(tmp_path: Path) -> None:
    image, target = f"{REGISTRY}/torchyard-cand/{RUN_ID}:plain", f"{REGISTRY}/torchyard-public/{RUN_ID}:plain"
    assert docker("tag", "debian:bookworm-slim", image).returncode == 0
    pushed = docker("push", image)
    assert pushed.returncode == 0, pushed.stderr
    key, _ = _key(tmp_path)
    run = torchyard("promote", image, target, "--sign-key", str(key))
    assert run.code == 5 and run.err.count("\n") == 1 and "has no SBOM attached" in run.err, run.text
    ref = parse_ref(target)
    assert Distribution(docker_login=False).manifest(ref.repo, "plain") is None
    docker("rmi", image)
