"""Bit-identical rebuilds (issue 19, item 7): the same small image (the layer tests' torch family: a torchyard
render of the Debian 12 cu130 combination, wheels of a few hundred KB from a local index) built twice with
--no-cache, seconds apart, then normalized as before a push (builder/oci/normalize.py, SOURCE_DATE_EPOCH): the
same manifest digest. When they differ, the assertion names each differing layer (the step that made it) and
the files in it that differ.

--no-cache rebuilds every step; BuildKit's cache mounts (apt and uv downloads) stay, as the shared engine's
cache may not be pruned here. bench/reproducible.py does the same for a real CUDA image (torch and the NVIDIA
wheels from PyPI).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from index_server import serving
from kit import docker
from layer_kit import Built, build, family_index

from builder.core.kinds import Installer
from builder.engine import DockerEngine
from builder.oci.normalize import NormalImage, differing_layers, normalize_saved
from builder.render import contract
from builder.trust.inventory import read_inventory
from builder.trust.sbom import Subject, make_sbom

pytestmark = pytest.mark.docker

EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z: what SOURCE_DATE_EPOCH would say (the matrix commit's time)
RUN = uuid.uuid4().hex[:8]


Twice = tuple[Built, Built, NormalImage, NormalImage]


@pytest.fixture(scope="module")
def twice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twice]:
    folder = tmp_path_factory.mktemp("reproducible")
    with serving(family_index()) as index:
        first = build(index, "2.14.1", Installer.UV, folder, f"lock-repro-a-{RUN}", "--no-cache")
        time.sleep(2)  # another clock: every time BuildKit writes moves
        second = build(index, "2.14.1", Installer.UV, folder, f"lock-repro-b-{RUN}", "--no-cache")
    try:
        yield first, second, _normal(first, folder), _normal(second, folder)
    finally:
        docker("rmi", first.ref, second.ref)


def _normal(image: Built, folder: Path) -> NormalImage:
    saved = folder / f"{image.ref.replace('/', '_').replace(':', '_')}.tar"
    done = docker("save", "-o", str(saved), image.ref)
    assert done.returncode == 0, done.stderr
    return normalize_saved(saved, folder / f"{saved.stem}-oci", EPOCH)


def test_two_builds_of_the_same_image_normalize_to_the_same_digest(twice: Twice) -> None:
    _, _, a, b = twice
    assert len(a.layers) == len(b.layers)
    assert differing_layers(a, b) == [], "the layers that differ, and their files"
    assert a.config == b.config
    assert a.digest == b.digest


def test_the_base_and_venv_layers_are_kept_byte_for_byte(twice: Twice) -> None:
    first, _, a, _ = twice
    venv = set(first.venv_layers().values())
    kept = {layer.diff_id for layer in a.layers if not layer.changed}
    assert venv <= kept  # content-only layers (mtime 0, owner 0): no entry needed a change
    assert first.layers()[0] in kept  # debian:bookworm-slim's layer, as the base digest gave it


def test_a_rebuild_keeps_every_layer_up_to_the_venv_without_normalizing(twice: Twice) -> None:
    """What Docker's pull reuses: a layer is taken from the local store only when every layer under it is the
    same, so a following release shares its venv layers with the last one only if its os layer is the same
    bytes. The os stage copies a tree of what its install wrote (builder/image/os_delta.sh), times of the
    build set to 0; a RUN's own layer held /etc, /run and /run/secrets with the times of each build."""
    first, second, _, _ = twice
    a, b = first.layers(), second.layers()
    top = a.index(list(first.venv_layers().values())[-1]) + 1  # the base, the os tree, WORKDIR, the venv
    assert len(a) == len(b)
    assert [i for i in range(top) if a[i] != b[i]] == [], "the layers below the venv's top that differ"


def test_the_image_carries_its_license_listing_and_its_sbom_names_debian_licenses(twice: Twice) -> None:
    """Issue 42, item 4: the listing at the contract's path names every Debian package (zlib1g's DEP-5 copyright
    file says Zlib) with counts, is the same bytes in both builds, and leaves neither the bound script nor
    bytecode behind; the SBOM made from the same image gives zlib1g its SPDX license and the same counts."""
    first, second, _, _ = twice
    text = first.run("cat", contract.LICENSES)
    assert text == second.run("cat", contract.LICENSES)
    listing = json.loads(text)
    debian = {(e["name"], e["architecture"]): e["license"] for e in listing["debian"]}
    listed = first.run("dpkg-query", "-W", "-f", "${Package}\t${Architecture}\n").split()
    assert sorted(debian) == sorted(zip(listed[::2], listed[1::2], strict=True))
    assert debian[("zlib1g", "amd64")] == "Zlib"
    counts = listing["counts"]
    assert sum(counts["debian"].values()) == len(debian) and counts["debian"]["recorded"] > len(debian) // 2
    assert first.run("find", "/tmp", "/var/tmp", "-mindepth", "1") == ""
    sbom = _sbom(first.ref)
    zlib = next(c for c in sbom["components"] if c["name"] == "zlib1g")
    assert zlib["licenses"] == [{"license": {"id": "Zlib"}}]
    properties = {p["name"]: p["value"] for p in sbom["metadata"]["properties"]}
    missing = counts["debian"]["not_recorded"] + counts["python"]["not_recorded"]
    assert properties["torchyard:license:not-recorded"] == str(missing)
    print(f"licenses: {counts}, {len(text)} bytes")  # the figures docs/contract.md quotes


def _sbom(ref: str) -> dict[str, Any]:
    inventory = read_inventory(DockerEngine(), ref, stack={})
    subject = Subject(repo="127.0.0.1:5000/torchyard-layers-test", digest="sha256:" + "0" * 64, platform="linux/amd64")
    parsed: dict[str, Any] = json.loads(make_sbom(inventory, subject, {}, datetime(2026, 1, 1, tzinfo=UTC)))
    return parsed
