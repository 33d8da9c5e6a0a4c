"""The SBOM's wheel sha256s from the build's own resolution (builder/lock/sbom_hashes.py): each distribution
located on the build's torch index, then PyPI, by its exact wheel tags, as `lock export` locates it; the
installer's own record kept; "not recorded" (and counted) where no index has the file or one cannot be read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import requests
from http_kit import Net, json_answer
from test_trust_sbom import SUBJECT

from builder.lock.locate import PYPI
from builder.lock.sbom_hashes import with_index_hashes
from builder.trust.inventory import INSTALLER, parse_inventory
from builder.trust.sbom import NOT_RECORDED, make_sbom

TORCH_INDEX = "https://download.pytorch.org/whl/cu130"
TORCH = "torch-2.14.1+cu130-cp311-cp311-manylinux_2_28_x86_64.whl"
INVENTORY: dict[str, Any] = {
    "schema": 1,
    "dpkg": [],
    "python": "/opt/venv/bin/python",
    "distributions": [
        {"name": "torch", "version": "2.14.1+cu130", "sha256": None, "tags": ["cp311-cp311-manylinux_2_28_x86_64"]},
        {"name": "six", "version": "1.17.0", "sha256": None, "tags": ["py2-none-any", "py3-none-any"]},
        {"name": "addone", "version": "0.1", "sha256": "c" * 64, "tags": ["py3-none-any"],
         "local": "file:///tmp/addone-0.1-py3-none-any.whl"},
        {"name": "mine", "version": "1.0", "sha256": None, "tags": ["py3-none-any"], "local": "file:///src/mine"},
    ],
    "stack": {},
}  # fmt: skip


def _page(net: Net, index: str, project: str, *files: tuple[str, str]) -> None:
    entries = [{"filename": f, "url": f"https://files/{f}", "hashes": {"sha256": s}} for f, s in files]
    body = {"meta": {"api-version": "1.1"}, "name": project, "files": entries}
    net.route("GET", f"{index}/{project}/", json_answer(body, {"Content-Type": "application/vnd.pypi.simple.v1+json"}))


def _sbom(net: Net) -> dict[str, Any]:
    inventory = with_index_hashes(net.http(), parse_inventory(INVENTORY), (TORCH_INDEX,))
    return dict(json.loads(make_sbom(inventory, SUBJECT, {}, datetime(2026, 12, 1, tzinfo=UTC))))


def _by_name(sbom: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for c in sbom["components"]:
        props = {p["name"]: p["value"] for p in c.get("properties", [])}
        found[c["name"]] = {"hashes": [h["content"] for h in c.get("hashes", [])], **props}
    return found


def test_each_wheel_gets_the_sha256_the_build_s_indexes_serve_for_its_exact_file() -> None:
    net = Net()
    _page(net, TORCH_INDEX, "torch", (TORCH, "a" * 64), (TORCH.replace("x86_64", "aarch64"), "9" * 64))
    _page(net, PYPI, "torch", (TORCH, "8" * 64))  # PyPI's copy differs: the torch index, asked first, wins
    _page(net, PYPI, "six", ("six-1.17.0-py2.py3-none-any.whl", "b" * 64))
    sbom = _sbom(net)
    found = _by_name(sbom)
    assert found["torch"]["hashes"] == ["a" * 64] and found["torch"]["torchyard:wheel-sha256:source"] == TORCH_INDEX
    assert found["torch"]["torchyard:wheel-sha256:file"] == TORCH
    assert found["six"]["hashes"] == ["b" * 64] and found["six"]["torchyard:wheel-sha256:source"] == PYPI
    assert found["addone"]["hashes"] == ["c" * 64] and found["addone"]["torchyard:wheel-sha256:source"] == INSTALLER
    assert found["mine"]["hashes"] == [] and found["mine"]["torchyard:wheel-sha256"] == NOT_RECORDED
    summary = {p["name"]: p["value"] for p in sbom["metadata"]["properties"]}
    assert (summary["torchyard:wheel-sha256:recorded"], summary["torchyard:wheel-sha256:not-recorded"]) == ("3", "1")
    assert not any("addone" in url or "mine" in url for url in net.urls())  # local installs ask no index


def test_an_index_that_cannot_be_read_leaves_the_hash_not_recorded_and_the_sbom_is_still_made() -> None:
    net = Net()
    net.on(lambda sent: requests.ConnectionError("refused") if "pytorch" in sent.url else None)
    _page(net, PYPI, "six", ("six-1.17.0-py2.py3-none-any.whl", "b" * 64))
    found = _by_name(_sbom(net))
    assert found["torch"]["hashes"] == [] and found["torch"]["torchyard:wheel-sha256"] == NOT_RECORDED
    assert found["six"]["hashes"] == []  # not PyPI's: the build asked the torch index first, whose file may differ
