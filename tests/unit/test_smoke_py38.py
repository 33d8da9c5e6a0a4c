"""The in-image suite (and the GPU simulation that runs inside images) keeps to the oldest Python the matrix
builds, 3.8 (torch 1.13's images): its syntax, the standard library it imports, and the APIs it calls.

No Python 3.8 exists on this machine (Debian 12 ships 3.11, and no other can be installed here), so three
checks stand in for one: the parser in 3.8 mode, vermin (PyPI; the minimum version of every stdlib module,
function and argument used), and what neither sees because it needs the types: str.removeprefix/removesuffix,
`|` on dicts, builtin generics subscripted at run time, zip(strict=), dataclass(kw_only=/slots=).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IN_IMAGE = [
    *sorted((ROOT / "builder" / "smoke").glob("*.py")),
    *sorted((ROOT / "builder" / "image").glob("*.py")),  # the build stage's venv_layers.py
    *sorted((ROOT / "tests" / "gpu_sim").glob("*.py")),
]
OLDEST = (3, 8)
THIRD_PARTY = {
    "torch",
    "torchvision",
    "torchaudio",
    "triton",
    "torchyard_gpu_sim",
    "torchyard_gpu_sim_mode",
    "torchyard_faults",
    "torchyard_ort_sim",
    "torchyard_after_import",
    # the inference checks (checks_onnx.py): what the inference image carries, imported inside the checks, which
    # skip where onnxruntime is missing (runtime, devel)
    "onnx",
    "onnxruntime",
    "numpy",
    # the notebook checks (checks_notebook.py): jupyter_client comes with the notebook image's ipykernel, imported
    # inside a check that runs only in a notebook image
    "jupyter_client",
    "builder",
    "pip",  # image/pip_guard.py is the venv's pip launcher: it runs in the venv that holds pip
}
NEWER_DICT_OPERANDS = {"asdict", "vars", "dict"}
GENERICS = {"dict", "list", "tuple", "set", "frozenset", "type"}


def problems(source: str) -> list[str]:
    """What 3.8 lacks and only the code's meaning reveals (line: what)."""
    tree = ast.parse(source, feature_version=OLDEST)
    annotations = {id(n) for node in ast.walk(tree) for n in ast.walk(_annotation(node))}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("removeprefix", "removesuffix"):
            found.append(f"{node.lineno}: str.{node.attr} (3.9)")
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.BitOr)
            and any(map(_dictish, (node.left, node.right)))
        ):
            found.append(f"{node.lineno}: dict | dict (3.9)")
        if isinstance(node, ast.Subscript) and id(node) not in annotations and _name(node.value) in GENERICS:
            found.append(f"{node.lineno}: {_name(node.value)}[...] at run time (3.9)")
        if isinstance(node, ast.Call) and _name(node.func) in ("zip", "dataclass"):
            late = [k.arg for k in node.keywords if k.arg in ("strict", "kw_only", "slots")]
            found += [f"{node.lineno}: {_name(node.func)}({k}=) (3.10)" for k in late]
    return found


def _annotation(node: ast.AST) -> ast.AST:
    if isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation is not None:
        return node.annotation
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
        return node.returns
    return ast.Pass()


def _name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _dictish(node: ast.AST) -> bool:
    return isinstance(node, (ast.Dict, ast.DictComp)) or (
        isinstance(node, ast.Call) and _name(node.func) in NEWER_DICT_OPERANDS
    )


@pytest.mark.parametrize("path", IN_IMAGE, ids=[p.name for p in IN_IMAGE])
def test_parses_as_python_3_8_and_uses_nothing_newer(path: Path) -> None:
    source = path.read_text()
    assert (
        "from __future__ import annotations" in source or "annotations" not in source or path.name == "sitecustomize.py"
    )
    assert problems(source) == []


@pytest.mark.parametrize("path", IN_IMAGE, ids=[p.name for p in IN_IMAGE])
def test_imports_only_the_standard_library_and_torch(path: Path) -> None:
    tree = ast.parse(path.read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {
        n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level
    }
    outside = sorted(n for n in names if n not in sys.stdlib_module_names and n not in THIRD_PARTY)
    assert outside == []


def test_vermin_finds_nothing_newer_than_3_8() -> None:
    argv = [
        str(Path(sys.executable).with_name("vermin")),
        "-t=3.8-",
        "--no-tips",
        "--violations",
        "--no-parse-comments",
    ]
    done = subprocess.run([*argv, *map(str, IN_IMAGE)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "snippet",
    [
        "number = wanted.removeprefix('sm_')",  # what devel.nvcc did
        "row = asdict(r) | {'seconds': 1}",  # what report.as_json did
        "Pairs = list[tuple[int, int]]",
        "pairs = zip(a, b, strict=True)",
        "@dataclass(kw_only=True)\nclass A:\n    x: int",
    ],
)
def test_the_checker_catches_what_broke_the_oldest_images(snippet: str) -> None:
    assert problems(snippet) != []


def test_annotations_are_not_run_time_uses() -> None:
    assert (
        problems(
            "from __future__ import annotations\ndef f(x: list[int]) -> dict[str, int]:\n    y: set[int] = set()\n"
        )
        == []
    )


def test_syntax_newer_than_3_8_is_refused() -> None:
    with pytest.raises(SyntaxError):
        problems("with (open('a') as a, open('b') as b):\n    pass\n")
    with pytest.raises(SyntaxError):
        problems("match x:\n    case 1:\n        pass\n")
