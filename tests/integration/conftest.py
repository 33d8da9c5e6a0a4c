"""The docker tier: real engine, real registries, real torch wheels. .ci/run (scripts/services) starts
them; without them these tests fail with instructions instead of being skipped."""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from kit import (
    AUTH_REGISTRY,
    AUTH_USER,
    E2E_FLAGS,
    E2E_ID,
    REGISTRY,
    Run,
    docker,
    registry_password,
    remove_images_of_run,
    torchyard,
    untag_repo,
)

RUN_ID = uuid.uuid4().hex[:8]
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


@pytest.fixture(scope="session", autouse=True)
def services() -> Iterator[None]:
    if HOST_CA.exists():  # builds reach PyPI through this network's proxy: as a user here would, trust it
        os.environ.setdefault("PIP_CERT", str(HOST_CA))
    # The tests' own `docker build`s (fixtures, planted images): buildx with the containerd store would wrap each in an
    # index with a provenance attestation; torchyard's builds pass --provenance=false themselves.
    os.environ.setdefault("BUILDX_NO_DEFAULT_ATTESTATIONS", "1")
    problems = []
    engine = subprocess.run(["/usr/bin/docker", "info"], capture_output=True, check=False)
    if engine.returncode != 0:
        problems.append("no Docker engine")
    for host in (REGISTRY, AUTH_REGISTRY):
        try:
            requests.get(f"http://{host}/v2/", timeout=5)
        except requests.RequestException:
            problems.append(f"no registry on {host}")
    if problems:
        pytest.fail(
            f"docker tests need their services ({', '.join(problems)}): run `sudo scripts/services start` "
            "(scripts/test does), or deselect them with -m 'not docker'",
            pytrace=False,
        )
    yield
    remove_images_of_run(RUN_ID)


@dataclass(frozen=True)
class Canary:
    """A CA bundle: the host's (PyPI is intercepted here) plus a self-signed certificate no image may hold."""

    bundle: Path
    marker: str  # a base64 line of the canary certificate


@pytest.fixture(scope="session")
def canary(tmp_path_factory: pytest.TempPathFactory) -> Canary:
    folder = tmp_path_factory.mktemp("canary")
    cert = folder / "canary.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(folder / "key.pem"),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            f"/CN=torchyard-canary-{RUN_ID}",
        ],
        check=True,
        capture_output=True,
    )
    body = "".join(line for line in cert.read_text().splitlines() if not line.startswith("-----"))
    base64.b64decode(body)
    bundle = folder / "bundle.pem"
    bundle.write_text((HOST_CA.read_text() if HOST_CA.exists() else "") + cert.read_text())
    return Canary(bundle, cert.read_text().splitlines()[5])


@dataclass(frozen=True)
class E2E:
    repo: str
    out_dir: Path
    first: Run
    args: tuple[str, ...]

    def ref(self, flavor: str) -> str:
        for line in self.first.out.splitlines():
            if line.startswith(f"{flavor} ") and " built " in line:
                return line.split()[2]
        raise AssertionError(f"no built {flavor} image in:\n{self.first.out}")

    def digest(self, ref: str) -> str:
        for line in self.first.out.splitlines():
            if f"pushed {ref} (" in line:
                return line.rsplit("(", 1)[1].rstrip(")")
        raise AssertionError(f"{ref} was not pushed:\n{self.first.out}")


@pytest.fixture(scope="session")
def e2e(tmp_path_factory: pytest.TempPathFactory, canary: Canary) -> Iterator[E2E]:
    """The issue-4 end-to-end build: runtime and devel of a CUDA 13 torch from PyPI on Debian 12, for sm_89
    with the example extension, through the corporate CA bundle, pushed with credentials."""
    repo = f"{AUTH_REGISTRY}/torchyard-e2e/{RUN_ID}"
    out_dir = tmp_path_factory.mktemp("e2e") / E2E_ID
    args = (
        *E2E_FLAGS,
        "--arch",
        "sm_89",
        "--extension",
        "examples/addone",
        "--target",
        "all",
        "--repo",
        repo,
        "--push",
        "--registry-user",
        AUTH_USER,
        "--ca-bundle",
        str(canary.bundle),
        "--no-host-settings",
        "-o",
        str(out_dir),
    )
    first = torchyard("build", *args, env={"TORCHYARD_REGISTRY_PASSWORD": registry_password()})
    assert first.code == 0, first.text[-4000:]
    yield E2E(repo, out_dir, first, args)
    untag_repo(repo)


@pytest.fixture(scope="session")
def foreign(e2e: E2E, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An image torchyard did not build: the runtime without manifest, in-image suite or torchyard label, and
    with the requirement an nvidia/cuda 13.0 image would set."""
    name = f"torchyard-foreign:{RUN_ID}"
    context = tmp_path_factory.mktemp("foreign")
    (context / "Dockerfile").write_text(
        f"FROM {e2e.ref('runtime')}\nRUN rm -rf /etc/torchyard /opt/torchyard/smoke\n"
        'LABEL io.torchyard.version=""\nENV NVIDIA_REQUIRE_CUDA="cuda>=13.0"\n'
    )
    built = docker("build", "-t", name, str(context))
    assert built.returncode == 0, built.stderr[-2000:]
    yield name
    docker("rmi", name)


@dataclass(frozen=True)
class Signed:
    ref: str  # the runtime image, attested and signed
    key: Path
    public: Path
    run: Run
    out_dir: Path


@pytest.fixture(scope="session")
def signed(e2e: E2E, tmp_path_factory: pytest.TempPathFactory) -> Signed:
    """The e2e runtime image signed with a fresh test key: the build finds it up to date in the registry and
    only attests it (SBOM, provenance, their signatures and cosign attestations). test_trust.py and
    test_cosign.py verify it."""
    folder = tmp_path_factory.mktemp("trust")
    key, public = folder / "key.pem", folder / "key.pub"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
    key.chmod(0o600)
    subprocess.run(["openssl", "ec", "-in", str(key), "-pubout", "-out", str(public)], check=True, capture_output=True)
    args = list(e2e.args)
    args[args.index("--target") + 1] = "runtime"
    args[args.index("-o") + 1] = str(folder / "out")
    run = torchyard("build", *args, "--sign-key", str(key), env={"TORCHYARD_REGISTRY_PASSWORD": registry_password()})
    assert run.code == 0, run.text[-3000:]
    return Signed(e2e.ref("runtime"), key, public, run, folder / "out")


@pytest.fixture(scope="session")
def notebook(e2e: E2E, canary: Canary, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Issue 41's notebook image of the e2e combination (the e2e build's flags: its build cache), built and
    smoke-tested, not pushed: its local image reference."""
    out = tmp_path_factory.mktemp("notebook") / E2E_ID
    run = torchyard(
        "build", *E2E_FLAGS, "--arch", "sm_89", "--extension", "examples/addone", "--target", "notebook",
        "--ca-bundle", str(canary.bundle), "--no-host-settings", "-o", str(out),
    )  # fmt: skip
    assert run.code == 0, run.text[-4000:]
    for line in run.out.splitlines():  # up to date: this tree's image is in the engine already (same content hash)
        if line.startswith("notebook ") and line.split()[1] in ("built", "up-to-date"):
            return line.split()[2]
    raise AssertionError(f"no notebook image in:\n{run.out}")
