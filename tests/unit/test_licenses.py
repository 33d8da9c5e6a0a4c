"""Issue 42, item 4: license attribution. A Debian package's licenses from its copyright file (real Debian 12 files
in data/copyright), the image's license listing (builder/image/inventory.py --licenses), and the SBOM's license
of each component (builder/trust/licenses.py, builder/trust/sbom.py) with the count of those not recorded."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from builder.image import inventory
from builder.image.inventory import NOT_RECORDED, copyright_licenses, debian_license, license_listing
from builder.trust.inventory import parse_inventory
from builder.trust.licenses import spdx_expression, spdx_id
from builder.trust.sbom import Subject, make_sbom

COPYRIGHT = Path(__file__).resolve().parent / "data" / "copyright"


def _names(package: str) -> list[str] | None:
    return copyright_licenses((COPYRIGHT / package).read_text(encoding="utf-8"))


# ---- the copyright file (DEP-5) ----


@pytest.mark.parametrize(
    ("package", "names"),
    [
        ("zlib1g", ["Zlib"]),  # five paragraphs, one license; an http:// Format URL
        ("libzstd1", ["BSD-3-clause or GPL-2", "zlib", "Expat"]),  # an alternative; standalone License paragraphs
        ("libssl3", ["Apache-2.0", "Artistic or GPL-1+"]),
        ("tzdata", ["public-domain"]),
        ("base-files", None),  # free-form prose: not machine-readable, not guessed at
    ],
)
def test_a_copyright_files_licenses_are_its_header_and_files_paragraphs_short_names(
    package: str, names: list[str] | None
) -> None:
    assert _names(package) == names


def test_standalone_license_paragraphs_and_license_texts_add_no_name() -> None:
    text = (
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nLicense: GPL-2+\n\n"
        "files: *\nCopyright: 2001 A\nLicense:   gpl-2+\n GPL-3+ is mentioned in the text\n .\n More text: here\n\n"
        "Files:\n debian/*\n src/*\nLicense: MIT\n\n"
        "License: Apache-2.0\n The text of a license no Files paragraph names.\n"
    )
    assert copyright_licenses(text) == ["GPL-2+", "MIT"]  # gpl-2+ is GPL-2+ again; lower-case `files:` counts


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Copyright: 2001 A\nLicense: GPL-2+\n",  # DEP-5's fields without its Format line
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\nCopyright: A\n",
    ],
)
def test_a_file_without_a_format_line_or_any_license_is_not_recorded(text: str) -> None:
    assert copyright_licenses(text) is None


def test_a_packages_names_are_joined_with_and_an_alternative_in_parentheses() -> None:
    assert debian_license(["Zlib"]) == "Zlib"
    assert debian_license(["BSD-3-clause or GPL-2", "zlib", "Expat"]) == "(BSD-3-clause or GPL-2) and zlib and Expat"
    assert debian_license(["GPL-2+ or Artistic, and BSD", "MIT"]) == "(GPL-2+ or Artistic, and BSD) and MIT"
    assert debian_license(None) is None and debian_license([]) is None


def test_multi_arch_copies_share_one_doc_folder_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "libc6").mkdir()
    (tmp_path / "libc6" / "copyright").write_bytes((COPYRIGHT / "zlib1g").read_bytes())
    monkeypatch.setattr(inventory, "DOC", str(tmp_path))
    read: dict[str, list[str] | None] = {}
    assert inventory.package_licenses("libc6", read) == ["Zlib"]
    (tmp_path / "libc6" / "copyright").unlink()  # read once: the i386 copy gets the answer read for amd64
    assert inventory.package_licenses("libc6:i386", read) == ["Zlib"]
    assert inventory.package_licenses("gone", read) is None  # no folder, no file


# ---- the listing in the image ----

FOUND: dict[str, Any] = {
    "dpkg": [
        {"package": "base-files", "version": "12.4", "architecture": "amd64", "licenses": None},
        {"package": "libzstd1", "version": "1.5.4", "architecture": "amd64",
         "licenses": ["BSD-3-clause or GPL-2", "zlib"]},
    ],
    "distributions": [
        {"name": "nvidia-cublas", "version": "13.1.0.3", "license": "NVIDIA Proprietary Software", "sha256": None},
        {"name": "torch", "version": "2.15.0", "license": "BSD-3-Clause", "sha256": None},
        {"name": "addone", "version": "0.1", "license": None, "sha256": None},
    ],
}  # fmt: skip


def test_the_listing_names_every_package_and_distribution_and_counts_what_is_not_recorded() -> None:
    listing = license_listing(FOUND)
    assert listing["debian"] == [
        {"name": "base-files", "version": "12.4", "architecture": "amd64", "license": NOT_RECORDED},
        {
            "name": "libzstd1",
            "version": "1.5.4",
            "architecture": "amd64",
            "license": "(BSD-3-clause or GPL-2) and zlib",
        },
    ]
    assert [(d["name"], d["license"]) for d in listing["python"]] == [
        ("nvidia-cublas", "NVIDIA Proprietary Software"),
        ("torch", "BSD-3-Clause"),
        ("addone", NOT_RECORDED),
    ]
    assert listing["counts"] == {
        "debian": {"recorded": 1, "not_recorded": 1},
        "python": {"recorded": 2, "not_recorded": 1},
    }
    assert license_listing({**FOUND, "dpkg": None})["counts"]["debian"] is None  # no dpkg database: none to count


def test_the_listing_file_is_the_same_bytes_for_the_same_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inventory, "inventory", lambda with_torch: FOUND)
    first, second = tmp_path / "a" / "licenses.json", tmp_path / "b" / "licenses.json"
    inventory.write_listing(str(first))
    inventory.write_listing(str(second))
    assert first.read_bytes() == second.read_bytes()
    text = first.read_text()
    assert text.endswith("\n") and json.loads(text)["listing"] == inventory.LISTING
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"


# ---- Debian's names as SPDX ----


@pytest.mark.parametrize(
    ("name", "spdx"),
    [
        ("GPL-2+", "GPL-2.0-or-later"),
        ("GPL-2", "GPL-2.0-only"),
        ("LGPL-2.1+", "LGPL-2.1-or-later"),
        ("lgpl-3", "LGPL-3.0-only"),
        ("GFDL-1.3+", "GFDL-1.3-or-later"),
        ("Expat", "MIT"),
        ("BSD-3-clause", "BSD-3-Clause"),
        ("zlib", "Zlib"),
        ("Apache-2.0", "Apache-2.0"),
        ("public-domain", None),
        ("Artistic", None),
        ("MIT/X11", None),
    ],
)
def test_a_debian_short_name_has_its_spdx_id_or_none(name: str, spdx: str | None) -> None:
    assert spdx_id(name) == spdx


@pytest.mark.parametrize(
    ("names", "expression"),
    [
        (["Zlib"], "Zlib"),
        (["BSD-3-clause or GPL-2", "zlib", "Expat"], "(BSD-3-Clause OR GPL-2.0-only) AND Zlib AND MIT"),
        (["MPL-1.1 or GPL-2+ or LGPL-2.1+"], "MPL-1.1 OR GPL-2.0-or-later OR LGPL-2.1-or-later"),
        (["Apache-2.0", "Artistic or GPL-1+"], None),  # Artistic has no one SPDX id: the whole is a name
        (["GPL-3+ with Bison exception"], None),
        (["GPL-2+ or Artistic, and BSD-3-clause"], None),  # DEP-5's comma precedence is not translated
        (["GPL-2+ or"], None),
        ([], None),
    ],
)
def test_a_packages_names_as_one_spdx_expression_or_none(names: list[str], expression: str | None) -> None:
    assert spdx_expression(names) == expression


# ---- the SBOM ----

INVENTORY: dict[str, Any] = {
    "dpkg": [
        {"package": "base-files", "version": "12.4", "architecture": "amd64", "licenses": None},
        {"package": "libssl3", "version": "3.0.19", "architecture": "amd64", "licenses": _names("libssl3")},
        {"package": "libzstd1", "version": "1.5.4", "architecture": "amd64", "licenses": _names("libzstd1")},
        {"package": "zlib1g", "version": "1:1.2.13", "architecture": "amd64", "licenses": _names("zlib1g")},
        {"package": "zlib1g", "version": "1:1.2.13", "architecture": "i386", "licenses": _names("zlib1g")},
    ],
    "distributions": [
        {"name": "nvidia-cublas-cu12", "version": "12.8.4.1", "license": "NVIDIA Proprietary Software"},
        {"name": "nvidia-cudnn-cu13", "version": "9.13.0.50", "license": "LicenseRef-NVIDIA-Proprietary"},
        {"name": "torch", "version": "2.15.0", "license": "BSD-3-Clause"},
        {"name": "addone", "version": "0.1", "license": None},
    ],
    "python": "/opt/venv/bin/python",
}


def _sbom() -> dict[str, Any]:
    subject = Subject(repo="127.0.0.1:5000/team/torch", digest="sha256:" + "b" * 64, platform="linux/amd64")
    text = make_sbom(parse_inventory(INVENTORY), subject, {}, datetime(2026, 12, 1, tzinfo=UTC))  # validated in it
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def _by_purl_name(sbom: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["purl"].split("@")[0].split("/")[-1]: c for c in sbom["components"]}


def test_each_debian_package_has_its_license_spdx_where_it_can_be_else_debians_words() -> None:
    found = _by_purl_name(_sbom())
    assert found["zlib1g"]["licenses"] == [{"license": {"id": "Zlib"}}]
    assert "torchyard:license:debian" not in {p["name"] for p in found["zlib1g"].get("properties", [])}  # the same
    assert found["libzstd1"]["licenses"] == [{"expression": "(BSD-3-Clause OR GPL-2.0-only) AND Zlib AND MIT"}]
    debian = {"name": "torchyard:license:debian", "value": "(BSD-3-clause or GPL-2) and zlib and Expat"}
    assert debian in found["libzstd1"]["properties"]
    assert found["libssl3"]["licenses"] == [{"license": {"name": "Apache-2.0 and (Artistic or GPL-1+)"}}]
    assert "licenses" not in found["base-files"]
    assert {"name": "torchyard:license", "value": NOT_RECORDED} in found["base-files"]["properties"]


def test_nvidias_wheels_keep_their_metadatas_license_and_each_distribution_its_own() -> None:
    found = _by_purl_name(_sbom())
    assert found["nvidia-cublas-cu12"]["licenses"] == [{"license": {"name": "NVIDIA Proprietary Software"}}]
    assert found["nvidia-cudnn-cu13"]["licenses"] == [{"expression": "LicenseRef-NVIDIA-Proprietary"}]
    assert found["torch"]["licenses"] == [{"license": {"id": "BSD-3-Clause"}}]
    assert {"name": "torchyard:license", "value": NOT_RECORDED} in found["addone"]["properties"]


def test_the_summary_counts_the_components_with_a_license_and_those_not_recorded() -> None:
    properties = {p["name"]: p["value"] for p in _sbom()["metadata"]["properties"]}
    # 5 Debian entries (zlib1g twice: amd64 and i386), base-files not recorded; 4 distributions, addone not recorded
    assert (properties["torchyard:license:recorded"], properties["torchyard:license:not-recorded"]) == ("7", "2")
