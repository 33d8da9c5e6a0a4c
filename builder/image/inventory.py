"""What is inside an image, read inside it for its SBOM (builder/trust/sbom.py): every Debian package of the
dpkg status database with the licenses its copyright file names, every Python distribution the image's `python`
sees (the set `pip freeze --all` lists) with its license, and the stack as torch itself reports it.

    python inventory.py [--no-torch]    prints one line: INVENTORY_MARK followed by the JSON object
                                        (--no-torch: the stack is known already, from the smoke suite's report)
    python -B inventory.py --licenses PATH
                                        writes the image's license listing (docs/contract.md) to PATH: each
                                        package and distribution with its license or "not recorded", and counts

Standard library only, Python 3.8 and later: it runs with the Python of the image being described (torchyard
passes this file's text to `python -c`). torch is imported last and may be missing; what cannot be read is
null ("not recorded" in the SBOM), never guessed.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from typing import Any

SCHEMA = 1
INVENTORY_MARK = "TORCHYARD-INVENTORY "
DPKG_STATUS = "/var/lib/dpkg/status"
DOC = "/usr/share/doc"  # DOC/<package>/copyright: Debian Policy 12.5 (multi-arch copies share one folder)
LISTING = 1  # the license listing's format; raise it when a field changes meaning
NOT_RECORDED = "not recorded"
_NAME = re.compile(r"[-_.]+")


def canonical(name: str) -> str:
    return _NAME.sub("-", name).lower()


def parse_dpkg_status(text: str) -> list[dict[str, str]]:
    """Every stanza of a dpkg status file that dpkg-query -W lists (its state is not not-installed)."""
    found = []
    for stanza in re.split(r"\n\s*\n", text):
        fields = _fields(stanza)
        state = fields.get("Status", "").split()
        if not fields.get("Package") or (state and state[-1] == "not-installed"):
            continue
        keep = ("Package", "Version", "Architecture", "Source", "Status")
        found.append({key.lower(): fields[key] for key in keep if key in fields})
    return sorted(found, key=lambda p: (p["package"], p.get("architecture", "")))


def _fields(stanza: str, lower: bool = False) -> dict[str, str]:
    """A deb822 paragraph's fields, each its first line's value; `lower`: names lower-cased (copyright files
    write `files:` as well as `Files:`, deb822 field names are case-insensitive)."""
    fields: dict[str, str] = {}
    for line in stanza.splitlines():
        if line[:1] in (" ", "\t", "#") or ":" not in line:
            continue  # a continuation line of a long field (Description, Conffiles, a license's text), a comment
        key, _, value = line.partition(":")
        fields[key.strip().lower() if lower else key.strip()] = value.strip()
    return fields


def copyright_licenses(text: str) -> list[str] | None:
    """The license short names of a machine-readable copyright file (DEP-5, copyright-format 1.0): the License
    field's first line in its header and Files paragraphs, each once (case aside), in order. None where the file is
    not machine-readable or names none: free-form files say their license in prose, which is not guessed at."""
    paragraphs = [_fields(p, lower=True) for p in re.split(r"\n\s*\n", text.strip())]
    header = paragraphs[0] if paragraphs else {}
    if not any(mark in header.get("format", "") for mark in ("copyright-format", "dep5")):
        return None
    names: dict[str, str] = {}  # standalone License paragraphs (no Files) only hold the texts of these names
    for fields in [header] + [p for p in paragraphs[1:] if "files" in p]:
        name = " ".join(fields.get("license", "").split())
        if name:
            names.setdefault(name.lower(), name)
    return list(names.values()) or None


def debian_license(names: list[str] | None) -> str | None:
    """A package's license as one text: its names joined with "and" (each covers some of its files), an
    alternative ("A or B", DEP-5's comma lists) in parentheses; None where none is recorded."""
    if not names:
        return None
    if len(names) == 1:
        return names[0]
    return " and ".join(f"({n})" if " or " in n.lower() or "," in n else n for n in names)


def package_licenses(package: str, read: dict[str, list[str] | None]) -> list[str] | None:
    """The licenses DOC/<package>/copyright names; `read` keeps each folder's answer (libc6 amd64 and i386 share
    one). dpkg-query's `name:arch` spelling names the same folder."""
    name = package.split(":", 1)[0]
    if name not in read:
        try:
            with open(os.path.join(DOC, name, "copyright"), encoding="utf-8", errors="replace") as found:
                read[name] = copyright_licenses(found.read())
        except OSError:  # no copyright file (a package that ships none, or an image that deleted the docs)
            read[name] = None
    return read[name]


def license_of(meta: Any) -> str | None:
    """PEP 639's License-Expression, else a short License field, else the license classifiers."""
    expression = meta.get("License-Expression")
    if expression:
        return str(expression).strip()
    text = (meta.get("License") or "").strip()
    if text and "\n" not in text and len(text) <= 100 and text.upper() not in ("UNKNOWN", "NONE"):
        return text
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    classifiers = [c for c in classifiers if c not in ("OSI Approved", "")]
    return " AND ".join(sorted(set(classifiers))) or None


def direct_url(dist: Any) -> dict[str, Any]:
    """PEP 610's direct_url.json ({} when the installer wrote none: an install from an index)."""
    try:
        data = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def wheel_tags(dist: Any) -> list[str]:
    """The tags the WHEEL file records (the wheel the distribution was installed from); [] when it has none."""
    text = dist.read_text("WHEEL") or ""
    return sorted(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:"))


def wheel_sha256(dist: Any) -> str | None:
    """The sha256 of the archive a distribution was installed from, where the installer recorded one (PEP 610's
    direct_url.json: URL and file installs). pip records none for an install from an index."""
    data = direct_url(dist)
    info = data.get("archive_info") or {}
    hashes = info.get("hashes") or {}
    legacy = str(info.get("hash") or "")
    value = hashes.get("sha256") or (legacy[7:] if legacy.startswith("sha256=") else None)
    return str(value) if value else None


def distributions() -> list[dict[str, Any]]:
    """Every distribution on sys.path, the first of a name winning (as pip's freeze does)."""
    from importlib import metadata

    seen: dict[str, dict[str, Any]] = {}
    for dist in metadata.distributions():
        meta: Any = dist.metadata  # an email.message.Message underneath (its .get and .get_all)
        name = meta.get("Name")
        if not name or canonical(name) in seen:
            continue
        seen[canonical(name)] = {
            "name": str(name),
            "version": str(dist.version),
            "license": license_of(meta),
            "sha256": wheel_sha256(dist),
            "tags": wheel_tags(dist),
            "local": direct_url(dist).get("url"),
        }
    return sorted(seen.values(), key=lambda d: canonical(d["name"]))


def torch_stack() -> dict[str, Any]:
    """torch's own answers; null for each one it cannot give (no torch, a CPU build, no NCCL)."""
    try:
        torch: Any = importlib.import_module("torch")
    except Exception:
        return {}
    found: dict[str, Any] = {"torch": str(torch.__version__), "cuda": torch.version.cuda}
    found["cudnn"] = _ask(torch.backends.cudnn.version)
    found["nccl"] = _ask(lambda: ".".join(str(p) for p in torch.cuda.nccl.version()))
    # a lambda, not the bound function: a CPU build has no torch._C._cuda_getArchFlags
    found["archs"] = _ask(lambda: torch._C._cuda_getArchFlags())  # noqa: PLW0108
    return found


def _ask(question: Any) -> Any:
    try:
        return question()
    except Exception:
        return None


def debian_packages() -> list[dict[str, Any]] | None:
    """The dpkg status database's packages, each with `licenses` (None: not recorded); None without a database."""
    if not os.path.exists(DPKG_STATUS):
        return None
    with open(DPKG_STATUS, encoding="utf-8", errors="replace") as status:
        packages: list[dict[str, Any]] = list(parse_dpkg_status(status.read()))
    read: dict[str, list[str] | None] = {}
    return [dict(p, licenses=package_licenses(p["package"], read)) for p in packages]


def inventory(with_torch: bool = True) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "dpkg": debian_packages(),
        "python": sys.executable,
        "distributions": distributions(),
        "stack": torch_stack() if with_torch else {},
    }


def license_listing(found: dict[str, Any]) -> dict[str, Any]:
    """The image's license listing from its inventory: sorted as the inventory is, so the same packages give the
    same bytes (the layer that holds it stays content-only, docs/reproducible.md)."""
    debian = None if found["dpkg"] is None else [
        {"name": p["package"], "version": p.get("version", ""), "architecture": p.get("architecture", ""),
         "license": debian_license(p["licenses"]) or NOT_RECORDED}
        for p in found["dpkg"]
    ]  # fmt: skip
    python = [{"name": d["name"], "version": d["version"], "license": d["license"] or NOT_RECORDED}
              for d in found["distributions"]]  # fmt: skip
    return {
        "listing": LISTING,
        "sources": {"debian": f"{DOC}/<package>/copyright, machine-readable (DEP-5) files only",
                    "python": "each distribution's License-Expression, License or license classifiers"},
        "debian": debian,
        "python": python,
        "counts": {"debian": None if debian is None else _counts(debian), "python": _counts(python)},
    }  # fmt: skip


def _counts(entries: list[dict[str, str]]) -> dict[str, int]:
    missing = sum(1 for e in entries if e["license"] == NOT_RECORDED)
    return {"recorded": len(entries) - missing, "not_recorded": missing}


def write_listing(path: str) -> None:
    """The listing as indented JSON with sorted keys; run with `python -B`: no bytecode is left in the image."""
    text = json.dumps(license_listing(inventory(with_torch=False)), indent=2, sort_keys=True) + "\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--licenses"]:
        write_listing(sys.argv[2])
    else:
        print(INVENTORY_MARK + json.dumps(inventory("--no-torch" not in sys.argv[1:]), sort_keys=True))
