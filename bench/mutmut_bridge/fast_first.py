"""pytest plugin for every group of bench/mutation.py: under a mutant, the selected test files run fastest first.

mutmut runs a mutant's tests with `-x` in collection order (alphabetical files), so a mutant caught by a precise
test in a late file (test_rules.py, test_resolve_exact.py) first sat through the slow ones before it
(test_one_chooser.py, test_properties.py, test_render_matrix.py: 45 of the resolve group's 66 s). Files are
ordered by the time their selected tests took in mutmut's own stats run (mutants/mutmut-stats.json). A file whose
tests share a fixture of module or class scope keeps its order, as one block (its first test sets the fixture
up); in any other file each test takes its own place, so a precise test is not queued behind a slow one of the
same file (test_gpu_sim.py opens with the whole suite on two simulated GPUs). A survivor still runs every test;
only a caught mutant ends sooner. Copied into mutmut's checkout as tests/unit/mutmut_fast_first.py and loaded
with `-p`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

STATS = Path("mutmut-stats.json")  # mutmut runs each mutant's pytest in mutants/, beside this file


SHARED = frozenset({"module", "class", "package"})  # set up once for several tests: their order matters


def _shares_fixtures(item: Any) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", None) or {}
    return any(str(getattr(d, "scope", "function")) in SHARED for chain in defs.values() for d in chain)


def _file(item: Any) -> str:
    return str(item.nodeid.split("::", 1)[0])


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", "") or not STATS.is_file():
        return  # the stats and clean runs keep pytest's order (and write the stats this reads)
    durations: dict[str, float] = json.loads(STATS.read_text(encoding="utf-8")).get("duration_by_test", {})
    per_file: dict[str, float] = {}
    blocks: set[str] = set()
    for item in items:
        name = _file(item)
        per_file[name] = per_file.get(name, 0.0) + durations.get(item.nodeid, 0.0)
        if _shares_fixtures(item):
            blocks.add(name)

    def key(item: Any) -> tuple[float, str]:
        name = _file(item)
        if name in blocks:
            return per_file[name], name  # one block, in the file's order (the sort is stable)
        return durations.get(item.nodeid, 0.0), item.nodeid

    items.sort(key=key)
