"""The image spec is computed once per plan: make_plan makes one ImageSpec, the helpers of render/context.py are
asked each question once (the labels once per flavor), and the modules that read the spec do not call them."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from render_kit import combination, matrix, options

from builder.core.kinds import Flavor, Strategy
from builder.pipeline import plan as plan_module
from builder.render import context, spec, tags

BUILDER = Path(__file__).resolve().parents[2] / "builder"
CU130 = "torch2.14.1-cu130-py3.11-debian12"  # runtime, devel, inference, notebook
CU124 = "torch2.5.1-cu124-py3.11-debian12"  # runtime, inference, notebook with --strategy wheels (no devel)
# The helpers of context.py that answer one question per image (labels answers one per flavor).
ONCE = (
    "archs_for",
    "check_archs",
    "bases",
    "nvcc_pip",
    "toolchain_pip",
    "cuda_home",
    "nvidia_env",
    "os_packages",
    "build_packages",
    "toolchain_packages",
    "torch_index",
    "constraints",
    "user_of",
)
# The modules that read the spec: none of them imports context.py.
READERS = (
    "pipeline/plan.py",
    "pipeline/pipeline.py",
    "pipeline/request.py",
    "publish/items.py",
    "render/tags.py",
    "render/dockerfile_context.py",
)


def _counting(monkeypatch: pytest.MonkeyPatch, module: Any, names: tuple[str, ...], calls: Counter[str]) -> None:
    for name in names:
        real: Callable[..., Any] = getattr(module, name)

        def counted(*args: Any, _name: str = name, _real: Callable[..., Any] = real, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)


@pytest.mark.parametrize(("ident", "flavors"), [(CU130, 4), (CU124, 3)])
def test_make_plan_builds_one_spec_and_asks_each_helper_once(
    monkeypatch: pytest.MonkeyPatch, ident: str, flavors: int
) -> None:
    calls: Counter[str] = Counter()
    _counting(monkeypatch, plan_module, ("image_spec",), calls)
    _counting(monkeypatch, context, (*ONCE, "labels"), calls)
    _counting(monkeypatch, tags, ("extras_id", "image_tags"), calls)
    made = plan_module.make_plan(matrix(), combination(ident), options(user="torch", extra_pip=("numpy<2",)))
    assert len(made.targets) == flavors
    assert calls["image_spec"] == 1
    toolkit = ident == CU130  # CU124 (wheels) has no devel: without its toolkit there is no CUDA home to ask for
    assert {name: calls[name] for name in ONCE} == dict.fromkeys(ONCE, 1) | {"cuda_home": int(toolkit)}
    assert calls["extras_id"] == 1
    assert calls["labels"] == calls["image_tags"] == flavors


def test_the_plan_reads_its_targets_from_the_spec() -> None:
    s = spec.image_spec(matrix(), combination(CU130), options(Strategy.WHEELS))
    made = plan_module.make_plan(matrix(), combination(CU130), options(Strategy.WHEELS))
    assert made.spec == s
    assert [(t.flavor, t.tags, t.labels) for t in made.targets] == [(t.flavor, t.tags, t.labels) for t in s.targets]
    assert made.target(Flavor.DEVEL).manifest.base_image == s.base_image(Flavor.DEVEL)
    assert dict(s.env(Flavor.DEVEL))["CUDA_HOME"] == s.cuda_home
    assert "CUDA_HOME" not in dict(s.env(Flavor.RUNTIME))


def _calls_into_context(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "builder.render.context":
            found.append(f"from builder.render.context import {', '.join(a.name for a in node.names)}")
        elif isinstance(node, ast.ImportFrom) and node.module == "builder.render":
            found += [f"from builder.render import {a.name}" for a in node.names if a.name == "context"]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name == "builder.render.context"]
    return found


@pytest.mark.parametrize("module", READERS)
def test_the_readers_of_the_spec_do_not_ask_the_render_helpers(module: str) -> None:
    assert _calls_into_context(BUILDER / module) == []


def test_the_ast_check_sees_an_import_of_the_helpers() -> None:
    assert _calls_into_context(BUILDER / "render" / "spec.py") == ["from builder.render import context"]
