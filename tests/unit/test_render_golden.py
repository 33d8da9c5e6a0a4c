"""A handful of representative renders, pinned byte for byte in tests/golden/.

A change to a template or to a context function shows up here as a diff to review. When the change is
intended, rewrite the files and commit them with it:

    UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_render_golden.py

The renders use the real matrix.toml and no host settings (the test machines set PIP_CERT), so the files
hold nothing specific to the machine that wrote them.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import Any

import pytest
from render_kit import ROOT, addone, arch, plan

from builder.core.kinds import Strategy
from builder.render.network import CA_ENV_VARS, INDEX_ENV_VAR

GOLDEN = ROOT / "tests" / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


@dataclass(frozen=True)
class Case:
    name: str
    combination: str
    strategy: Strategy
    options: dict[str, Any]
    why: str

    @property
    def path(self) -> str:
        return f"{self.name}.Dockerfile"


CASES = (
    Case(
        "wheels-cu130-sm89-addone",
        "torch2.14.1-cu130-py3.11-debian12",
        Strategy.WHEELS,
        {"archs": (arch("sm_89"),), "extensions": (addone(),)},
        "CUDA 13 wheels: runtime + devel with nvcc from PyPI, one --arch, a real extension built for it",
    ),
    Case(
        "cuda-base-cu124-ubuntu22.04",
        "torch2.5.1-cu124-py3.10-ubuntu22.04",
        Strategy.CUDA_BASE,
        {},
        "nvidia/cuda -base runtime and -cudnn-devel toolchain, with the 12.4.1 image's brand exceptions",
    ),
    Case(
        "wheels-cpu",
        "torch2.14.1-cpu-py3.11-debian12",
        Strategy.WHEELS,
        {},
        "the cpu variant: PyTorch's CPU index, no NVIDIA environment, devel without nvcc",
    ),
    Case(
        "cuda-base-cu118-ubuntu22.04",
        "torch2.0.1-cu118-py3.10-ubuntu22.04",
        Strategy.CUDA_BASE,
        {},
        "an old CUDA 11.8 build: cudnn8 devel image, driver>= clause of the CUDA 11 floor",
    ),
    Case(
        "wheels-cu130-python3.13",
        "torch2.14.1-cu130-py3.13-debian12",
        Strategy.WHEELS,
        {},
        "CUDA 13 on the official python:3.13-slim-bookworm image (not the OS's own Python)",
    ),
    Case(
        "wheels-cpu-arm64",
        "torch2.5.1-cpu-py3.11-debian12-arm64",
        Strategy.WHEELS,
        {},
        "linux/arm64, the docker tier's emulated image: PyPI's aarch64 wheel of 2.5.1 is the CPU build",
    ),
    Case(
        "wheels-cu130-sm90-addone-arm64",
        "torch2.14.1-cu130-py3.11-debian12-arm64",
        Strategy.WHEELS,
        {"archs": (arch("sm_90"),), "extensions": (addone(),)},
        "linux/arm64 CUDA 13 for GH200 (sm_90): the aarch64 CUDA wheels, nvcc from PyPI, an extension",
    ),
    Case(
        "cuda-base-cu130-ubuntu24.04-arm64",
        "torch2.14.1-cu130-py3.12-ubuntu24.04-arm64",
        Strategy.CUDA_BASE,
        {},
        "linux/arm64 on nvidia/cuda (its arm64 image under the same tag): the aarch64 wheels' arch list",
    ),
    Case(
        "wheels-cu126-inference",
        "torch2.14.1-cu126-py3.11-debian12",
        Strategy.WHEELS,
        {},
        "a CUDA 12 torch's inference image: onnxruntime-gpu 1.26.0, the last CUDA 12 release (no devel: no nvcc)",
    ),
)


def _diff(expected: str, actual: str, name: str) -> str:
    lines = difflib.unified_diff(
        expected.splitlines(keepends=True), actual.splitlines(keepends=True), f"golden/{name}", "rendered", n=2
    )
    return "".join(list(lines)[:80])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_render_matches_golden_file(case: Case) -> None:
    rendered = plan(case.combination, case.strategy, **case.options).dockerfile
    path = GOLDEN / case.path
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(rendered)
    assert path.is_file(), f"{path} is missing; create it with UPDATE_GOLDEN=1 (see this module's docstring)"
    expected = path.read_text()
    assert rendered == expected, (
        f"{case.name} ({case.why}) differs from its golden file; if the change is intended, "
        f"rerun with UPDATE_GOLDEN=1 and commit the files:\n{_diff(expected, rendered, case.path)}"
    )


def test_every_golden_file_belongs_to_a_case() -> None:
    # A renamed or dropped case must not leave a stale file behind that nobody compares any more.
    on_disk = sorted(p.name for p in GOLDEN.glob("*.Dockerfile"))
    assert on_disk == sorted(c.path for c in CASES)


def test_golden_files_hold_nothing_host_specific() -> None:
    # Not the checkout (the extension's host directory), not the host's CA bundle (PIP_CERT here), no secret source.
    host_values = [os.environ[name] for name in (*CA_ENV_VARS, INDEX_ENV_VAR) if os.environ.get(name)]
    for case in CASES:
        text = (GOLDEN / case.path).read_text()
        for needle in (str(ROOT), *host_values, "src="):
            assert needle not in text, f"{case.path} contains {needle!r}"


def test_golden_renders_cover_what_the_issue_asks_for() -> None:
    # wheels and cuda-base, runtime and devel, cpu, CUDA 11.8 and CUDA 13: checked on the files themselves.
    texts = {c.name: (GOLDEN / c.path).read_text() for c in CASES}
    no_devel = {"wheels-cu126-inference"}  # CUDA 12 wheels carry no nvcc
    assert all(" AS runtime" in t and (" AS devel" in t) != (n in no_devel) for n, t in texts.items())
    # inference wherever a recorded ONNX Runtime fits: every case, CUDA 11.8 too (onnxruntime-gpu 1.18.1 links
    # libcudart.so.11.0 and libcudnn.so.8, torch 2.0.1+cu118's majors)
    assert [n for n, t in texts.items() if "FROM venv AS inference" not in t] == []
    assert "'onnxruntime-gpu==1.18.1'" in texts["cuda-base-cu118-ubuntu22.04"]
    assert "'onnxruntime-gpu==1.26.0'" in texts["wheels-cu126-inference"]
    assert "'onnxruntime-gpu==1.31.1'" in texts["wheels-cu130-sm89-addone"]
    assert "'onnxruntime==1.32.0'" in texts["wheels-cpu"]
    assert "FROM nvidia/cuda:12.4.1-base-ubuntu22.04 AS os" in texts["cuda-base-cu124-ubuntu22.04"]
    assert "FROM nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04 AS toolchain" in texts["cuda-base-cu118-ubuntu22.04"]
    assert "FROM python:3.13-slim-bookworm AS os" in texts["wheels-cu130-python3.13"]
    assert "https://download.pytorch.org/whl/cpu" in texts["wheels-cpu"]
    assert "NVIDIA_" not in texts["wheels-cpu"]
    assert 'TORCH_CUDA_ARCH_LIST="8.9"' in texts["wheels-cu130-sm89-addone"]
    assert "COPY ext/addone /opt/torchyard/src/addone" in texts["wheels-cu130-sm89-addone"]
    # linux/arm64: the templates do not branch on the platform; the values do (wheel index, arch lists).
    assert "--index-url" not in texts["wheels-cpu-arm64"]  # PyPI's default aarch64 wheel of 2.5.1 is CPU
    assert 'TORCH_CUDA_ARCH_LIST="9.0"' in texts["wheels-cu130-sm90-addone-arm64"]
    assert 'io.torchyard.arch-list="sm_80 sm_90 sm_100 sm_110 sm_120"' in texts["cuda-base-cu130-ubuntu24.04-arm64"]
