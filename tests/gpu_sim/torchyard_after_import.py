"""Patch a module right after its own import has finished: the one import hook the simulations share (torch in
torchyard_gpu_sim, onnxruntime in torchyard_ort_sim). Test-only; standard library; runs in the images
(Python >= 3.8)."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import types
from typing import Any, Callable


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, patch: Callable[[Any], None]) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # once: the real finders find it now
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        original = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            original(module)
            self.patch(module)

        loader.exec_module = exec_module
        return spec


def after_import(name: str, patch: Callable[[Any], None]) -> None:
    """`patch(module)` now if `name` is imported already, else right after its import."""
    if name in sys.modules:
        patch(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, patch))
