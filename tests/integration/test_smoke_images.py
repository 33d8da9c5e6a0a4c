"""Issues 5 and 11 in the docker tier: the suite in the e2e images (runtime and devel, new checks included),
a wrong expectation, GPU checks without a GPU, every GPU check's real code on simulated GPUs inside the images
(tests/gpu_sim, on the torch the images carry), /dev/shm and /dev/nvidia* failures, and an image torchyard did
not build."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import E2E
from kit import ROOT, docker, torchyard

pytestmark = pytest.mark.docker


def _report(path: Path) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in json.loads(path.read_text())["checks"]}


@pytest.mark.parametrize("flavor", ["runtime", "devel"])
def test_the_pipeline_ran_the_suite_and_it_passed_without_gpu_checks(e2e: E2E, flavor: str) -> None:
    data = json.loads((e2e.out_dir / f"smoke-{flavor}.json").read_text())
    checks = {c["name"]: c for c in data["checks"]}
    assert data["summary"]["failed"] == 0
    assert all(c["status"] == "skipped" for name, c in checks.items() if name.startswith("gpu."))
    must_pass = [
        "version.torch",
        "version.cudnn",
        "version.nccl",
        "arch.torch",
        "arch.extensions",
        "libs.cuda",
        "import.torchvision",
        "import.torchaudio",
        "import.extensions",
        "train.cpu",
        "dataloader",
        "compile.cpu",  # Inductor compiles C++ in the image: the runtime images carry g++ and Python.h
        "ddp.cpu",  # issue 20: torchrun, 2 gloo ranks
        "determinism.cpu",
        "profiler.cpu",
    ]
    assert [n for n in must_pass if checks[n]["status"] != "passed"] == []
    assert (checks["devel.nvcc"]["status"] == "passed") == (flavor == "devel")
    assert data["seconds"] < 90


def test_a_manifest_claiming_another_cudnn_fails_naming_the_mismatch(e2e: E2E, tmp_path: Path) -> None:
    out = tmp_path / "wrong.json"
    run = torchyard(
        "smoke", e2e.ref("runtime"), "--only", "version.", "--expect-value", "cudnn=9.1.0.70", "--report", str(out)
    )
    assert run.code == 4, run.text  # the README's code for a failed smoke suite
    checks = _report(out)
    assert checks["version.cudnn"]["status"] == "failed"
    assert checks["version.cudnn"]["message"] == "cudnn: the image has 92600, expected 90100"
    assert checks["version.torch"]["status"] == "passed"


def test_gpu_checks_are_skipped_and_exit_0_only_without_require_gpu(e2e: E2E, tmp_path: Path) -> None:
    # The GPU checks and one other: the pipeline's run of the whole suite in this image is checked above.
    only = ("--only", "version.torch", "--only", "gpu.")
    relaxed = torchyard(
        "smoke", e2e.ref("runtime"), *only, "--report", str(tmp_path / "a.json"), "--junit", str(tmp_path / "a.xml")
    )
    assert relaxed.code == 0, relaxed.text
    gpu = {n: c for n, c in _report(tmp_path / "a.json").items() if n.startswith("gpu.")}
    assert gpu and all(c["status"] == "skipped" for c in gpu.values())
    assert "<skipped" in (tmp_path / "a.xml").read_text()
    strict = torchyard("smoke", e2e.ref("runtime"), *only, "--require-gpu", "--report", str(tmp_path / "b.json"))
    assert strict.code == 4
    failed = {n: c for n, c in _report(tmp_path / "b.json").items() if c["status"] == "failed"}
    assert "gpu.devices" in failed and "--require-gpu" in failed["gpu.devices"]["message"]


SIM_GPUS = [{"name": "Simulated NVIDIA H100", "capability": [9, 0]}, {"name": "Simulated A100", "capability": [8, 0]}]
# add_one is a compiled CUDA kernel: it refuses the CPU tensors the simulation gives it ("expected a CUDA tensor").
NOT_SIMULATED = ("gpu.extensions",)
# Issue 20's GPU checks start processes of their own (torchrun and ranks, fresh runs): they run in the runtime image
# only, whose torch and venv the devel image shares, to keep the tier's time down.
WORKFLOW_GPU = ("gpu.ddp", "gpu.determinism", "gpu.profiler")
# The devel image adds the CUDA toolkit (CUDA_HOME, nvcc) to the runtime image's torch and venv: it runs the checks
# that compile (the extension check builds with nvcc; torch.compile's Inductor sees CUDA_HOME), the rest run in the
# runtime image only.
DEVEL_GPU = ("gpu.devices", "gpu.extensions", "gpu.compile")
FIRST_GPU = (
    "gpu.devices", "gpu.cudnn_conv", "gpu.autocast", "gpu.tf32", "gpu.extensions", "gpu.compile", "gpu.train",
    "gpu.gemm", "gpu.memory", "gpu.sdpa", "gpu.nccl",
)  # fmt: skip


def _suite_in(image: str, tmp_path: Path, *args: str, docker_args: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
    """This checkout's suite (as --host-copy mounts it) in the image, the report written to tmp_path."""
    tmp_path.mkdir(exist_ok=True)
    tmp_path.chmod(0o777)
    run = docker(
        "run", "--rm", "--network", "none", *docker_args,
        "-v", f"{ROOT / 'builder' / 'smoke'}:/opt/torchyard-host/smoke:ro",
        "-v", f"{tmp_path}:/torchyard-out",
        image, "python", "/opt/torchyard-host/smoke", "--json", "/torchyard-out/report.json", *args,
        timeout=1200,
    )  # fmt: skip
    assert (tmp_path / "report.json").exists(), run.stdout[-3000:] + run.stderr[-3000:]
    return run.returncode, json.loads((tmp_path / "report.json").read_text())


