"""What is inside an image, read inside it for its SBOM (builder/trust/sbom.py): every Debian package of the
dpkg status database, every Python distribution the image's `python` sees (the set `pip freeze --all` lists),
and the stack as torch itself reports it.

    python inventory.py [--no-torch]    prints one line: INVENTORY_MARK followed by the JSON object
                                        (--no-torch: the stack is known already, from the smoke suite's report)

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


def _fields(stanza: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in stanza.splitlines():
        if line[:1] in (" ", "\t") or ":" not in line:
            continue  # a continuation line of a long field (Description, Conffiles)
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


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


def inventory(with_torch: bool = True) -> dict[str, Any]:
    dpkg = None
    if os.path.exists(DPKG_STATUS):
        with open(DPKG_STATUS, encoding="utf-8", errors="replace") as status:
            dpkg = parse_dpkg_status(status.read())
    return {
        "schema": SCHEMA,
        "dpkg": dpkg,
        "python": sys.executable,
        "distributions": distributions(),
        "stack": torch_stack() if with_torch else {},
    }


if __name__ == "__main__":
    print(INVENTORY_MARK + json.dumps(inventory("--no-torch" not in sys.argv[1:]), sort_keys=True))
