"""The child's stand-in for mutmut.stats (see plugin.py): a hit is one line in a file of this process's own."""

from __future__ import annotations

import os


def record_trampoline_hit(name: str, caller: str | None = None) -> None:
    folder = os.environ.get("TORCHYARD_MUTMUT_HITS")
    if folder:
        with open(os.path.join(folder, f"{os.getpid()}.hits"), "a", encoding="utf-8") as hits:
            hits.write(name + "\n")
