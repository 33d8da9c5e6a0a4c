"""`matrix verify`, `matrix lock` and `render --locked` against real local servers: a package index on
127.0.0.1 (PEP 691 pages, PEP 503 variant pages, real wheels built here, HTTP range requests), the local
registry (no auth) as a Docker Hub mirror, and the bearer-token registry fixture in front of it."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from index_server import Index, serving, wheel
from kit import REGISTRY, ROOT, Run, one_line_error, torchyard
from oci_kit import push_image
from token_registry import token_registry

from builder.matrix.lock import read_lock
from builder.net.http import Http, Policy
from builder.oci.client import Distribution
from builder.oci.refs import parse_repo

pytestmark = pytest.mark.docker

_spec = importlib.util.spec_from_file_location("matrix_kit", ROOT / "tests" / "unit" / "matrix_kit.py")
assert _spec is not None and _spec.loader is not None
matrix_kit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(matrix_kit)
SMALL: str = matrix_kit.BASE  # torch 2.5.1: cu124 on PyPI, cu118 and cpu on PyTorch's index; debian12
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13")
PINS = [
    'nvidia-cuda-runtime-cu12 (==12.4.127) ; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cudnn-cu12 (==9.1.0.70) ; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-nccl-cu12 (==2.21.5) ; platform_system == "Linux" and platform_machine == "x86_64"',
    "filelock",
]
BASE_IMAGES = ("library/debian:bookworm-slim", "library/python:3.12-slim-bookworm")
CUDA_IMAGES = ("nvidia/cuda:12.4.1-base-debian12", "nvidia/cuda:12.4.1-cudnn-devel-debian12")


def cp(python: str) -> str:
    return "cp" + python.replace(".", "")


@pytest.fixture(scope="module")
def index() -> Iterator[Index]:
    built = Index()
    for py in PYTHONS:
        tag = f"{cp(py)}-{cp(py)}-manylinux1_x86_64"
        built.add("torch", f"torch-2.5.1-{tag}.whl", wheel(f"torch-2.5.1-{tag}.whl", PINS))
        for name, version in (("torchvision", "0.20.1"), ("torchaudio", "2.5.1")):
            filename = f"{name}-{version}-{tag}.whl"
            data = wheel(filename, ["torch (==2.5.1)"], payload=200_000, requires_python=">=3.9")
            built.add(name, filename, data)
        for variant in ("cu118", "cpu"):
            for name, version in (("torch", "2.5.1"), ("torchvision", "0.20.1"), ("torchaudio", "2.5.1")):
                filename = f"{name}-{version}+{variant}-{cp(py)}-{cp(py)}-linux_x86_64.whl"
                built.add(name, filename, wheel(filename, [], payload=50_000), variant)
    with serving(built) as running:
        yield running


def matrix(tmp_path: Path, text: str = SMALL) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    return path


def verify(path: Path, index: Index, *args: str) -> Run:
    return torchyard(
        "--matrix",
        str(path),
        "matrix",
        "verify",
        "--pypi-url",
        f"{index.url}/simple",
        "--pytorch-index-url",
        f"{index.url}/whl",
        "--jobs",
        "4",
        *args,
    )


def test_everything_holds_reading_a_few_kilobytes_of_each_wheel(tmp_path: Path, index: Index) -> None:
    before = len(index.sent)
    run = verify(matrix(tmp_path), index, "--only", "torch,companions", "--json")
    report = json.loads(run.out)
    assert (run.code, report["exit_code"]) == (0, 0), run.text
    assert report["counts"]["ok"] > 10 and report["counts"]["unchecked"] == 1  # cu118's wheels pin nothing
    sent = index.sent[before:]
    wheel_bytes = sum(size for path, _, size in sent if path.startswith("/files/torch-2.5.1-cp"))
    torch_wheels = sum(len(d) for n, d in index.files.items() if n.startswith("torch-2.5.1-cp"))
    assert wheel_bytes < torch_wheels / 20, "METADATA must come from a few ranges, not the whole wheels"
    assert all(rng is not None for path, rng, _ in sent if path.startswith("/files/"))


def test_drift_in_a_real_wheel_is_found_with_its_line(tmp_path: Path, index: Index) -> None:
    name = "torch-2.5.1-cp312-cp312-manylinux1_x86_64.whl"
    original = index.files[name]
    index.files[name] = wheel(name, [p.replace("9.1.0.70", "9.1.0.71") for p in PINS])
    try:
        run = verify(matrix(tmp_path), index, "--only", "torch")
    finally:
        index.files[name] = original
    assert run.code == 1, run.text
    line = matrix_kit.line_of(SMALL, 'cuda_runtime = "nvidia-cuda-runtime-cu12') + 1
    assert f"matrix:   cuDNN ==9.1.0.70 (matrix.toml:{line})" in run.out
    assert f"upstream: nvidia-cudnn-cu12==9.1.0.71 (read from {name} METADATA)" in run.out


def test_a_yanked_release_and_a_cached_rerun(tmp_path: Path, index: Index) -> None:
    path = matrix(tmp_path)
    cache = str(tmp_path / "cache")
    first = verify(path, index, "--only", "torch,companions", "--offline-cache", cache)
    assert first.code == 0, first.text
    before = len(index.sent)
    again = verify(path, index, "--only", "torch,companions", "--offline-cache", cache, "--json")
    assert json.loads(again.out)["cost"]["requests"] == 0 and len(index.sent) == before
    index.yanked.update(dict.fromkeys(index.projects["torch"], "broken pins"))
    try:
        yanked = verify(path, index, "--only", "torch")
    finally:
        index.yanked.clear()
    assert yanked.code == 1 and "YANKED" in yanked.out and "is yanked: broken pins" in yanked.out


def test_pip_reads_the_same_index_and_wheels(tmp_path: Path, index: Index) -> None:
    """The index and wheels are real: pip resolves, downloads and hash-checks one."""
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.11",
         "--platform", "manylinux1_x86_64", "--index-url", f"{index.url}/simple", "-d", str(tmp_path), "torch==2.5.1"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    downloaded = tmp_path / "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl"
    assert hashlib.sha256(downloaded.read_bytes()).digest() == hashlib.sha256(index.files[downloaded.name]).digest()


# --- base images and the lock, with the local registry as Docker Hub's mirror --------------------------------


def push_bases(host: str, *, python_label: str = "v1") -> None:
    client = Distribution(Http(Policy(timeout=30)))
    for ref in BASE_IMAGES + CUDA_IMAGES:
        name, tag = ref.split(":")
        labels = {"test": python_label} if "python" in name else {}
        push_image(client, parse_repo(f"{host}/{name}"), tag, labels=labels)


def test_lock_verify_and_a_locked_render_against_the_mirror(tmp_path: Path) -> None:
    push_bases(REGISTRY)
    path = matrix(tmp_path)
    mirror = ("--registry-mirror", REGISTRY)
    locked = torchyard("--matrix", str(path), "matrix", "lock", *mirror)
    assert locked.code == 0, locked.text
    lock = (tmp_path / "matrix.lock").read_text()
    assert lock.count("[[image]]") == 4 and '"linux/amd64" = "sha256:' in lock
    assert torchyard("--matrix", str(path), "matrix", "lock", "--check", *mirror).code == 0
    fine = torchyard("--matrix", str(path), "matrix", "verify", "--only", "images,lock", *mirror)
    assert fine.code == 0, fine.text

    render = torchyard(
        "--matrix", str(path), "render", "--any-host", "--torch", "2.5.1", "--variant", "cu124", "--python", "3.11",
        "--os", "debian12", "--locked", "-o", str(tmp_path / "out"),
    )  # fmt: skip
    assert render.code == 0, render.text
    found = read_lock(tmp_path / "matrix.lock")
    debian = found.get("debian:bookworm-slim") if found else None
    assert debian is not None
    dockerfile = (tmp_path / "out" / "Dockerfile").read_text()
    assert f"FROM debian:bookworm-slim@{debian.platforms['linux/amd64']} AS os" in dockerfile

    push_bases(REGISTRY, python_label="v2")  # python:3.12-slim-bookworm moved upstream
    moved = torchyard("--matrix", str(path), "matrix", "verify", "--only", "lock", *mirror)
    assert moved.code == 1 and "MOVED" in moved.out and "python:3.12-slim-bookworm linux/amd64" in moved.out
    check = torchyard("--matrix", str(path), "matrix", "lock", "--check", *mirror)
    assert check.code == 1 and "python:3.12-slim-bookworm linux/amd64: sha256:" in check.out
    push_bases(REGISTRY)  # as it was, for the next run


def test_images_through_the_token_registry_anonymously(tmp_path: Path) -> None:
    push_bases(REGISTRY)
    with token_registry() as realm:
        run = torchyard(
            "--matrix", str(matrix(tmp_path)), "matrix", "verify", "--only", "images", "--registry-mirror", realm.host
        )
        assert run.code == 0, run.text
        assert any(scopes and scopes[0].endswith("library/debian:pull") for scopes in realm.asked)


def test_an_unreachable_mirror_is_exit_5_and_never_a_pass(tmp_path: Path) -> None:
    run = torchyard(
        "--matrix", str(matrix(tmp_path)), "matrix", "verify", "--only", "images", "--registry-mirror", "127.0.0.1:9"
    )
    assert run.code == 5 and "NOT VERIFIED" in run.out
    locked = torchyard("--matrix", str(matrix(tmp_path)), "matrix", "lock", "--registry-mirror", "127.0.0.1:9")
    assert locked.code == 5 and "unreachable" in one_line_error(locked)
    assert not (tmp_path / "matrix.lock").exists()
