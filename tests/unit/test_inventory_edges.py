"""Edges of an image's inventory (builder/image/inventory.py): the dpkg status stanzas (continuation lines, epochs,
stanzas without a Status or an Architecture, the fields kept, the order), a distribution's license (the 100
character bound, "None", the classifiers) and its wheel's sha256 from direct_url.json."""

from __future__ import annotations

import email.parser
from email.message import Message

from builder.image.inventory import license_of, parse_dpkg_status, wheel_sha256


def _meta(headers: str) -> Message:
    """Core metadata as importlib.metadata gives it: an email message (headers read case-insensitively)."""
    return email.parser.Parser().parsestr(headers, headersonly=True)


class _Dist:
    def __init__(self, direct_url: str) -> None:
        self.direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        return self.direct_url if name == "direct_url.json" else None


# ---- dpkg ----


def test_a_stanza_without_a_status_is_kept_with_the_fields_it_has() -> None:
    assert parse_dpkg_status("Package: foo\nVersion: 1.0\n") == [{"package": "foo", "version": "1.0"}]


def test_the_fields_kept_are_package_version_architecture_source_and_status() -> None:
    text = (
        "Package: libc6\nStatus: install ok installed\nPriority: optional\nSection: libs\nInstalled-Size: 12988\n"
        "Maintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>\nArchitecture: amd64\nMulti-Arch: same\n"
        "Source: glibc\nVersion: 2.36-9+deb12u10\nDepends: libgcc-s1\nDescription: GNU C Library\n"
    )
    assert parse_dpkg_status(text) == [
        {
            "package": "libc6",
            "status": "install ok installed",
            "architecture": "amd64",
            "source": "glibc",
            "version": "2.36-9+deb12u10",
        }
    ]


def test_continuation_lines_are_skipped_even_with_a_colon_and_the_fields_after_them_are_read() -> None:
    text = (
        "Package: util-linux\n"
        "Status: install ok installed\n"
        "Conffiles:\n"
        " /etc/default/hwclock 0123abcd\n"
        "Version: 2.38.1-5+deb12u3\n"
        "Architecture: amd64\n"
        "Source: util-linux (1:2.38.1-5)\n"
        "Description: miscellaneous system utilities\n"
        " Source: the upstream tarball of kernel.org\n"
        "\tStatus: a continuation line indented with a tab\n"
        " .\n"
        "Homepage: https://www.kernel.org/pub/linux/utils/util-linux/\n"
    )
    assert parse_dpkg_status(text) == [
        {
            "package": "util-linux",
            "status": "install ok installed",
            "version": "2.38.1-5+deb12u3",
            "architecture": "amd64",
            "source": "util-linux (1:2.38.1-5)",
        }
    ]


def test_a_version_with_an_epoch_keeps_it() -> None:
    found = parse_dpkg_status("Package: bsdutils\nStatus: install ok installed\nVersion: 1:2.38.1-5+deb12u3\n")
    assert found == [{"package": "bsdutils", "status": "install ok installed", "version": "1:2.38.1-5+deb12u3"}]


def test_the_order_is_by_package_then_architecture_a_missing_one_first() -> None:
    stanzas = [
        "Package: foo\nArchitecture: i386",
        "Package: foo\nArchitecture: amd64",
        "Package: foo\nArchitecture: X32",  # any value sorts after a missing architecture, even one before "X..."
        "Package: foo",
        "Package: bar\nArchitecture: amd64",
    ]
    found = parse_dpkg_status("\n\n".join(stanzas) + "\n")
    assert [(p["package"], p.get("architecture")) for p in found] == [
        ("bar", "amd64"),
        ("foo", None),
        ("foo", "X32"),
        ("foo", "amd64"),
        ("foo", "i386"),
    ]


# ---- licenses ----


def test_no_license_field_and_no_classifier_is_none() -> None:
    assert license_of(_meta("Name: bare\nVersion: 1.0\n")) is None


def test_a_license_field_of_up_to_100_characters_is_the_license() -> None:
    at_bound, past_it = "L" * 100, "L" * 101
    assert license_of(_meta(f"License: {at_bound}\n")) == at_bound
    assert license_of(_meta(f"License: {past_it}\n")) is None
    classifier = "Classifier: License :: OSI Approved :: MIT License\n"
    assert license_of(_meta(f"License: {past_it}\n{classifier}")) == "MIT License"


def test_a_license_field_saying_none_is_no_license() -> None:
    classifier = "Classifier: License :: OSI Approved :: MIT License\n"
    assert license_of(_meta("License: None\n")) is None
    assert license_of(_meta(f"License: none\n{classifier}")) == "MIT License"


def test_the_license_classifiers_are_joined_with_and_without_their_umbrellas() -> None:
    classifiers = [
        "License :: OSI Approved :: MIT License",
        "License :: OSI Approved",
        "Programming Language :: Python :: 3",
        "License ::",
        "License :: OSI Approved :: Apache Software License",
        "License :: OSI Approved :: MIT License",
    ]
    text = "".join(f"Classifier: {c}\n" for c in classifiers)
    assert license_of(_meta(text)) == "Apache Software License AND MIT License"
    assert license_of(_meta("Classifier: License :: OSI Approved\nClassifier: License ::\n")) is None


# ---- the wheel's sha256 ----


def test_a_legacy_hash_of_another_algorithm_is_no_sha256() -> None:
    assert wheel_sha256(_Dist('{"archive_info": {"hash": "md5=0123456789abcdef0123456789abcdef"}}')) is None
    assert wheel_sha256(_Dist('{"archive_info": {"hash": "sha512=0123456789abcdef"}}')) is None
    assert wheel_sha256(_Dist('{"archive_info": {"hash": "sha256=' + "e" * 64 + '"}}')) == "e" * 64
