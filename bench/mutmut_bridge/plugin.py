"""pytest plugin for bench/mutation.py's groups whose code runs in a child Python (the smoke checks under real
torch: tests/unit/sim_kit.py starts .venv-torch's interpreter). mutmut learns which tests reach a function from
the hits its trampolines record in the test process; a child's hits die with the child. The child's `mutmut` is
the stand-in bench/mutation.py writes into tests/gpu_sim (stats.py below: each hit appended to a file in
$TORCHYARD_MUTMUT_HITS); after each test this plugin hands those hits to mutmut, before mutmut files them
under the test. Copied into mutmut's checkout as tests/unit/mutmut_bridge_plugin.py and loaded with `-p`.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

HITS = Path(tempfile.mkdtemp(prefix="torchyard-mutmut-hits-"))
os.environ["TORCHYARD_MUTMUT_HITS"] = str(HITS)  # children inherit it (sim_kit passes os.environ on)


@pytest.hookimpl(tryfirst=True)  # before mutmut's own teardown hook reads its hits
def pytest_runtest_teardown(item: Any, nextitem: Any) -> None:
    state = importlib.import_module("mutmut.state").state  # the running mutmut's (an optional extra: no stubs)
    for found in HITS.glob("*.hits"):
        names = found.read_text(encoding="utf-8").split()
        found.unlink()
        state()._stats.update(names)
