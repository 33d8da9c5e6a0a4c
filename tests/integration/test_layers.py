"""Issue 14 in the docker tier: the venv's layers have digests that depend on their files only, so images that pin
the same libraries share them (locally, in a push, in the registry's storage), and uv and pip install the same
packages.

The torch family here is tests/integration/layer_kit.py's: wheels with the names and Requires-Dist pins of torch
2.13.0 / 2.14.0 / 2.14.1 cu130 (2.14.x pin the same cuDNN and NCCL, 2.13.0 others), a few hundred KB each, from a
local index; the Dockerfiles are torchyard's own renders of the real matrix.toml combinations.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from conftest import RUN_ID
from index_server import serving
from kit import docker
from layer_kit import Built, build, family_index

from builder.core.kinds import Installer

pytestmark = pytest.mark.docker

SHARED_WITHIN_2_14 = ("venv", "cuda-runtime", "pinned", "cudnn", "nccl")  # 2.14.0 and 2.14.1 pin the same
OWN = ("torch", "packages")


@dataclass(frozen=True)
class Family:
    folder: Path
    uv_2140: Built
    uv_2141: Built
    uv_2130: Built
    pip_2141: Built


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Family]:
    folder = tmp_path_factory.mktemp("layers")
    with serving(family_index()) as index:
        made = Family(
            folder,
            build(index, "2.14.0", Installer.UV, folder, f"uv-{RUN_ID}"),
            build(index, "2.14.1", Installer.UV, folder, f"uv-{RUN_ID}"),
            build(index, "2.13.0", Installer.UV, folder, f"uv-{RUN_ID}"),
            build(index, "2.14.1", Installer.PIP, folder, f"pip-{RUN_ID}"),
        )
    yield made
    docker("rmi", made.uv_2140.ref, made.uv_2141.ref, made.uv_2130.ref, made.pip_2141.ref)


def group_of(layer: str) -> str:
    return layer.split(".", maxsplit=1)[0]


def test_images_that_pin_the_same_libraries_carry_the_same_layers(family: Family) -> None:
    a, b = family.uv_2140.venv_layers(), family.uv_2141.venv_layers()
    assert list(a) == list(b)
    assert list(a)[:2] == ["venv", "cuda-runtime.1"] and list(a)[-2:] == ["torch", "packages"]
    for name in a:
        if group_of(name) in SHARED_WITHIN_2_14:
            assert a[name] == b[name], f"{name}: 2.14.0 and 2.14.1 pin the same, yet the layers differ"
        else:
            assert a[name] != b[name], f"{name}: torch {name} differs between 2.14.0 and 2.14.1"
    # and the manifest says what each holds, as the build found it
    manifest = json.loads(family.uv_2141.run("cat", "/etc/torchyard/manifest.json"))
    held = {layer["name"]: layer["packages"] for layer in manifest["layers"]}
    assert held["cudnn"] == ["nvidia-cudnn-cu13==9.24.0.43"] and held["nccl"] == ["nvidia-nccl-cu13==2.30.7"]
    assert held["torch"] == ["torch==2.14.1"]
    assert [held[f"cuda-runtime.{i}"] for i in (1, 2, 3)] == [
        ["cuda-toolkit==13.0.3"],
        ["nvidia-cublas==13.1.1.3"],
        ["nvidia-cuda-runtime==13.0.96"],
    ]
    assert held["pinned.1"] == ["nvidia-cusparselt-cu13==0.8.1"] and held["pinned.2"] == ["triton==3.8.0"]
    assert "torchvision==0.29.1" in held["packages"] and "nvidia-nvjitlink==13.0.88" in held["packages"]


def test_a_different_pin_makes_a_different_layer_and_only_that(family: Family) -> None:
    old, new = family.uv_2130.venv_layers(), family.uv_2140.venv_layers()
    differ = {name for name in new if old[name] != new[name]}
    # 2.13.0 pins cuDNN 9.20.0.48, NCCL 2.29.7 and triton 3.7.1; the CUDA runtime and cuSPARSELt as 2.14.0 does
    assert differ == {"pinned.2", "cudnn", "nccl", "torch", "packages"}


def test_a_layer_digest_depends_on_its_files_only(family: Family) -> None:
    """The same image again with no cache at all: other times, another os layer below (apt ran again), the same
    venv layers."""
    with serving(family_index()) as index:
        again = build(index, "2.14.1", Installer.UV, family.folder, f"again-{RUN_ID}", "--no-cache")
    try:
        assert again.venv_layers() == family.uv_2141.venv_layers()
    finally:
        docker("rmi", again.ref)


def test_uv_and_pip_install_the_same_packages(family: Family) -> None:
    def freeze(image: Built) -> list[str]:
        return image.run("/opt/venv/bin/python", "-m", "pip", "freeze").split()

    def names(image: Built) -> set[str]:  # pip and setuptools too: torch.compile imports setuptools on <= 3.11
        listed = image.run("/opt/venv/bin/python", "-m", "pip", "freeze", "--all").split()
        return {line.split("==")[0].lower() for line in listed}

    assert freeze(family.uv_2141) == freeze(family.pip_2141)
    assert names(family.uv_2141) == names(family.pip_2141) and {"pip", "setuptools"} <= names(family.uv_2141)
    assert "torch==2.14.1" in freeze(family.pip_2141) and "nvidia-cudnn-cu13==9.24.0.43" in freeze(family.uv_2141)
    uv, pip = family.uv_2141.venv_layers(), family.pip_2141.venv_layers()
    assert list(uv) == list(pip)  # the same layer plan, whichever installer filled it


class Registry:
    """docker-registry on a free port over a fresh storage folder: what it stores is what the pushes sent."""

    def __init__(self, folder: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.storage = folder / "storage"
        config = folder / "registry.yml"
        config.write_text(f"version: 0.1\nstorage: {{filesystem: {{rootdirectory: {self.storage}}}}}\n"
                          f"http: {{addr: 127.0.0.1:{self.port}}}\n")  # fmt: skip
        self.proc = subprocess.Popen(
            ["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(50):
            try:
                requests.get(f"http://127.0.0.1:{self.port}/v2/", timeout=1)
                return
            except requests.RequestException:
                time.sleep(0.2)
        raise AssertionError("the test registry did not start")

    def blobs(self) -> dict[str, int]:
        """Every blob the storage holds: digest -> bytes (one data file per digest)."""
        found = {}
        for data in (self.storage / "docker/registry/v2/blobs/sha256").glob("*/*/data"):
            found[f"sha256:{data.parent.name}"] = data.stat().st_size
        return found

    def get(self, repo: str, kind: str, ref: str) -> requests.Response:
        reply = requests.get(
            f"http://127.0.0.1:{self.port}/v2/{repo}/{kind}/{ref}",
            headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
            timeout=30,
        )
        reply.raise_for_status()
        return reply

    def image(self, repo: str, tag: str) -> tuple[str, list[str], str, list[str]]:
        """(manifest digest, layer blob digests, config digest, the config's diff ids): the layers in order."""
        reply = self.get(repo, "manifests", tag)
        manifest = reply.json()
        config = manifest["config"]["digest"]
        diff_ids = self.get(repo, "blobs", config).json()["rootfs"]["diff_ids"]
        layers = [layer["digest"] for layer in manifest["layers"]]
        return reply.headers["Docker-Content-Digest"], layers, config, diff_ids

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    served = Registry(tmp_path)
    yield served
    served.stop()


def push(image: Built, registry: Registry, repo: str) -> tuple[str, str]:
    ref = f"127.0.0.1:{registry.port}/{repo}:{image.torch}"
    assert docker("tag", image.ref, ref).returncode == 0
    try:
        done = docker("push", ref, timeout=1200)
        assert done.returncode == 0, done.stderr
        return ref, done.stdout
    finally:
        docker("rmi", "--no-prune", ref)


def test_the_registry_stores_the_shared_layers_once(family: Family, registry: Registry) -> None:
    first, second = family.uv_2140, family.uv_2141
    push(first, registry, "family/first")
    before = registry.blobs()
    _, said = push(second, registry, "family/second")
    grown = set(registry.blobs()) - set(before)
    _, layers_one, _, _ = registry.image("family/first", first.torch)
    manifest, layers_two, config, diff_ids = registry.image("family/second", second.torch)
    blob_of = dict(zip(diff_ids, layers_two, strict=True))
    venv = {name: blob_of[diff_id] for name, diff_id in second.venv_layers().items()}
    shared = {blob for name, blob in venv.items() if group_of(name) in SHARED_WITHIN_2_14}
    # the layers both pin are the same blobs, which the second push did not send and the storage holds once
    assert shared <= set(layers_one) and not shared & grown
    skipped = [line for line in said.splitlines() if "Mounted from family/first" in line or "already exists" in line]
    assert len(skipped) >= len(shared), said
    # what the storage gained is exactly the second image's own: its other layers, its config, its manifest
    assert grown == (set(layers_two) - set(layers_one)) | {config, manifest}
    assert {venv["torch"], venv["packages"]} <= grown
