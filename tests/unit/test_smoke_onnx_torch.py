"""The inference checks (issue 20) on real torch and ONNX Runtime (.venv-torch: torch's CPU wheel, onnx, onnxscript,
onnxruntime): onnx.cpu exports the small ResNet and ORT's CPU provider matches eager; it fails when ORT's output is
perturbed (tests/gpu_sim/torchyard_ort_sim.py). gpu.onnx on simulated GPUs (ORT claims the CUDA provider and runs on
the CPU): it passes, fails when ORT falls back to the CPU provider, and is skipped, never passed, without a GPU.
Like test_smoke_workflows_torch.py, these tests start processes (the suite, one check).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sim_kit import H100, check, cpu_suite, needs_torch, python_with_torch, sim, torch_python

pytestmark = needs_torch


def _has_onnxruntime() -> bool:
    """onnxruntime and onnx in the torch Python's venv (looked for, not imported: collection starts no process)."""
    python = torch_python()
    if python is None:
        return False
    venv = Path(python).parent.parent
    return all(any(venv.glob(f"lib/python3*/site-packages/{name}/__init__.py")) for name in ("onnxruntime", "onnx"))


needs_ort = pytest.mark.skipif(
    not _has_onnxruntime(), reason="no onnxruntime/onnx in .venv-torch (scripts/setup installs them)"
)


def _checks(report: dict[str, object]) -> dict[str, tuple[str, str]]:
    checks = report["checks"]
    assert isinstance(checks, list)
    return {c["name"]: (c["status"], c["message"]) for c in checks}


@needs_ort
def test_onnx_export_and_the_cpu_provider_match_eager_and_the_gpu_part_is_skipped_without_a_gpu(
    tmp_path: Path,
) -> None:
    code, report = cpu_suite(tmp_path, "--only", "onnx.cpu", "--only", "gpu.onnx")
    checks = _checks(report)
    assert checks["onnx.cpu"][0] == "passed", checks
    assert checks["onnx.cpu"][1].startswith("torch.onnx.export of the small ResNet (eval), onnxruntime ")
    assert "CPU provider matches eager within" in checks["onnx.cpu"][1]
    assert checks["gpu.onnx"] == ("skipped", "CPU build of torch")
    assert code == 0
    observed = report["observed"]
    assert isinstance(observed, dict)
    assert observed["onnx_cpu"]["max_difference"] <= 1e-4


@needs_ort
def test_onnx_cpu_fails_when_onnx_runtimes_output_is_perturbed(tmp_path: Path) -> None:
    code, report = cpu_suite(tmp_path, "--only", "onnx.cpu", faults=("ort_perturbed",))
    status, message = _checks(report)["onnx.cpu"]
    assert (code, status) == (1, "failed")
    assert message.startswith("ONNX Runtime (CPU provider) differs from eager torch by 0.01"), message
    assert message.endswith("(allowed 0.0001)")


@needs_ort
def test_gpu_onnx_on_simulated_gpus_puts_cuda_first_matches_and_times_three_ways(tmp_path: Path) -> None:
    found = check("gpu.onnx", sim([H100]), tmp_path)
    assert found["status"] == "passed", found["message"]
    assert found["message"].startswith("CUDA provider first (CUDAExecutionProvider, CPUExecutionProvider); matches")
    timings = found["observed"]["onnx_gpu"]["ms_per_batch"]
    assert sorted(timings) == ["eager_amp_fp16", "eager_fp32", "onnxruntime_cuda"]
    assert all(ms > 0 for ms in timings.values())
    assert found["settings_after"] == found["settings_before"]


@needs_ort
def test_gpu_onnx_fails_when_onnx_runtime_falls_back_to_the_cpu_provider(tmp_path: Path) -> None:
    found = check("gpu.onnx", sim([H100], faults=("ort_cpu_fallback",)), tmp_path)
    assert found["status"] == "failed"
    assert found["message"].startswith(
        "ONNX Runtime fell back to CPUExecutionProvider (session providers: ['CPUExecutionProvider']; available: "
    ), found["message"]


