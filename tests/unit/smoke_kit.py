"""Helpers for the smoke-suite tests: a Context from a manifest, one check run in-process, files read from memory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from fake_torch import manifest

from builder.smoke.expect import load
from builder.smoke.framework import Check, Context, Result
from builder.smoke.runner import load_checks, run_one

CHECKS: dict[str, Check] = {c.name: c for c in load_checks()}
NO_FLAGS: dict[str, str | None] = {}


def context(tmp_path: Path, *, arch: str | None = None, require_gpu: bool = False, **changes: Any) -> Context:
    """A Context expecting manifest(**changes); a change to None removes nothing, it sets null."""
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest(**changes)))
    return Context(expect=load(str(path), NO_FLAGS), arch=arch, require_gpu=require_gpu)


def run(name: str, ctx: Context) -> Result:
    return run_one(CHECKS[name], ctx)


def outcome(name: str, ctx: Context) -> tuple[str, str]:
    result = run(name, ctx)
    return result.status, result.message


@contextmanager
def files(monkeypatch: pytest.MonkeyPatch, module: Any, contents: dict[str, str | None]) -> Iterator[None]:
    """`open` in `module` reads these paths from memory (None: the file is missing); other paths as they are."""
    real_open = open

    def fake_open(path: str, *args: Any, **kwargs: Any) -> Any:
        if path in contents:
            text = contents[path]
            if text is None:
                raise FileNotFoundError(path)
            return StringIO(text)
        return real_open(path, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(module, "open", fake_open, raising=False)
        yield