@pytest.mark.parametrize("flavor", ["runtime", "devel"])
def test_every_gpu_checks_real_code_runs_on_simulated_gpus_in_the_image(e2e: E2E, tmp_path: Path, flavor: str) -> None:
    # Control flow on the torch the image carries (2.15.0+cu132): API use, dtypes, spawn, restored settings.
    config = {"gpus": SIM_GPUS, "cupti": True}
    sim = ("-e", "PYTHONPATH=/opt/torchyard-sim", "-e", f"TORCHYARD_GPU_SIM={json.dumps(config)}")
    mounts = ("-v", f"{ROOT / 'tests' / 'gpu_sim'}:/opt/torchyard-sim:ro", "--shm-size", "2g", *sim)
    names = FIRST_GPU + WORKFLOW_GPU if flavor == "runtime" else DEVEL_GPU
    only = [arg for name in names for arg in ("--only", name)]
    _, report = _suite_in(e2e.ref(flavor), tmp_path, *only, "--require-gpu", "--small", docker_args=mounts)
    checks = {c["name"]: c for c in report["checks"] if c["name"] not in NOT_SIMULATED}
    assert len(checks) == len(names) - len(NOT_SIMULATED)
    assert {n: c["message"] for n, c in checks.items() if c["status"] != "passed"} == {}
    assert [g["arch"] for g in report["observed"]["gpus"]] == ["sm_90", "sm_80"]
    assert "Triton" in checks["gpu.compile"]["message"]
    if flavor == "runtime":  # torchrun on 1 and 2 simulated GPUs (NCCL -> gloo), 3 fresh runs, CUPTI simulated
        assert report["observed"]["nccl_all_reduce"]["world"] == 2  # one spawned process per simulated GPU
        assert list(report["observed"]["ddp_gpu"]["step_seconds"]) == ["1", "2"]
        assert checks["gpu.determinism"]["message"].startswith("2 fresh processes, seed 0, CUBLAS_WORKSPACE_CONFIG=")


