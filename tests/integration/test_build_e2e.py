"""Issue 4 end to end: a real CUDA torch image from PyPI, runtime and devel, sm_89 + the example
extension, pushed to a real registry with credentials, pulled back by digest, rebuilt as a no-op."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import docker
import pytest
from conftest import E2E, Canary
from kit import AUTH_REGISTRY, AUTH_USER, E2E_TORCH, registry_password, torchyard
from kit import docker as docker_cli

from builder.core.provenance import CREATED, REVISION
from builder.engine import RegistryAuth
from builder.matrix import load_matrix
from builder.pipeline.registry import Registry

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.docker

_FACTS = (
    "import json, platform, sys, torch, torchvision, torchaudio\n"
    "os_release = dict(l.strip().split('=', 1) for l in open('/etc/os-release') if '=' in l)\n"
    "print(json.dumps({'torch': torch.__version__, 'torchvision': torchvision.__version__,\n"
    "  'torchaudio': torchaudio.__version__, 'cuda': torch.version.cuda,\n"
    "  'cudnn': torch.backends.cudnn.version(), 'nccl': list(torch.cuda.nccl.version()),\n"
    "  'python': platform.python_version(), 'os': os_release['ID'] + os_release['VERSION_ID'].strip('\"'),\n"
    "  'archs': torch.cuda.get_arch_list(), 'cuda_available': torch.cuda.is_available()}))\n"
)


def _inside(ref: str, code: str, *, entry: str = "python") -> str:
    done = docker_cli("run", "--rm", "--network", "none", ref, entry, "-c", code)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def _expected() -> dict[str, Any]:
    m = load_matrix()
    release = next(t for t in m.torch if str(t.version) == E2E_TORCH)
    variant = release.variant(release.pypi_default)
    assert variant is not None and variant.cudnn is not None and variant.nccl is not None
    cudnn = variant.cudnn.release
    return {
        "torch": f"{E2E_TORCH}+{variant.name}",
        "torchvision": str(release.torchvision),
        "torchaudio": str(release.torchaudio),
        "cuda": f"{variant.cuda}",
        "cudnn": cudnn[0] * 10000 + cudnn[1] * 100 + cudnn[2],
        "nccl": list(variant.nccl.release[:3]),
        "archs": [a.name for a in variant.sass or ()],
    }


def test_every_target_was_built_verified_and_pushed(e2e: E2E) -> None:
    out = e2e.first.out
    for flavor in ("runtime", "devel", "inference"):
        assert f"[{flavor}] smoke: " in out
        assert e2e.ref(flavor).endswith(f"-{flavor}-sm89-x" + e2e.ref(flavor).rsplit("-x", 1)[1])
        assert f"pushed {e2e.ref(flavor)} (sha256:" in out
    assert "extension code: addone: sm_89" in out


@pytest.mark.parametrize("flavor", ["runtime", "devel"])
def test_the_image_holds_the_declared_versions(e2e: E2E, flavor: str) -> None:
    facts = json.loads(_inside(e2e.ref(flavor), _FACTS))
    expected = _expected()
    assert facts["torch"] == expected["torch"]
    assert facts["torchvision"].split("+")[0] == expected["torchvision"]
    assert facts["torchaudio"].split("+")[0] == expected["torchaudio"]
    assert facts["cuda"] == expected["cuda"]
    assert facts["cudnn"] == expected["cudnn"]
    assert facts["nccl"] == expected["nccl"]
    assert facts["python"].startswith("3.13.") and facts["os"] == "debian13"
    assert facts["archs"] == expected["archs"]  # the matrix's compiled list is what torch reports
    assert facts["cuda_available"] is False  # no GPU here: the GPU part is the smoke suite's --gpus run


def test_cuda_libraries_load_without_a_gpu(e2e: E2E) -> None:
    code = (
        "import ctypes, json, os, torch\n"
        "torch.backends.cudnn.version(); torch.cuda.nccl.version()\n"
        "paths = [l.split()[-1] for l in open('/proc/self/maps') if '.so' in l]\n"
        "found = {n: next(p for p in paths if os.path.basename(p).startswith(n)) for n in "
        "('libcudnn.so', 'libcublas.so', 'libnccl.so', 'libcudart.so')}\n"
        "ctypes.CDLL(found['libcublas.so']).cublasGetCudartVersion.restype = ctypes.c_size_t\n"
        "print(json.dumps({n: p for n, p in found.items()}))\n"
    )
    found = json.loads(_inside(e2e.ref("runtime"), code))
    assert all("/opt/venv/lib/python3.13/site-packages/nvidia/" in p for p in found.values()), found


def test_the_extension_imports_in_runtime_and_carries_sm89_code(e2e: E2E) -> None:
    listed = _inside(
        e2e.ref("runtime"), "import addone, os; print(sorted(os.listdir(os.path.dirname(addone.__file__))))"
    )
    assert "_C.cpython-313-x86_64-linux-gnu.so" in listed
    so = "/opt/venv/lib/python3.13/site-packages/addone/_C.cpython-313-x86_64-linux-gnu.so"
    done = docker_cli("run", "--rm", "--network", "none", e2e.ref("devel"), "cuobjdump", "--list-elf", so)
    assert done.returncode == 0, done.stderr
    assert "sm_89.cubin" in done.stdout
    assert [line for line in done.stdout.splitlines() if ".cubin" in line and "sm_89" not in line] == []


def test_devel_has_nvcc_of_the_declared_cuda_and_shares_the_runtime_layers(e2e: E2E) -> None:
    version = docker_cli("run", "--rm", e2e.ref("devel"), "nvcc", "--version").stdout
    assert "release 13.2," in version  # the cu132 variant's toolkit
    client = docker.from_env()
    runtime = client.images.get(e2e.ref("runtime")).attrs["RootFS"]["Layers"]
    devel = client.images.get(e2e.ref("devel")).attrs["RootFS"]["Layers"]
    shared = [layer for layer in runtime if layer in devel]
    assert len(shared) >= len(runtime) - 5  # all but runtime's own top layers (extension, manifest, suite)


def test_pull_by_digest_gives_the_pushed_image_with_its_labels(e2e: E2E) -> None:
    plan = json.loads((e2e.out_dir / "plan.json").read_text())
    client = docker.from_env()
    auth = {"username": AUTH_USER, "password": registry_password()}
    for flavor in ("runtime", "devel"):
        ref = e2e.ref(flavor)
        digest = e2e.digest(ref)
        repo = ref.rsplit(":", 1)[0]
        client.api.pull(repo, tag=digest, auth_config=auth)
        pulled = client.images.get(f"{repo}@{digest}")
        labels = pulled.attrs["Config"]["Labels"]
        provenance = {key: labels.pop(key) for key in (REVISION, CREATED) if key in labels}
        assert labels == plan["targets"][flavor]["labels"]
        assert labels["io.torchyard.content-hash"] == plan["content_hash"]
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
        assert provenance[REVISION] == head.stdout.strip(), "the checkout's commit, given at build time"
        assert provenance[CREATED].endswith("Z")
        assert pulled.id == client.images.get(ref).id


def test_building_again_rebuilds_and_pushes_nothing(e2e: E2E) -> None:
    registry = Registry(RegistryAuth(AUTH_USER, registry_password()))
    before = {f: registry.labels(e2e.ref(f)) for f in ("runtime", "devel")}
    start = time.monotonic()
    again = torchyard("build", *e2e.args, env={"TORCHYARD_REGISTRY_PASSWORD": registry_password()})
    assert again.code == 0, again.text[-3000:]
    assert time.monotonic() - start < 60
    assert again.out.count("up to date in the registry: no build, no push") == 3  # runtime, devel, inference
    assert "pushed" not in again.out and "building" not in again.out and "smoke suite" not in again.out
    assert {f: registry.labels(e2e.ref(f)) for f in ("runtime", "devel")} == before


def test_a_docker_login_is_enough_to_find_the_pushed_images(e2e: E2E, tmp_path: Path) -> None:
    """`docker login` (the real CLI, into a config of this test's own) instead of --registry-user."""
    config = tmp_path / "docker-config"
    login = subprocess.run(
        ["/usr/bin/docker", "--config", str(config), "login", AUTH_REGISTRY, "-u", AUTH_USER, "--password-stdin"],
        input=registry_password(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert login.returncode == 0, login.stderr
    i = e2e.args.index("--registry-user")
    args = e2e.args[:i] + e2e.args[i + 2 :]
    again = torchyard("build", *args, env={"DOCKER_CONFIG": str(config), "TORCHYARD_REGISTRY_PASSWORD": ""})
    assert again.code == 0, again.text[-3000:]
    assert again.out.count("up to date in the registry: no build, no push") == 3  # runtime, devel, inference
    without = torchyard(
        "build", *args, env={"DOCKER_CONFIG": str(tmp_path / "empty"), "TORCHYARD_REGISTRY_PASSWORD": ""}
    )
    assert without.code == 5 and f"docker login {AUTH_REGISTRY}" in without.err


def test_no_ca_bundle_or_registry_password_in_the_images(e2e: E2E, canary: Canary) -> None:
    """docker save of both images and their history hold neither the CA bundle nor the credentials."""
    needles = [canary.marker.encode(), registry_password().encode()]
    client = docker.from_env()
    refs = [e2e.ref("runtime"), e2e.ref("devel")]
    for ref in refs:
        history = json.dumps(client.api.history(ref))  # type: ignore[no-untyped-call]
        assert not any(n.decode() in history for n in needles)
    # One `docker save` of both images: the layers they share are written once.
    saved = subprocess.Popen(["/usr/bin/docker", "save", *refs], stdout=subprocess.PIPE)
    assert saved.stdout is not None
    found = _scan(iter(lambda: saved.stdout.read(1 << 20), b""), needles)  # type: ignore[union-attr]
    assert saved.wait() == 0
    assert found == []
    context = b"".join(p.read_bytes() for p in e2e.out_dir.rglob("*") if p.is_file())
    assert not any(n in context for n in needles)


def _scan(chunks: Any, needles: list[bytes]) -> list[bytes]:
    overlap = max(len(n) for n in needles)
    found: set[bytes] = set()
    tail = b""
    for chunk in chunks:
        window = tail + chunk
        found.update(n for n in needles if n in window)
        tail = window[-overlap:]
    return sorted(found)
