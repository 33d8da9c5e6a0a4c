"""The SBOM (builder/trust/sbom.py) from an image's inventory (builder/image/inventory.py, read through
builder/trust/inventory.py): every package and distribution in it, the stack as properties, "not recorded"
for what the image did not give, and the CycloneDX 1.6 JSON schema's verdict."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.message import Message
from typing import Any

import pytest
from fake_engine import FakeEngine

from builder.core.errors import BuildError
from builder.engine import RunResult
from builder.image.inventory import INVENTORY_MARK, license_of, parse_dpkg_status, wheel_sha256
from builder.trust.inventory import parse_inventory, read_inventory, stack_of
from builder.trust.sbom import NOT_RECORDED, Subject, make_sbom, validate

STATUS = """Package: libc6
Status: install ok installed
Priority: optional
Architecture: amd64
Multi-Arch: same
Source: glibc
Version: 2.36-9+deb12u10
Description: GNU C Library: Shared libraries
 Contains the standard libraries that are used by nearly all programs on
 the system.

Package: gone
Status: purge ok not-installed
Architecture: amd64

Package: libc6
Status: install ok installed
Architecture: i386
Version: 2.36-9+deb12u10

Package: base-files
Status: install ok installed
Architecture: amd64
Version: 12.4+deb12u11
"""
DIGEST = "sha256:" + "b" * 64
SUBJECT = Subject(repo="127.0.0.1:5000/team/torch", digest=DIGEST, platform="linux/amd64", os_id="debian-12")
INVENTORY = {
    "schema": 1,
    "dpkg": parse_dpkg_status(STATUS),
    "python": "/opt/venv/bin/python",
    "distributions": [
        {"name": "torch", "version": "2.14.1+cu130", "license": "BSD-3-Clause", "sha256": None},
        {
            "name": "nvidia-cudnn-cu13",
            "version": "9.13.0.50",
            "license": "LicenseRef-NVIDIA-Proprietary",
            "sha256": None,
        },
        {"name": "addone", "version": "0.1", "license": None, "sha256": "c" * 64},
        {"name": "pip", "version": "25.0", "license": "MIT License", "sha256": None},
    ],
    "stack": {"torch": "2.14.1+cu130", "cuda": "13.0", "cudnn": "91300", "nccl": "2.27.7", "archs": None},
}


def _sbom(data: dict[str, Any] | None = None) -> dict[str, Any]:
    facts = {"matrix-commit": "a" * 40, "combination": "torch2.14.1-cu130-py3.11-debian12"}
    when = datetime(2026, 12, 1, tzinfo=UTC)
    parsed: dict[str, Any] = json.loads(make_sbom(parse_inventory(data or INVENTORY), SUBJECT, facts, when))
    return parsed


def test_dpkg_status_lists_what_dpkg_query_lists_each_architecture_once() -> None:
    found = [(p["package"], p["architecture"], p.get("version")) for p in parse_dpkg_status(STATUS)]
    assert found == [
        ("base-files", "amd64", "12.4+deb12u11"),
        ("libc6", "amd64", "2.36-9+deb12u10"),
        ("libc6", "i386", "2.36-9+deb12u10"),
    ]


def test_the_sbom_lists_every_package_and_distribution_with_its_version() -> None:
    components = {(c["name"], c["version"], c["purl"].split(":")[1].split("/")[0]) for c in _sbom()["components"]}
    assert components == {
        ("base-files", "12.4+deb12u11", "deb"),
        ("libc6", "2.36-9+deb12u10", "deb"),
        ("torch", "2.14.1+cu130", "pypi"),
        ("nvidia-cudnn-cu13", "9.13.0.50", "pypi"),
        ("addone", "0.1", "pypi"),
        ("pip", "25.0", "pypi"),
    }
    purls = sorted(c["purl"] for c in _sbom()["components"] if c["name"] == "libc6")
    assert purls == [
        "pkg:deb/debian/libc6@2.36-9%2Bdeb12u10?arch=amd64&distro=debian-12",
        "pkg:deb/debian/libc6@2.36-9%2Bdeb12u10?arch=i386&distro=debian-12",
    ]


def test_licenses_and_wheel_hashes_where_known_not_recorded_where_not() -> None:
    by_name = {c["name"]: c for c in _sbom()["components"]}
    assert by_name["torch"]["licenses"] == [{"license": {"id": "BSD-3-Clause"}}]
    assert by_name["addone"]["hashes"] == [{"alg": "SHA-256", "content": "c" * 64}]
    assert {"name": "torchyard:license", "value": NOT_RECORDED} in by_name["addone"]["properties"]
    assert {"name": "torchyard:wheel-sha256", "value": NOT_RECORDED} in by_name["torch"]["properties"]


def test_the_stack_and_the_build_facts_are_properties_of_the_image() -> None:
    data = _sbom()
    properties = {p["name"]: p["value"] for p in data["metadata"]["properties"]}
    assert properties["torchyard:stack:cuda"] == "13.0"
    assert properties["torchyard:stack:nccl"] == "2.27.7"
    assert properties["torchyard:stack:archs"] == NOT_RECORDED  # torch gave none: never "none"
    assert properties["torchyard:matrix-commit"] == "a" * 40
    assert data["metadata"]["component"]["version"] == DIGEST
    assert data["metadata"]["component"]["type"] == "container"
    assert data["specVersion"] == "1.6"


def test_an_image_without_dpkg_says_so() -> None:
    properties = {p["name"]: p["value"] for p in _sbom(INVENTORY | {"dpkg": None})["metadata"]["properties"]}
    assert properties["torchyard:dpkg"] == "no dpkg status database in the image"


def test_the_schema_refuses_a_broken_sbom() -> None:
    data = _sbom()
    validate(json.dumps(data))  # the real one passes
    del data["specVersion"]
    with pytest.raises(BuildError, match=r"CycloneDX 1\.6 schema: 'specVersion' is a required property"):
        validate(json.dumps(data))
    data["specVersion"], data["components"][0]["type"] = "1.6", "not-a-type"
    with pytest.raises(BuildError, match=r"CycloneDX 1\.6 schema"):
        validate(json.dumps(data))


def _meta(**fields: str | list[str]) -> Message:
    message = Message()
    for key, value in fields.items():
        for item in value if isinstance(value, list) else [value]:
            message[key.replace("_", "-")] = item
    return message


def test_a_distributions_license_from_expression_field_or_classifiers() -> None:
    assert license_of(_meta(License_Expression="MIT OR Apache-2.0", License="x")) == "MIT OR Apache-2.0"
    assert license_of(_meta(License="BSD-3-Clause")) == "BSD-3-Clause"
    classifiers = ["License :: OSI Approved :: MIT License", "Programming Language :: Python"]
    assert license_of(_meta(License="UNKNOWN", Classifier=classifiers)) == "MIT License"
    assert license_of(_meta(License="a long text\nwith lines")) is None


class _Dist:
    def __init__(self, text: str | None) -> None:
        self.text = text

    def read_text(self, name: str) -> str | None:
        return self.text if name == "direct_url.json" else None


def test_a_wheel_hash_comes_from_direct_url_json_only() -> None:
    assert wheel_sha256(_Dist('{"archive_info": {"hashes": {"sha256": "ab"}}}')) == "ab"
    assert wheel_sha256(_Dist('{"archive_info": {"hash": "sha256=cd"}}')) == "cd"
    assert wheel_sha256(_Dist(None)) is None
    assert wheel_sha256(_Dist('{"dir_info": {}}')) is None


def test_the_inventory_is_read_with_the_images_python_and_its_marked_line() -> None:
    engine = FakeEngine({})
    engine.scripted["python"] = RunResult(0, "a warning\n" + INVENTORY_MARK + json.dumps(INVENTORY) + "\n")
    found = read_inventory(engine, "img")
    assert [d.name for d in found.distributions] == ["torch", "nvidia-cudnn-cu13", "addone", "pip"]
    assert found.dpkg is not None and len(found.dpkg) == 3
    assert engine.calls[-1].args[:3] == ("img", "python", "-c")


def test_an_image_whose_inventory_fails_stops_the_attestation() -> None:
    engine = FakeEngine({})
    engine.scripted["python"] = RunResult(1, "Traceback ... ImportError")
    with pytest.raises(BuildError, match="reading the contents of img for its SBOM exited 1"):
        read_inventory(engine, "img")


def test_the_stack_from_the_smoke_suites_report_and_torch_not_asked_again() -> None:
    observed = {"torch": "2.14.1+cu130", "cuda": "13.0", "cudnn": 92400, "nccl": None, "torch_arch_list": ["sm_90"]}
    stack = stack_of(observed)
    assert stack == {"torch": "2.14.1+cu130", "cuda": "13.0", "cudnn": "92400", "nccl": None, "archs": "sm_90"}
    engine = FakeEngine({})
    engine.scripted["python"] = RunResult(0, INVENTORY_MARK + json.dumps(INVENTORY | {"stack": {}}) + "\n")
    found = read_inventory(engine, "img", stack)
    assert found.stack == stack and engine.calls[-1].args[-1] == "--no-torch"
