"""bench/mutation_undecorate.py: decorated functions made plain for mutmut, the same objects under the same names."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    sys.path.insert(0, str(ROOT / "bench"))  # as when run as a script: its siblings importable
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return module


undecorate: Any = _bench("mutation_undecorate").undecorate

SOURCE = """\
import functools


def outer(f):
    return lambda *a: ("outer", f(*a))


def inner(f):
    return lambda *a: ("inner", f(*a))


@outer
@inner
def both(x):
    return x + 1


class Box:
    @property
    def size(self):
        return 3

    @functools.cached_property
    def area(self):
        return self.size * self.size

    @property
    def name(self):
        return self._name

    @name.setter
    def name(self, value):
        self._name = value

    @staticmethod
    def unit():
        return 1


@outer
def last(x):
    return x"""  # no newline at the end of the file


def test_decorators_become_one_assignment_after_the_def_applied_nearest_first() -> None:
    rewritten = undecorate(SOURCE)
    assert "both = outer(inner(both))\n" in rewritten
    assert "    size = property(size)\n" in rewritten and "    area = functools.cached_property(area)\n" in rewritten
    assert rewritten.endswith("    return x\nlast = outer(last)\n")  # a newline added before it
    # a property with a setter, its setter and a staticmethod stay as they were
    assert "    @property\n    def name(self):" in rewritten and "    @name.setter\n" in rewritten
    assert "    @staticmethod\n    def unit():" in rewritten
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    exec(compile(SOURCE, "before", "exec"), before)
    exec(compile(rewritten, "after", "exec"), after)
    assert after["both"](1) == before["both"](1) == ("outer", ("inner", 2))
    assert after["last"](5) == before["last"](5) == ("outer", 5)
    box = after["Box"]()
    box.name = "b"
    assert (box.size, box.area, box.name, box.unit()) == (3, 9, "b", 1)


def test_a_decorator_over_several_lines_is_left_alone() -> None:
    source = textwrap.dedent("""\
        @register(
            "x",
        )
        def f():
            return 1
        """)
    assert undecorate(source) == source


def _group_files() -> list[Path]:
    mutation = _bench("mutation")
    return sorted({ROOT / f for group in mutation.GROUPS for f in mutation.mutated_files(group)})


def test_every_mutated_module_keeps_no_decorated_function_mutmut_would_skip() -> None:
    kept = {"staticmethod", "classmethod", "overload"}
    for path in _group_files():
        tree = ast.parse(undecorate(path.read_text(encoding="utf-8")))
        bodies = [tree.body] + [n.body for n in tree.body if isinstance(n, ast.ClassDef)]
        for node in (n for body in bodies for n in body if isinstance(n, ast.FunctionDef)):
            names = {ast.unparse(d) for d in node.decorator_list}
            assert not names or names <= kept or any(n.endswith((".setter", ".deleter")) for n in names), (
                f"{path.relative_to(ROOT)}:{node.lineno} {node.name} keeps {names}"
            )


def test_the_smoke_suite_registers_the_same_checks_in_the_same_order_from_the_rewritten_copy(tmp_path: Path) -> None:
    copy = tmp_path / "builder"
    shutil.copytree(ROOT / "builder", copy)
    for path in _group_files():
        target = copy / path.relative_to(ROOT / "builder")
        target.write_text(undecorate(target.read_text(encoding="utf-8")), encoding="utf-8")
    show = (
        "import builder\nfrom builder.smoke import runner\n"
        "print(builder.__file__)\n"
        "print([(c.name, c.gpu, c.timeout, c.func.__name__) for c in runner.load_checks()])"
    )
    runs = []
    for where in (ROOT, tmp_path):  # the folder first on sys.path (`-c` puts the working folder there)
        done = subprocess.run([sys.executable, "-c", show], cwd=where, capture_output=True, text=True, check=True)
        imported, registry = done.stdout.splitlines()
        assert Path(imported).is_relative_to(where)
        runs.append(registry)
    assert runs[0] == runs[1] and "('gpu.compile', True, 300.0, 'compile_gpu')" in runs[0]
