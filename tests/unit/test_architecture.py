"""The layers of docs/architecture.md, checked on the import graph: a module may import its own layer and
the layers below, never above; the third-party libraries stay behind their one seam each."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

BUILDER = Path(__file__).resolve().parents[2] / "builder"

# Each layer, lowest first: a package or module of builder/ (by its first name under builder/).
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"builder", "errors", "kinds", "versions", "archs", "names", "env", "redact", "files", "process",
               "extension_dir",
               "safety", "resources", "progress", "provenance", "stage_times", "smoke",  # smoke: stdlib-only
               "image"}),  # image: stdlib-only code the builds run (venv_layers.py)
    frozenset({"matrix"}),
    frozenset({"resolve"}),
    frozenset({"render", "tags", "host"}),
    frozenset({"engine", "net"}),  # engine holds the BuildRequest type plan fills in
    frozenset({"plan", "request", "oci"}),
    frozenset({"context_dir"}),
    frozenset({"registry", "suite", "verify", "image_inspect"}),
    frozenset({"pipeline", "upstream", "multiplatform"}),
    frozenset({"publish"}),
    frozenset({"site"}),
    frozenset({"cli", "__main__"}),
)  # fmt: skip
SEAMS = {"click": {"cli"}, "docker": {"engine", "oci"}, "requests": {"net"}, "jinja2": {"render", "site"}}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "builder"


def _imports() -> Iterator[tuple[str, str, str]]:
    """(importing file, its part, imported module) for every absolute import under builder/."""
    for path in sorted(BUILDER.rglob("*.py")):
        rel = path.relative_to(BUILDER.parent)
        parts = list(rel.with_suffix("").parts)
        part = _part(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                yield str(rel), part, node.module
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    yield str(rel), part, alias.name


def _rank(part: str) -> int:
    for rank, layer in enumerate(LAYERS):
        if part in layer:
            return rank
    raise AssertionError(f"builder/{part} is in no layer of this test (and of docs/architecture.md): place it")


def test_every_part_of_builder_has_a_layer() -> None:
    for _, part, _ in _imports():
        _rank(part)


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = [
        f"{file} imports {module}"
        for file, part, module in _imports()
        if module.startswith("builder.") and _rank(_part(module)) > _rank(part)
    ]
    assert upward == []


@pytest.mark.parametrize("library", sorted(SEAMS))
def test_a_third_party_library_stays_behind_its_seam(library: str) -> None:
    outside = [f"{file} imports {module}" for file, part, module in _imports()
               if module.split(".")[0] == library and part not in SEAMS[library]]  # fmt: skip
    assert outside == []
