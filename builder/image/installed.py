"""What a Python environment holds, as JSON on stdout: run inside an image by `torchyard lock export IMAGE`
(`python -c <this file>`), so the lock is made from what the image has, not from what its build asked for.

Every distribution the interpreter sees (what `pip freeze --all` lists), with its version, the tags its
WHEEL file records (the wheel it was installed from), its INSTALLER and its direct_url.json (a local file or
a URL rather than an index). Standard library only, Python 3.8 and later.
"""

from __future__ import annotations

import json
import platform
import re
import sys
from importlib import metadata
from typing import Any

_NAME = re.compile(r"[-_.]+")


def _read(dist: Any, name: str) -> str:
    try:
        return dist.read_text(name) or ""
    except OSError:
        return ""


def describe(dists: list[Any]) -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for dist in dists:
        name = _NAME.sub("-", str(dist.metadata["Name"])).lower()
        wheel = _read(dist, "WHEEL")
        tags = sorted(line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:"))
        direct = _read(dist, "direct_url.json")
        found.setdefault(
            name,
            {
                "name": name,
                "version": str(dist.version),
                "tags": tags,
                "installer": _read(dist, "INSTALLER").strip() or None,
                "direct_url": json.loads(direct) if direct.strip() else None,
            },
        )
    return [found[name] for name in sorted(found)]


def main() -> int:
    report = {
        "schema": 1,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "prefix": sys.prefix,
        "dists": describe(list(metadata.distributions())),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
