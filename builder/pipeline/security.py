"""Debian / Ubuntu packages of an image with a pending update from the distribution's security suite.

What the image holds is read from it (/var/lib/dpkg/status, os-release: no container runs); what the security
suite offers is its Packages index (bookworm-security, jammy-security ...), fetched from the distribution's
archive and checked against the sha256 its InRelease file lists. A package whose security suite holds a newer
version than the image (dpkg's comparison) has a pending security update.
"""

from __future__ import annotations

import hashlib
import lzma
from dataclasses import dataclass

from builder.core.debversion import compare
from builder.core.errors import UpstreamError
from builder.net.http import Http

# Where each distribution publishes its security suite, and the components images install from.
SECURITY_ARCHIVES = {
    "debian": ("http://deb.debian.org/debian-security", ("main",)),
    "ubuntu": ("http://security.ubuntu.com/ubuntu", ("main", "restricted", "universe", "multiverse")),
}
PORTS = {"ubuntu": "http://ports.ubuntu.com/ubuntu-ports"}  # Ubuntu's security suite for arm64
DPKG_ARCH = {"linux/amd64": "amd64", "linux/arm64": "arm64"}
INDEX_LIMIT = 64 << 20


@dataclass(frozen=True)
class DebPackage:
    name: str
    version: str
    source: str  # the source package (openssl for libssl3)


@dataclass(frozen=True)
class Pending:
    package: str
    source: str
    installed: str
    candidate: str  # the security suite's version
    suite: str  # bookworm-security


@dataclass(frozen=True)
class Suite:
    archive: str
    name: str  # bookworm-security
    components: tuple[str, ...]
    arch: str  # amd64


def stanzas(text: str) -> list[dict[str, str]]:
    """Deb822 paragraphs (dpkg status, Packages, InRelease's body) as field -> value (continuations joined)."""
    found: list[dict[str, str]] = []
    current: dict[str, str] = {}
    last = ""
    for line in text.splitlines():
        if not line.strip():
            if current:
                found.append(current)
            current, last = {}, ""
        elif line[0] in " \t" and last:
            current[last] += "\n" + line.strip()
        elif ":" in line:
            last, _, value = line.partition(":")
            current[last] = value.strip()
    if current:
        found.append(current)
    return found


def installed_packages(status: str) -> tuple[DebPackage, ...]:
    """The packages dpkg calls installed, with their source package."""
    found = []
    for entry in stanzas(status):
        if entry.get("Status", "").split()[-1:] != ["installed"] or "Package" not in entry:
            continue
        source = entry.get("Source", entry["Package"]).split(" ")[0]
        found.append(DebPackage(entry["Package"], entry.get("Version", ""), source))
    return tuple(sorted(found, key=lambda p: p.name))


def os_release(text: str) -> dict[str, str]:
    pairs = (line.partition("=") for line in text.splitlines() if "=" in line and not line.startswith("#"))
    return {key.strip(): value.strip().strip('"') for key, _, value in pairs}


def suite_of(release: dict[str, str], platform: str) -> Suite | str:
    """The security suite of the image's distribution, or why there is none to ask."""
    family, codename = release.get("ID", ""), release.get("VERSION_CODENAME", "")
    arch = DPKG_ARCH.get(platform)
    if family not in SECURITY_ARCHIVES or not codename or arch is None:
        return f"no security suite known for {release.get('PRETTY_NAME') or family or 'this OS'} on {platform}"
    archive, components = SECURITY_ARCHIVES[family]
    if family in PORTS and arch != "amd64":
        archive = PORTS[family]
    return Suite(archive, f"{codename}-security", components, arch)


def newest(packages_index: str) -> dict[str, str]:
    """Package -> the highest version a Packages index holds."""
    best: dict[str, str] = {}
    for entry in stanzas(packages_index):
        name, version = entry.get("Package"), entry.get("Version")
        if name and version and (name not in best or compare(version, best[name]) > 0):
            best[name] = version
    return best


def pending(installed: tuple[DebPackage, ...], offered: dict[str, str], suite: str) -> tuple[Pending, ...]:
    return tuple(
        Pending(p.name, p.source, p.version, offered[p.name], suite)
        for p in installed
        if p.name in offered and compare(offered[p.name], p.version) > 0
    )


def fetch_suite(http: Http, suite: Suite) -> dict[str, str]:
    """Package -> newest version over the suite's components; UpstreamError when the archive cannot be read or
    an index does not match the hash its InRelease lists."""
    base = f"{suite.archive}/dists/{suite.name}"
    release = _get(http, f"{base}/InRelease")
    hashes = release_hashes(release.decode("utf-8", "replace"))
    offered: dict[str, str] = {}
    for component in suite.components:
        path = f"{component}/binary-{suite.arch}/Packages.xz"
        if path not in hashes:
            raise UpstreamError(f"{base}/InRelease lists no {path}")
        data = _get(http, f"{base}/{path}")
        if hashlib.sha256(data).hexdigest() != hashes[path]:
            raise UpstreamError(f"{base}/{path}: sha256 differs from the one its InRelease lists")
        for name, version in newest(lzma.decompress(data).decode("utf-8", "replace")).items():
            if name not in offered or compare(version, offered[name]) > 0:
                offered[name] = version
    return offered


def release_hashes(text: str) -> dict[str, str]:
    """The SHA256 section of a Release / InRelease file: path -> sha256."""
    found: dict[str, str] = {}
    for entry in stanzas(text):
        for line in entry.get("SHA256", "").splitlines():
            parts = line.split()
            if len(parts) == 3:
                found[parts[2]] = parts[0]
    return found


def _get(http: Http, url: str) -> bytes:
    reply = http.get(url, limit=INDEX_LIMIT)
    if not reply.ok:
        raise UpstreamError(f"{url}: HTTP {reply.status}")
    return reply.body
