"""bench/mutation.py --rerun: an earlier run's folder brought up to the checkout's tests, refused once a mutated
file changed (its mutants would be numbered anew)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_mutation_undecorate import _bench

bench = _bench("mutation")


def _checkout(root: Path) -> None:
    files = {
        "builder/x.py": "def f() -> int:\n    return 1\n",
        "builder/y.py": "def g() -> int:\n    return 2\n",
        "tests/unit/test_x.py": "from builder.x import f\n\n\ndef test_f() -> None:\n    assert f() == 1\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(root)], check=True)


def test_a_rerun_takes_the_checkouts_tests_and_unmutated_code_and_refuses_a_changed_mutated_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root, work = tmp_path / "checkout", tmp_path / "work"
    _checkout(root)
    monkeypatch.setattr(bench, "ROOT", root)
    group = bench.Group("g/x", ("builder/x.py",))
    never = f"{work / 'g-x'} holds no earlier run of g/x (run it once without --rerun)"
    assert bench.refresh(group, work / "g-x") == never
    folder = bench.prepare(group, work)
    assert folder == work / "g-x"
    for name in ("builder/x.py", "builder/y.py", "tests/unit/test_x.py"):  # as mutmut leaves its copy
        (folder / "mutants" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "mutants" / name).write_text("# mutmut's copy\n", encoding="utf-8")
    (root / "tests/unit/test_new.py").write_text("from builder import x\n", encoding="utf-8")
    (root / "builder/y.py").write_text("def g() -> int:\n    return 3\n", encoding="utf-8")
    assert bench.refresh(group, folder) is None
    for base in (folder, folder / "mutants"):
        assert (base / "tests/unit/test_new.py").read_text(encoding="utf-8") == "from builder import x\n"
        assert (base / "builder/y.py").read_text(encoding="utf-8").endswith("return 3\n")
    assert (folder / "mutants/builder/x.py").read_text(encoding="utf-8") == "# mutmut's copy\n"  # the mutants kept
    assert "    tests/unit/test_new.py" in (folder / "setup.cfg").read_text(encoding="utf-8").splitlines()
    (root / "builder/x.py").write_text("def f() -> int:\n    return 2\n", encoding="utf-8")
    assert bench.refresh(group, folder) == (
        f"builder/x.py changed since the run in {folder}: its mutants are numbered anew; run without --rerun"
    )


def test_a_rerun_takes_the_mutants_that_lived_or_had_no_test() -> None:
    listing = (
        "    builder.x.x_f__mutmut_1: killed\n"
        "    builder.x.x_f__mutmut_2: survived\n"
        "    builder.x.x_f__mutmut_3: no tests\n"
        "    builder.x.xǁCǁm__mutmut_1: suspicious\n"
        "    builder.x.x_f__mutmut_4: timeout\n"
        "    builder.x.x_g__mutmut_1: not checked\n"
    )
    assert bench.named(listing, "survived") == ["builder.x.x_f__mutmut_2"]
    assert bench.named(listing, "survived", "no tests", "suspicious") == [
        "builder.x.x_f__mutmut_2",
        "builder.x.x_f__mutmut_3",
        "builder.x.xǁCǁm__mutmut_1",
    ]