def test_ddp_determinism_and_the_profiler_fail_in_the_image_when_broken(e2e: E2E, tmp_path: Path) -> None:
    # tests/gpu_sim/torchyard_faults.py in every process of the run: rank 1 drifts, conv2d adds run-to-run noise,
    # the profiler records nothing. The same checks pass in the pipeline's run of the same image (above).
    faults = json.dumps(["ddp_desync", "nondeterministic", "profiler_off"])
    mounts = ("-v", f"{ROOT / 'tests' / 'gpu_sim'}:/opt/torchyard-sim:ro", "--shm-size", "2g")
    env = ("-e", "PYTHONPATH=/opt/torchyard-sim", "-e", f"TORCHYARD_SMOKE_FAULTS={faults}")
    only = ("--only", "ddp.cpu", "--only", "determinism.cpu", "--only", "profiler.cpu")
    code, report = _suite_in(e2e.ref("runtime"), tmp_path, *only, docker_args=(*mounts, *env))
    checks = {c["name"]: (c["status"], c["message"]) for c in report["checks"]}
    assert code == 1 and {s for s, _ in checks.values()} == {"failed"}, checks
    assert checks["ddp.cpu"][1].startswith("after 6 steps the parameters of rank(s) 1 differ from rank 0's")
    assert checks["determinism.cpu"][1].startswith("the same seeded run gave different losses in two processes")
    assert checks["profiler.cpu"][1].startswith("torch.profiler's Chrome trace lacks aten::convolution,")


def test_a_dev_shm_of_dockers_default_size_fails_the_dataloader_naming_the_fix(e2e: E2E, tmp_path: Path) -> None:
    code, report = _suite_in(e2e.ref("runtime"), tmp_path, "--only", "dataloader")  # no --shm-size: 64 MiB
    assert code == 1
    assert report["checks"][0]["message"] == (
        "/dev/shm is 64 MiB, too small for DataLoader workers (needs 256+): start the container with "
        "--shm-size=2g (or --ipc=host)"
    )


def test_a_gpu_device_node_without_cuda_fails_naming_the_driver_and_the_images_minimum(
    e2e: E2E, tmp_path: Path
) -> None:
    # A container that sees /dev/nvidia0 (here: a plain file bound there) while CUDA cannot start: the GPU
    # checks fail, also without --require-gpu, instead of skipping as "no GPU visible".
    node = tmp_path / "nvidia0"
    node.touch()
    code, report = _suite_in(
        e2e.ref("runtime"), tmp_path / "out", "--only", "gpu.devices", docker_args=("-v", f"{node}:/dev/nvidia0:ro")
    )
    assert code == 1
    message = report["checks"][0]["message"]
    assert message.startswith("/dev/nvidia0 exists but torch.cuda.is_available() is False")
    assert "needs driver >= 580.65.06" in message


def test_the_suite_runs_in_an_image_torchyard_did_not_build(foreign: str, tmp_path: Path) -> None:
    assert '"io.torchyard.version": ""' in docker("inspect", foreign).stdout
    assert docker("run", "--rm", foreign, "ls", "/etc/torchyard").returncode != 0
    bare = torchyard("smoke", foreign, "--report", str(tmp_path / "bare.json"))
    assert bare.code == 0, bare.text
    checks = _report(tmp_path / "bare.json")
    assert checks["version.torch"]["status"] == "skipped"  # nothing to compare against
    assert checks["import.torchvision"]["status"] == "passed"
    pinned = torchyard(
        "smoke",
        foreign,
        "--expect-value",
        "torch=2.15.0+cu132",
        "--arch",
        "sm_89",
        "--report",
        str(tmp_path / "pinned.json"),
    )
    assert pinned.code == 0, pinned.text
    checks = _report(tmp_path / "pinned.json")
    assert checks["version.torch"]["status"] == "passed"
    assert checks["arch.torch"]["message"] == "sm_89: compatible (sm_86)"
