"""Issue 20's inference image in the docker tier: the e2e build (--target all) builds, smoke-tests and pushes it;
its ONNX check passed in the pipeline and fails when ONNX Runtime's output is perturbed; onnxruntime-gpu's CUDA
provider finds every library it links against among the CUDA 13 wheels torch brought (no second CUDA major); its
size against runtime. (gpu.onnx's control flow on simulated GPUs runs in the unit tier, test_smoke_onnx_torch.py:
kept out of here to keep the docker tier's time down.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker as docker_sdk
import pytest
from conftest import E2E
from kit import ROOT, docker

pytestmark = pytest.mark.docker


def _suite_in(image: str, tmp_path: Path, *args: str, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """This checkout's suite in the image with tests/gpu_sim on PYTHONPATH (simulation and faults)."""
    tmp_path.mkdir(exist_ok=True)
    tmp_path.chmod(0o777)
    settings = [item for key, value in env.items() for item in ("-e", f"{key}={value}")]
    run = docker(
        "run", "--rm", "--network", "none", "--shm-size", "2g",
        "-v", f"{ROOT / 'builder' / 'smoke'}:/opt/torchyard-host/smoke:ro",
        "-v", f"{ROOT / 'tests' / 'gpu_sim'}:/opt/torchyard-sim:ro",
        "-v", f"{tmp_path}:/torchyard-out", "-e", "PYTHONPATH=/opt/torchyard-sim", *settings,
        image, "python", "/opt/torchyard-host/smoke", "--json", "/torchyard-out/report.json", *args,
        timeout=900,
    )  # fmt: skip
    assert (tmp_path / "report.json").exists(), run.stdout[-3000:] + run.stderr[-3000:]
    return run.returncode, json.loads((tmp_path / "report.json").read_text())


def test_the_pipeline_built_pushed_and_smoke_tested_the_inference_image(e2e: E2E) -> None:
    ref = e2e.ref("inference")
    assert f"pushed {ref} (sha256:" in e2e.first.out
    data = json.loads((e2e.out_dir / "smoke-inference.json").read_text())
    checks = {c["name"]: c for c in data["checks"]}
    assert data["summary"]["failed"] == 0
    assert checks["onnx.cpu"]["status"] == "passed", checks["onnx.cpu"]
    assert checks["onnx.cpu"]["message"].startswith(
        "torch.onnx.export of the small ResNet (eval), onnxruntime 1.31.1 CPU provider matches eager within"
    )
    assert checks["gpu.onnx"]["status"] == "skipped"  # no GPU here: skipped, never passed
    plan = json.loads((e2e.out_dir / "plan.json").read_text())
    assert plan["targets"]["inference"]["labels"]["io.torchyard.inference"] == (
        # ORT's CUDA provider loads libcurand.so.10, which torch 2.15's cu132 pins leave out: torch's own cuda-toolkit
        "onnx==1.23.2 onnxscript==0.7.2 cuda-toolkit[curand]==13.2.2 onnxruntime-gpu==1.31.1"
    )


def test_onnx_cpu_fails_in_the_image_when_onnx_runtimes_output_is_perturbed(e2e: E2E, tmp_path: Path) -> None:
    faults = {"TORCHYARD_SMOKE_FAULTS": json.dumps(["ort_perturbed"])}
    code, report = _suite_in(e2e.ref("inference"), tmp_path, "--only", "onnx.cpu", env=faults)
    check = report["checks"][0]
    assert (code, check["name"], check["status"]) == (1, "onnx.cpu", "failed")
    assert check["message"].startswith("ONNX Runtime (CPU provider) differs from eager torch by 0.01")


LINKS = """
import glob, json, os, subprocess, onnxruntime
capi = os.path.join(os.path.dirname(onnxruntime.__file__), 'capi')
nvidia = '/opt/venv/lib/python3.13/site-packages/nvidia'
env = dict(os.environ, LD_LIBRARY_PATH=':'.join(sorted(glob.glob(nvidia + '/**/lib', recursive=True)) + [capi]))
ldd = subprocess.run(['ldd', os.path.join(capi, 'libonnxruntime_providers_cuda.so')], env=env,
                     capture_output=True, text=True, check=True).stdout
print(json.dumps({'ldd': ldd, 'cudnn': sorted(glob.glob(nvidia + '/**/libcudnn.so.9', recursive=True))}))
"""


def test_the_cuda_provider_links_only_against_torchs_cuda_13_libraries(e2e: E2E) -> None:
    # What the rule onnxruntime promises: the chosen onnxruntime-gpu's CUDA provider needs no library the cu132 torch
    # wheels lack (libcuda.so.1 is the driver's: the NVIDIA runtime mounts it from the host), and cuDNN 9, which it
    # loads at run time, is there.
    run = docker("run", "--rm", "--network", "none", e2e.ref("inference"), "python", "-c", LINKS, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    lines = [line.strip() for line in found["ldd"].splitlines() if "=>" in line]
    assert [line for line in lines if "not found" in line] == ["libcuda.so.1 => not found"], found["ldd"]
    venv = {line.split()[0]: line.split()[2] for line in lines if "/site-packages/nvidia/" in line}
    assert {"libcublasLt.so.13", "libcudart.so.13"} <= set(venv), found["ldd"]
    # torch 2.15.0+cu132's CUDA libraries are the CUDA 13 toolkit wheels' (nvidia/cu13): nothing from another major
    assert [path for path in venv.values() if "/nvidia/cu13/" not in path] == [], found["ldd"]
    assert found["cudnn"], "no libcudnn.so.9 in the venv"


def test_the_inference_image_is_at_most_a_tenth_larger_than_runtime(e2e: E2E) -> None:
    client = docker_sdk.from_env()
    sizes = {f: client.images.get(e2e.ref(f)).attrs["Size"] for f in ("runtime", "inference")}
    assert sizes["inference"] <= 1.10 * sizes["runtime"], sizes