@needs_ort
def test_gpu_onnx_times_per_batch_and_its_amp_run_is_fp16(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    found = check("gpu.onnx", sim([H100], event_seconds=0.001, record=str(record)), tmp_path)
    assert found["status"] == "passed", found["message"]
    timings = found["observed"]["onnx_gpu"]["ms_per_batch"]
    # every CUDA-event interval lasts 1 ms in the simulation: 1 ms over the small run's 3 batches
    assert timings["eager_fp32"] == pytest.approx(1.0 / 3) and timings["eager_amp_fp16"] == pytest.approx(1.0 / 3)
    assert timings["onnxruntime_cuda"] != pytest.approx(1.0 / 3)  # ORT returns host arrays: the host clock times it
    observed = found["observed"]["onnx_gpu"]
    providers, difference = ["CUDAExecutionProvider", "CPUExecutionProvider"], observed["max_difference"]
    assert observed == {"providers": providers, "max_difference": difference, "ms_per_batch": timings}
    assert found["message"] == (
        f"CUDA provider first ({', '.join(providers)}); matches eager within {difference:.1e} (allowed 0.001); per "
        f"batch of 4: onnxruntime_cuda {timings['onnxruntime_cuda']:.2f} ms, eager_fp32 0.33 ms, eager_amp_fp16 0.33 ms"
    )
    products = [json.loads(line) for line in record.read_text().splitlines()]
    inputs = [p["dtypes"][0] for p in products if p["op"] == "matmul" and p["gpus"][0] is not None]
    # the classifier on the GPU: the comparison, then a warm-up and 3 timed batches in fp32, 1 + 3 under autocast
    assert (inputs.count("torch.float32"), inputs.count("torch.float16"), len(inputs)) == (5, 4, 9)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.jsonl"]  # the ONNX file went to a private folder


ERRORS = """
import json, tempfile
import numpy, onnx, torch
from builder.smoke import checks_onnx as o
from builder.smoke.framework import Failed

def failed(call, *args):
    try:
        call(*args)
    except Failed as exc:
        return str(exc)

def broken(*args, **kwargs):
    raise RuntimeError("x" * 700)

def rejects(path):
    raise ValueError("y" * 700)

torch.onnx.export, onnx.checker.check_model = broken, rejects
print(json.dumps({
    "export": failed(o.export, tempfile.mkdtemp(), o.CPU_SHAPE),
    "checker": failed(o._checked, "model.onnx"),
    "shape": failed(o.largest_difference, numpy.zeros((2, 3)), numpy.zeros((3, 2))),
    "at_tolerance": o.compare(numpy.zeros(2), numpy.array([0.0, 0.5]), 0.5, "x"),
}))
"""


@needs_ort
def test_the_onnx_checks_failures_name_the_exporter_the_checker_and_the_shapes(tmp_path: Path) -> None:
    said = json.loads(python_with_torch(ERRORS, sim([]), tmp_path).strip().splitlines()[-1])
    assert said["export"] == ("torch.onnx.export of the small ResNet failed: RuntimeError: " + "x" * 700)[:600]
    assert said["checker"] == ("onnx.checker rejects the exported model: " + "y" * 700)[:600]
    assert said["shape"] == "ONNX Runtime's output has shape [2, 3], eager torch's [3, 2]"
    assert said["at_tolerance"] == 0.5  # a difference of exactly the tolerance passes


def _sessions(record: Path) -> list[object]:
    return [e["providers"] for e in map(json.loads, record.read_text().splitlines()) if e.get("op") == "ort_session"]


@needs_ort
def test_onnx_cpu_asks_ort_for_its_cpu_provider_on_a_gpu_image_too_and_puts_the_threads_back(tmp_path: Path) -> None:
    # onnxruntime-gpu would start a session without providers on CUDA (or, before 1.10, refuse to start one)
    record = tmp_path / "record.jsonl"
    found = check("onnx.cpu", sim([H100], record=str(record)), tmp_path)
    assert found["status"] == "passed", found["message"]
    assert _sessions(record) == [["CPUExecutionProvider"]]
    made = [e["torch_threads"] for e in map(json.loads, record.read_text().splitlines()) if e["op"] == "ort_session"]
    assert made == [1]  # torch on one thread while the session is made and run (drive.py set 3)
    assert found["settings_after"] == found["settings_before"]  # the check runs torch on one thread, then restores
    observed = found["observed"]["onnx_cpu"]
    version = python_with_torch("import onnxruntime; print(onnxruntime.__version__)", sim([]), tmp_path).strip()
    assert observed == {"onnxruntime": version, "max_difference": observed["max_difference"]}
    assert found["message"] == (
        f"torch.onnx.export of the small ResNet (eval), onnxruntime {version} CPU provider matches eager within "
        f"{observed['max_difference']:.1e} (allowed 0.0001)"
    )


@needs_ort
def test_gpu_onnx_asks_for_cuda_then_cpu_and_a_wrong_answer_names_the_cuda_provider(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    assert check("gpu.onnx", sim([H100], record=str(record)), tmp_path)["status"] == "passed"
    assert _sessions(record) == [["CUDAExecutionProvider", "CPUExecutionProvider"]]
    found = check("gpu.onnx", sim([H100], faults=("ort_perturbed",)), tmp_path)
    assert found["status"] == "failed"
    expected = r"ONNX Runtime \(CUDA provider\) differs from eager torch by 0\.01\d* \(allowed 0\.001\)"
    assert re.fullmatch(expected, found["message"]), found["message"]


NO_ORT = """
import json, os, sys
# an onnxruntime that cannot be imported, ahead of the real one: as in an image without it
os.makedirs("hide/onnxruntime")
with open("hide/onnxruntime/__init__.py", "w") as handle:
    handle.write("raise ImportError('No module named onnxruntime')")
sys.path.insert(0, os.path.abspath("hide"))
from builder.smoke.expect import Expectations
from builder.smoke.framework import Context
from builder.smoke.runner import load_checks, run_one

checks = {c.name: c for c in load_checks()}
said = {}
for flavor in ("runtime", "inference"):
    ctx = Context(expect=Expectations(flavor=flavor), arch=None, require_gpu=True)
    said[flavor] = [[r.status, r.message] for r in (run_one(checks[n], ctx) for n in ("onnx.cpu", "gpu.onnx"))]
print(json.dumps(said))
"""


@needs_ort
def test_without_onnxruntime_both_checks_skip_but_an_inference_image_fails(tmp_path: Path) -> None:
    said = json.loads(python_with_torch(NO_ORT, sim([H100]), tmp_path).strip().splitlines()[-1])
    skipped = ["skipped", "no onnxruntime (not an inference image)"]
    failed = ["failed", "an inference image without a working onnxruntime: No module named onnxruntime"]
    assert said == {"runtime": [skipped, skipped], "inference": [failed, failed]}


@needs_ort
def test_gpu_onnx_at_full_size_times_batches_of_32(tmp_path: Path) -> None:
    found = check("gpu.onnx", sim([H100]), tmp_path, full=True)
    assert found["status"] == "passed", found["message"]
    assert "; per batch of 32: onnxruntime_cuda " in found["message"], found["message"]
