"""The GPU checks' real code against real torch, on simulated GPUs (tests/gpu_sim; docs/smoke.md).

This proves control flow, not numerics: API use on the torch at hand, shapes, dtypes, the spawn of one
process per GPU, settings put back, and that each check FAILS when the simulated GPU answers wrongly
(faults). Speeds and errors are the CPU's. tests/unit/fake_torch.py stays for failure injection of what
real torch cannot be made to do here (old versions, missing modules, hangs and crashes).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from sim_kit import A100, H100, T4, check, needs_torch, python_with_torch, sim, suite

pytestmark = needs_torch

GPU_CHECKS = [
    "gpu.devices",
    "gpu.cudnn_conv",
    "gpu.autocast",
    "gpu.tf32",
    "gpu.extensions",
    "gpu.compile",
    "gpu.train",
    "gpu.gemm",
    "gpu.memory",
    "gpu.sdpa",
    "gpu.nccl",
    "gpu.ddp",
    "gpu.determinism",
    "gpu.profiler",
    "gpu.onnx",  # ONNX Runtime (.venv-torch's CPU package) claims the CUDA provider under the simulation
    "gpu.notebook",  # skipped: not a notebook image (the docker tier's notebook image runs its CPU part)
]


def test_every_gpu_check_runs_on_two_simulated_gpus(tmp_path: Path) -> None:
    code, report = suite(sim([H100, A100], cupti=True), tmp_path, "--only", "gpu.", "--require-gpu")
    statuses = {c["name"]: (c["status"], c["message"]) for c in report["checks"]}
    assert list(statuses) == GPU_CHECKS
    assert {n: s for n, (s, _) in statuses.items() if s != "passed"} == {
        "gpu.extensions": "skipped",
        "gpu.notebook": "skipped",
    }, statuses
    assert code == 0
    observed = report["observed"]
    assert [g["arch"] for g in observed["gpus"]] == ["sm_90", "sm_80"]  # every visible GPU, not only GPU 0
    assert list(observed["train_gpu"]["images_per_second"]) == [
        "fp32",
        "tf32",
        "amp_fp16_channels_last",
        "amp_bf16_channels_last",
    ]
    assert observed["train_gpu"]["gpu_over_cpu_fp32"] > 0
    assert observed["nccl_all_reduce"]["world"] == 2 and observed["nccl_all_reduce"]["busbw_gbps"] > 0
    assert {"flash", "efficient", "cudnn"} <= {p.split()[0] for p in observed["sdpa"]["passed"]}
    assert set(observed["gemm"]["tflops"]) == {"fp32", "tf32", "fp16", "bf16"}
    assert observed["tf32_errors"]["on"] > 10 * observed["tf32_errors"]["off"]
    # issue 20: a DDP step timed on 1 and on 2 GPUs (torchrun, NCCL -> gloo); determinism's cost; CUPTI's kernels
    assert list(observed["ddp_gpu"]["step_seconds"]) == ["1", "2"]
    assert [observed["ddp_gpu"]["runs"][n]["world"] for n in ("1", "2")] == [1, 2]
    assert observed["determinism_gpu"]["cublas_workspace_config"] == ":4096:8"
    assert observed["determinism_gpu"]["cost"] > 0 and observed["profiler_gpu"]["kernels"] > 0


@pytest.mark.parametrize(
    ("fault", "name", "expected"),
    [
        ("tf32_ignored", "gpu.tf32", "TF32 was not used"),
        ("conv_grad", "gpu.cudnn_conv", "grad is wrong: relative error 1.00e-02"),
        ("gemm", "gpu.gemm", "cuBLAS fp32 GEMM: relative error"),
        ("fp64_wrong", "gpu.gemm", "cuBLAS fp64 GEMM: relative error 1.00e-09, above 1e-12"),
        ("gpu:1", "gpu.devices", "GPU 1 (Simulated NVIDIA A100) computed a wrong matmul"),
        ("sdpa", "gpu.sdpa", "backend differs from math"),
        ("all_reduce", "gpu.nccl", "all_reduce gave"),
        ("ddp_desync", "gpu.ddp", "after 5 steps the parameters of rank(s) 1 differ from rank 0's"),
    ],
)
def test_each_check_fails_when_the_gpu_answers_wrongly(tmp_path: Path, fault: str, name: str, expected: str) -> None:
    found = check(name, sim([H100, A100], faults=(fault,)), tmp_path)
    # the same checks pass on the same GPUs without the fault: test_every_gpu_check_runs_on_two_simulated_gpus
    assert found["status"] == "failed" and expected in found["message"], found["message"]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"cudnn": None}, "cuDNN is not available to torch (torch.backends.cudnn.is_available() is False)"),
        ({"cudnn_enabled": False}, "cuDNN is disabled (torch.backends.cudnn.enabled is False)"),
    ],
)
def test_cudnn_must_be_available_and_enabled(tmp_path: Path, changes: dict[str, Any], expected: str) -> None:
    found = check("gpu.cudnn_conv", sim([H100], **changes), tmp_path)
    assert (found["status"], found["message"]) == ("failed", expected)


@pytest.mark.parametrize(("gpu", "bf16"), [(A100, True), (T4, False)])
def test_autocast_multiplies_256_square_matrices_in_fp16_and_in_bf16_from_sm_80(
    tmp_path: Path, gpu: dict[str, Any], bf16: bool
) -> None:
    record = tmp_path / "record.jsonl"
    found = check("gpu.autocast", sim([gpu], record=str(record)), tmp_path)
    assert found["status"] == "passed", found["message"]
    products = [p.split(" rel.err ")[0] for p in found["message"].split("; ") if " rel.err " in p]
    assert products == ["float16", "bfloat16"][: 1 + bf16]
    native = "; bf16 native" if bf16 else "; bf16 not native on sm_75 (emulated at best; needs capability >= 8.0)"
    assert found["message"].endswith(native)
    recorded = [json.loads(line) for line in record.read_text().splitlines()]
    shapes = [p["shapes"] for p in recorded if p["op"] == "matmul" and p["gpus"] == [0, 0]]
    assert shapes == [[[256, 256], [256, 256]]] * (1 + bf16)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("amp_off", r"autocast torch.float16: got torch.float32, relative error \d\.\d\de-0[3-9]"),
        ("half_gemm", r"autocast torch.float16: got torch.float16, relative error (4\.9\d|5\.0\d)e-02"),
    ],
)
def test_autocast_fails_on_a_product_left_in_fp32_or_5_percent_off(tmp_path: Path, fault: str, expected: str) -> None:
    found = check("gpu.autocast", sim([H100], faults=(fault,)), tmp_path)
    assert found["status"] == "failed"
    assert re.fullmatch(expected, found["message"]), found["message"]


EXTENSION = """
import json, sys, types
import torch
from builder.smoke.expect import Expectations
from builder.smoke.framework import Context
from builder.smoke.runner import load_checks, run_one

seen = []

def kernel(step):
    def add_one(x):  # as a CUDA extension's kernel: a float32 tensor on the GPU, or it refuses
        if getattr(x, "_sim_gpu", None) is None or x.dtype != torch.float32:
            raise RuntimeError("expected a float32 CUDA tensor")
        seen.append(list(x.shape))
        return x + step
    return add_one

sys.modules["demo_ext"] = types.SimpleNamespace(add_one=kernel(1))
sys.modules["wrong_ext"] = types.SimpleNamespace(add_one=kernel(2))
check = {c.name: c for c in load_checks()}["gpu.extensions"]
said = {}
for names in (("demo-ext", "demo-ext"), ("wrong-ext",)):
    result = run_one(check, Context(expect=Expectations(extensions=names), arch=None, require_gpu=True))
    said[names[0]] = [result.status, result.message]
said["shapes"] = seen
print(json.dumps(said))
"""


def test_an_extension_s_kernel_runs_on_a_float32_gpu_tensor_and_must_add_one(tmp_path: Path) -> None:
    said = json.loads(python_with_torch(EXTENSION, sim([H100]), tmp_path).strip().splitlines()[-1])
    assert said["demo-ext"] == ["passed", "demo-ext.add_one ok; demo-ext.add_one ok"]
    assert said["wrong-ext"] == ["failed", "wrong-ext.add_one gave a wrong answer on the GPU"]
    assert said["shapes"] == [[1024]] * 3  # each self-test adds one to 1024 floats


def test_a_gpu_before_ampere_has_no_tf32_and_no_native_bf16(tmp_path: Path) -> None:
    config = sim([T4])
    tf32 = check("gpu.tf32", config, tmp_path)
    off = tf32["observed"]["tf32_errors"]["off"]
    assert (tf32["status"], tf32["message"]) == (
        "passed",
        f"no TF32 on sm_75 (needs capability >= 8.0): fp32 error {off:.1e} both ways",
    )
    autocast = check("gpu.autocast", config, tmp_path)
    assert autocast["status"] == "passed"
    assert "bf16 not native on sm_75" in autocast["message"] and autocast["observed"]["bf16_native"] is False
    assert check("gpu.autocast", sim([H100]), tmp_path)["observed"]["bf16_native"] is True


def test_training_times_the_precisions_a_t4_has_and_restores_every_setting(tmp_path: Path) -> None:
    found = check("gpu.train", sim([T4]), tmp_path)
    assert found["status"] == "passed", found["message"]
    assert list(found["observed"]["train_gpu"]["images_per_second"]) == ["fp32", "amp_fp16_channels_last"]
    assert found["settings_after"] == found["settings_before"]


@pytest.mark.parametrize("name", ["gpu.devices", "gpu.cudnn_conv", "gpu.tf32", "gpu.gemm", "profiler.cpu"])
def test_checks_put_back_every_global_setting(tmp_path: Path, name: str) -> None:
    found = check(name, sim([H100]), tmp_path)
    assert found["status"] == "passed", found["message"]
    assert found["settings_after"] == found["settings_before"]


def test_each_gpu_computes_a_full_fp32_matrix_product_of_its_own(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    found = check("gpu.devices", sim([H100, A100], record=str(record)), tmp_path)
    assert found["status"] == "passed", found["message"]
    products = [json.loads(line) for line in record.read_text().splitlines()]
    products = [p for p in products if p["op"] == "matmul" and p["gpus"][0] is not None]
    # a 256x256 GEMM (not a matrix-vector product) on GPU 0, then on GPU 1, fp32 without TF32
    assert [(p["gpus"], p["shapes"], p["dtypes"], p["tf32"]) for p in products] == [
        ([index, index], [[256, 256], [256, 256]], ["torch.float32", "torch.float32"], False) for index in (0, 1)
    ]


def test_the_cudnn_convolution_runs_in_fp32_without_tf32_with_benchmark_on(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    found = check("gpu.cudnn_conv", sim([H100], record=str(record)), tmp_path)
    assert found["status"] == "passed", found["message"]
    recorded = [json.loads(line) for line in record.read_text().splitlines()]
    convs = [
        (c["shapes"], c["dtypes"], c["tf32"], c["benchmark"])
        for c in recorded
        if c["op"] == "conv" and c["gpus"][0] == 0
    ]
    # benchmark on: cuDNN tries every algorithm (Winograd, FFT), which CONV_MAX is set for; TF32 off: fp32's errors
    assert convs == [([[8, 16, 32, 32], [32, 16, 3, 3]], ["torch.float32", "torch.float32"], False, True)]


def test_tf32_multiplies_512_squares_on_gpu_0_with_tf32_on_then_off_and_reports_both_errors(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    found = check("gpu.tf32", sim([A100], record=str(record)), tmp_path)  # sm_80: the lowest capability with TF32
    assert found["status"] == "passed", found["message"]
    errors = found["observed"]["tf32_errors"]
    assert list(errors) == ["on", "off"] and 5e-5 <= errors["on"] <= 1e-2 and errors["off"] < 1e-5
    assert found["message"] == f"TF32 on: relative error {errors['on']:.1e}; off: {errors['off']:.1e}"
    products = [p for p in _recorded(record) if p["op"] == "matmul" and p["gpus"] == [0, 0]]
    assert [(p["shapes"], p["dtypes"], p["tf32"]) for p in products] == [
        ([[512, 512], [512, 512]], ["torch.float32", "torch.float32"], tf32) for tf32 in (True, False)
    ]


IGNORED = "TF32 on: relative error {on:.2e}, outside TF32's [5e-05, 0.01] (TF32 was not used, or the result is wrong)"


@pytest.mark.parametrize(
    ("gpu", "fault", "expected"),
    [
        # TF32 asked for and not used: the error is fp32's
        (A100, "tf32_ignored", IGNORED),
        (A100, "tf32_wrong", IGNORED),  # TF32 used, its products 5 % off: TF32's error is the one named
        # fp32 products 1 % off: the error named is that of TF32 off
        (A100, "fp32_wrong", "TF32 off: relative error {off:.2e}, above fp32's 1e-05"),
        # TF32 turned off and used all the same: every "fp32" product would be TF32's
        (A100, "tf32_stuck", "TF32 off: relative error {off:.2e}, above fp32's 1e-05"),
        # a GPU without TF32 that rounds to it anyway
        (T4, "tf32_everywhere", "sm_75 has no TF32, yet TF32 on gave a relative error of {on:.2e}"),
    ],
)
def test_tf32_fails_naming_the_error_that_is_wrong(
    tmp_path: Path, gpu: dict[str, Any], fault: str, expected: str
) -> None:
    found = check("gpu.tf32", sim([gpu], faults=(fault,)), tmp_path)
    errors = found["observed"]["tf32_errors"]
    assert (found["status"], found["message"]) == ("failed", expected.format(**errors))


def test_a_wrong_convolution_output_is_named_though_its_gradients_are_right(tmp_path: Path) -> None:
    found = check("gpu.cudnn_conv", sim([H100], faults=("conv_out",)), tmp_path)
    assert (found["status"], found["message"]) == (
        "failed",
        "cuDNN convolution output is wrong: relative error 1.00e-02 against a float64 CPU reference (tolerance 0.001)",
    )


def test_the_convolution_reports_each_error_it_compared(tmp_path: Path) -> None:
    found = check("gpu.cudnn_conv", sim([H100]), tmp_path)
    error = r"\d\.\de-\d\d"
    expected = (
        rf"cuDNN \d+ conv forward/backward \(fp32, TF32 off\): output {error}, input grad {error}, weight grad {error}"
    )
    assert re.fullmatch(expected, found["message"]), found["message"]


def test_the_relative_error_of_a_zero_reference_is_the_absolute_error(tmp_path: Path) -> None:
    code = (
        "import torch\n"
        "from builder.smoke.checks_gpu import relative_error\n"
        "print(relative_error(torch.tensor([0.25, -0.5]), torch.zeros(2, dtype=torch.float64)))\n"
        "print(relative_error(torch.tensor([1.0, 3.0]), torch.tensor([1.0, 4.0], dtype=torch.float64)))\n"
    )
    assert python_with_torch(code, sim([]), tmp_path).split() == ["0.5", "0.25"]


def test_without_simulated_gpus_the_gpu_checks_fail_under_require_gpu(tmp_path: Path) -> None:
    found = check("gpu.devices", sim([]), tmp_path)
    assert found["status"] == "failed" and found["message"].startswith("--require-gpu, but")


def test_the_fp32_baseline_turns_tf32_off_for_matmuls_and_cudnn(tmp_path: Path) -> None:
    # cudnn.allow_tf32 defaults to True: an "fp32" run that does not turn it off is really TF32.
    code = (
        "import torch\n"
        "from builder.smoke.model import FP32, TF32, train\n"
        "seen = []\n"
        "for precision in (FP32, TF32):\n"
        "    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision is FP32\n"
        "    train('cuda', 1, 4, precision=precision, warmup=1)\n"
        "    seen.append([torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32])\n"
        "print(seen)\n"
    )
    assert python_with_torch(code, sim([H100]), tmp_path).strip().splitlines()[-1] == "[[False, False], [True, True]]"


def test_without_cupti_the_gpu_profiler_fails_naming_libcupti(tmp_path: Path) -> None:
    # The CPU wheel records no CUDA activity, as an image without libcupti: the trace has operators, no kernel.
    found = check("gpu.profiler", sim([H100]), tmp_path)
    assert found["status"] == "failed"
    assert found["message"].startswith("torch.profiler recorded no CUDA kernel and libcupti is not loaded: install")


def test_a_non_deterministic_op_fails_gpu_determinism(tmp_path: Path) -> None:
    found = check("gpu.determinism", sim([H100], faults=("nondeterministic",)), tmp_path)
    assert found["status"] == "failed" and "gave different losses in two processes" in found["message"]


def _recorded(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_nccl_reduces_the_bytes_it_reports_on_each_rank_s_own_gpu(tmp_path: Path) -> None:
    # The simulation logs each process group and all_reduce (tests/gpu_sim: "record"); an NCCL group there refuses
    # host tensors and set_device wants an index, as real torch does. What the check timed must be what it reports.
    log = tmp_path / "collectives.jsonl"
    found = check("gpu.nccl", sim([H100, A100], record=str(log), event_seconds=0.001), tmp_path)
    assert found["status"] == "passed", found["message"]
    reported = found["observed"]["nccl_all_reduce"]
    assert (reported["world"], reported["bytes"]) == (2, 1 << 20)
    algbw = (1 << 20) * 2 / 0.001 / 1e9  # 2 timed reduces of 1 MiB in the simulation's fixed 1 ms
    assert (reported["algbw_gbps"], reported["busbw_gbps"]) == (algbw, algbw * 2 * (2 - 1) / 2)  # same arithmetic
    assert found["message"].endswith(f"across 2 GPUs: correct; 1 MiB: bus bandwidth {algbw:.1f} GB/s")
    calls = _recorded(log)
    assert sorted(c["init"] for c in calls if "init" in c) == ["nccl", "nccl"]  # asked for NCCL, not a default
    reduces = [c for c in calls if "all_reduce" in c]
    assert {(c["gpu"], c["device"]) for c in reduces} == {(0, 0), (1, 1)}  # rank r's tensors on GPU r, current
    sizes = sorted(c["all_reduce"] for c in reduces if c["device"] == 0)
    assert sizes == [4096] + [1 << 20] * 3  # the check's 1024 floats, the warm-up, the 2 timed reduces
    assert sorted(p.name for p in tmp_path.iterdir()) == ["collectives.jsonl"]  # rank 0's result: a private folder


def test_nccl_on_a_slow_bus_passes_and_without_a_timing_fails(tmp_path: Path) -> None:
    # 2 MiB in 1 s: 0.002 GB/s, slow but a bandwidth; a timing that is not a number (NaN) is none
    found = check("gpu.nccl", sim([H100, A100], event_seconds=1.0), tmp_path)
    assert found["status"] == "passed", found["message"]
    assert found["message"] == "NCCL 2.27.3 all_reduce across 2 GPUs: correct; 1 MiB: bus bandwidth 0.0 GB/s"
    for endless in (float("nan"), float("inf")):  # an infinite time is a bandwidth of exactly 0
        found = check("gpu.nccl", sim([H100, A100], event_seconds=endless), tmp_path)
        assert (found["status"], found["message"]) == ("failed", "NCCL all_reduce across 2 GPUs measured no bandwidth")


def test_nccl_at_full_size_reduces_64_mib_20_times(tmp_path: Path) -> None:
    found = check("gpu.nccl", sim([H100, A100], event_seconds=0.001), tmp_path, full=True)
    assert found["status"] == "passed", found["message"]
    reported = found["observed"]["nccl_all_reduce"]
    algbw = (64 << 20) * 20 / 0.001 / 1e9  # 20 timed reduces of 64 MiB in the simulation's fixed 1 ms
    assert (reported["bytes"], reported["algbw_gbps"]) == (64 << 20, algbw)
    assert found["message"].endswith(f"across 2 GPUs: correct; 64 MiB: bus bandwidth {algbw:.1f} GB/s")


def test_nccl_on_one_gpu_reports_no_bus(tmp_path: Path) -> None:
    found = check("gpu.nccl", sim([H100]), tmp_path)
    assert found["status"] == "passed", found["message"]
    assert "all_reduce on 1 GPU: correct" in found["message"] and "(no bus: one GPU)" in found["message"]
    assert found["observed"]["nccl_all_reduce"]["world"] == 1


@pytest.mark.parametrize(
    ("gpu", "kinds"), [(T4, ["fp32", "fp16"]), (A100, ["fp32", "fp16", "tf32", "bf16"])], ids=["sm_75", "sm_80"]
)
def test_gemm_times_the_precisions_the_gpu_has(tmp_path: Path, gpu: dict[str, Any], kinds: list[str]) -> None:
    log = tmp_path / "calls.jsonl"
    found = check("gpu.gemm", sim([gpu], event_seconds=0.001, record=str(log)), tmp_path)
    assert found["status"] == "passed", found["message"]
    gemm = found["observed"]["gemm"]
    rate = 2 * 128**3 * 2 / 0.001 / 1e12  # 2 timed 128x128 GEMMs (--small) in the simulation's fixed 1 ms
    assert gemm["tflops"] == dict.fromkeys(kinds, rate) and list(gemm["tflops"]) == kinds  # exact: same arithmetic
    # on the GPU, square: the two error products (fp32 without TF32, fp64), then each precision's warm-up and 2 timed
    # products, with TF32 only where it is the precision timed (the flag acts on fp32 only)
    dtypes = {"fp32": "float32", "fp16": "float16", "tf32": "float32", "bf16": "bfloat16"}
    timed = [(f"torch.{dtypes[kind]}", kind == "tf32" if dtypes[kind] == "float32" else None) for kind in kinds]
    expected = [("torch.float32", False), ("torch.float64", None)] + [t for t in timed for _ in range(3)]
    products = [c for c in _recorded(log) if c.get("op") == "matmul" and c["gpus"] != [None, None]]
    assert [(c["dtypes"][0], c["tf32"] if c["dtypes"][0] == "torch.float32" else None) for c in products] == expected
    assert all(c["gpus"] == [0, 0] and c["shapes"] == [[128, 128], [128, 128]] for c in products)
    assert gemm["relative_errors"]["fp32"] < 1e-5 and gemm["relative_errors"]["fp64"] < 1e-12
    errors = gemm["relative_errors"]
    rates = ", ".join(f"{kind} {rate:.1f}" for kind in kinds)
    assert found["message"] == f"errors fp32 {errors['fp32']:.1e}, fp64 {errors['fp64']:.1e}; TFLOP/s {rates}"


def test_gemm_times_4096_squares_ten_times_per_precision_at_full_size(tmp_path: Path) -> None:
    # the real GPU's sizes; products of 4096 are recorded but not computed (the simulation's cheap_products_from)
    log = tmp_path / "calls.jsonl"
    config = sim([A100], event_seconds=0.001, record=str(log), cheap_products_from=4096)
    found = check("gpu.gemm", config, tmp_path, full=True)
    assert found["status"] == "passed", found["message"]
    rate = 2 * 4096**3 * 10 / 0.001 / 1e12
    assert found["observed"]["gemm"]["tflops"] == dict.fromkeys(["fp32", "fp16", "tf32", "bf16"], rate)
    timed = [c for c in _recorded(log) if c.get("op") == "matmul" and c["shapes"] == [[4096, 4096]] * 2]
    assert len(timed) == 4 * (1 + 10)  # per precision: the warm-up and 10 timed
    on_gpu = [c for c in _recorded(log) if c.get("op") == "matmul" and c["gpus"] == [0, 0]]
    assert [c["shapes"] for c in on_gpu[:2]] == [[[1024, 1024]] * 2] * 2  # the error products: 1024 squares


def test_memory_allocates_nine_tenths_of_the_free_memory_and_times_pinned_copies(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    found = check("gpu.memory", sim([dict(H100, memory=400 << 20)], event_seconds=0.001, record=str(log)), tmp_path)
    assert found["status"] == "passed", found["message"]
    memory = found["observed"]["memory"]
    free = int((400 << 20) * 0.9)  # the simulation's mem_get_info: 90 % of the GPU's memory free
    assert (memory["total"], memory["free"], memory["allocated"]) == (400 << 20, free, int(free * 0.9))
    rate = (4 << 20) * 2 / 0.001 / 1e9  # 2 timed copies of 4 MiB (--small) each way in the fixed 1 ms
    assert (memory["h2d_gbps"], memory["d2h_gbps"]) == (rate, rate)  # exact: the same arithmetic
    # bytes, not elements: uint8 on both sides, asynchronous, between the host and GPU 0 (warm-up, 2 up, 2 down)
    # the block is bytes on GPU 0, as is the copies' GPU buffer (the pinned host buffer is not a GPU's)
    blocks = [(c["gpus"], c["bytes"], c["dtypes"]) for c in _recorded(log) if c["op"] == "empty"]
    assert blocks == [([0], [int(free * 0.9)], ["torch.uint8"]), ([0], [4 << 20], ["torch.uint8"])]
    copies = [(c["gpus"], c["dtypes"], c["bytes"], c["non_blocking"]) for c in _recorded(log) if c["op"] == "copy_"]
    up = ([0, None], ["torch.uint8"] * 2, [4 << 20] * 2, True)
    down = ([None, 0], ["torch.uint8"] * 2, [4 << 20] * 2, True)
    assert copies == [up, up, up, down, down]
    assert found["message"] == (
        "allocated 0.3 GiB of 0.4 GiB free (0.4 GiB total); "
        f"pinned copies: host->device {rate:.1f} GB/s, device->host {rate:.1f} GB/s"
    )


@pytest.mark.parametrize("fault", ["memory_head", "memory_tail"])
def test_memory_fails_when_the_block_does_not_hold_what_was_written(tmp_path: Path, fault: str) -> None:
    found = check("gpu.memory", sim([dict(H100, memory=400 << 20)], faults=(fault,)), tmp_path)
    allocated = int(int((400 << 20) * 0.9) * 0.9)
    assert (found["status"], found["message"]) == (
        "failed",
        f"a {allocated >> 20} MiB allocation did not hold what was written",
    )


def test_memory_times_256_mib_copies_five_times_each_way_at_full_size(tmp_path: Path) -> None:
    found = check("gpu.memory", sim([H100], event_seconds=0.001), tmp_path, full=True)
    assert found["status"] == "passed", found["message"]
    rate = (256 << 20) * 5 / 0.001 / 1e9  # the real GPU's sizes: 5 timed copies of 256 MiB each way
    assert (found["observed"]["memory"]["h2d_gbps"], found["observed"]["memory"]["d2h_gbps"]) == (rate, rate)


SM_120 = {"name": "Simulated NVIDIA RTX PRO 6000 Blackwell", "capability": [12, 0]}
M40 = {"name": "Simulated Tesla M40", "capability": [5, 2]}
B200 = {"name": "Simulated NVIDIA B200", "capability": [10, 0]}
K80 = {"name": "Simulated Tesla K80", "capability": [3, 7]}


@pytest.mark.parametrize(
    ("gpu", "missing", "status", "words"),
    [
        (H100, [], "passed", "max error vs math: efficient "),
        (H100, ["cudnn"], "passed", "; cudnn not available"),  # tried and reported, never required
        (A100, ["flash"], "failed", "SDPA flash backend failed on this GPU: No available kernel."),  # sm_8x: required
        (H100, ["flash"], "failed", "SDPA flash backend failed on this GPU: No available kernel."),  # sm_90 too
        (B200, ["flash"], "passed", "; flash not available"),  # nor on sm_100
        (SM_120, ["flash", "cudnn"], "passed", "; flash not available; cudnn not available"),  # nor on sm_120
        (SM_120, ["efficient"], "failed", "SDPA efficient backend failed on this GPU"),  # from sm_50 on
        (M40, ["efficient"], "failed", "SDPA efficient backend failed on this GPU"),  # sm_52 included
        (K80, ["efficient"], "passed", "; efficient not available"),  # not before sm_50
        (
            K80,
            ["efficient", "flash", "cudnn"],
            "failed",
            "no fused attention backend ran on this GPU: efficient not available; flash not available; "
            "cudnn not available",
        ),
    ],
)
def test_sdpa_requires_the_fused_backends_the_architecture_has(
    tmp_path: Path, gpu: dict[str, Any], missing: list[str], status: str, words: str
) -> None:
    found = check("gpu.sdpa", sim([gpu], sdpa_missing=missing), tmp_path)
    assert found["status"] == status and words in found["message"], found["message"]
    if status == "passed":
        ran = [entry.split()[0] for entry in found["observed"]["sdpa"]["passed"]]
        assert ran == [b for b in ("efficient", "flash", "cudnn") if b not in missing]
        assert all(float(entry.split()[1]) < 1e-2 for entry in found["observed"]["sdpa"]["passed"])
        notes = [f"{b} not available" for b in ("efficient", "flash", "cudnn") if b in missing]
        assert found["observed"]["sdpa"]["notes"] == notes
        said = "max error vs math: " + ", ".join(found["observed"]["sdpa"]["passed"])
        assert found["message"] == said + "".join(f"; {note}" for note in notes)
    else:
        assert found["message"].startswith(words)


@pytest.mark.parametrize(("full", "shape"), [(True, [4, 8, 512, 64]), (False, [2, 2, 64, 32])])
def test_sdpa_compares_causal_fp16_attention_on_the_gpu(tmp_path: Path, full: bool, shape: list[int]) -> None:
    log = tmp_path / "calls.jsonl"
    found = check("gpu.sdpa", sim([H100], record=str(log)), tmp_path, full=full)
    assert found["status"] == "passed", found["message"]
    assert [entry.split()[0] for entry in found["observed"]["sdpa"]["passed"]] == ["efficient", "flash", "cudnn"]
    calls = [c for c in _recorded(log) if c.get("op") == "sdpa"]
    # math's reference, then each fused backend: q, k and v of one shape, fp16, on GPU 0, causal
    assert [(c["shapes"], c["dtypes"], c["gpus"], c["causal"]) for c in calls] == [
        ([shape] * 3, ["torch.float16"] * 3, [0, 0, 0], True)
    ] * 4


# --- each GPU check passing on its own, with its figures (mutmut's smoke runs leave out the whole suite) ---------


def test_the_profiler_finds_cupti_s_kernels_when_they_are_recorded(tmp_path: Path) -> None:
    found = check("gpu.profiler", sim([H100], cupti=True), tmp_path)
    assert found["status"] == "passed", found["message"]
    kernels = found["observed"]["profiler_gpu"]["kernels"]
    assert kernels > 0 and found["observed"]["profiler_gpu"] == {"kernels": kernels, "library": None}
    assert re.fullmatch(
        r"\d+ operators in the Chrome trace \(convolution forward and backward, optimizer step\); "
        rf"{kernels} CUDA kernels \(CUPTI\), exported as Chrome JSON",
        found["message"],
    ), found["message"]
    assert not list(tmp_path.iterdir())  # the trace went to a private temporary folder, not the working directory


def test_the_cpu_profiler_says_what_it_found_and_that_it_exported_the_trace(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    found = check("profiler.cpu", sim([], record=str(record)), tmp_path)
    expected = r"\d+ operators in the Chrome trace \(convolution forward and backward, optimizer step\)"
    expected += ", exported as Chrome JSON"
    assert found["status"] == "passed" and re.fullmatch(expected, found["message"]), found["message"]
    profiled = [e["threads"] for e in map(json.loads, record.read_text().splitlines()) if e["op"] == "profile"]
    assert profiled == [1]  # one thread while it records (drive.py set 3), put back after
    assert found["settings_after"]["threads"] == found["settings_before"]["threads"]


CUPTI_LOADED = """
import ctypes, json, os, shutil
import torch
from builder.smoke.expect import Expectations
from builder.smoke.framework import Context
from builder.smoke.runner import load_checks, run_one

# a library named libcupti in this process (a copy of libm, which every Python has loaded), as torch loads CUPTI's
libm = next(line.split()[-1] for line in open("/proc/self/maps") if "/libm." in line or "/libm-" in line)
ctypes.CDLL(os.path.abspath(shutil.copy(libm, "libcupti.so.12")))
ctx = Context(expect=Expectations(), arch=None, require_gpu=True)
result = run_one({c.name: c for c in load_checks()}["gpu.profiler"], ctx)
print(json.dumps([result.status, ctx.observed["profiler_gpu"]]))
"""


def test_the_profiler_reports_the_cupti_library_the_process_loaded(tmp_path: Path) -> None:
    said = json.loads(python_with_torch(CUPTI_LOADED, sim([H100], cupti=True), tmp_path).strip().splitlines()[-1])
    assert said[0] == "passed" and said[1]["library"] == str(tmp_path / "libcupti.so.12")


def test_determinism_on_the_gpu_is_bitwise_and_its_cost_is_a_ratio_of_step_times(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    found = check("gpu.determinism", sim([H100], event_seconds=0.001, record=str(record)), tmp_path)
    assert found["status"] == "passed", found["message"]
    runs: dict[int, set[tuple[bool, bool]]] = {}  # each run's process: its convolutions' cuDNN settings
    for entry in map(json.loads, record.read_text().splitlines()):
        if entry["op"] == "conv":
            runs.setdefault(entry["pid"], set()).add((entry["benchmark"], entry["deterministic"]))
    # (benchmark, deterministic): two deterministic runs, then torch's defaults; cuDNN never picks by timing
    assert list(runs.values()) == [{(False, True)}, {(False, True)}, {(False, False)}]
    observed = found["observed"]["determinism_gpu"]
    assert (observed["steps"], observed["batch"], observed["cublas_workspace_config"]) == (4, 8, ":4096:8")
    # every timed region lasts 1 ms in the simulation: both runs' steps take the same time, so the cost is 1
    assert observed["step_seconds_deterministic"] == observed["step_seconds_default"] and observed["cost"] == 1.0
    assert observed["step_seconds_deterministic"] == pytest.approx(0.001 / 3)  # the 3 timed steps after 1 of warm-up
    assert found["message"].startswith("2 fresh processes, seed 0, CUBLAS_WORKSPACE_CONFIG=:4096:8: ")
    assert found["message"].endswith("; a step takes 1.00x torch's default (non-deterministic) time")


def test_ddp_on_the_gpus_times_a_step_per_gpu_count(tmp_path: Path) -> None:
    found = check("gpu.ddp", sim([H100, A100], event_seconds=0.001), tmp_path)
    assert found["status"] == "passed", found["message"]
    observed = found["observed"]["ddp_gpu"]
    assert [observed["runs"][n]["world"] for n in ("1", "2")] == [1, 2]
    step = observed["step_seconds"]["1"]
    assert observed["step_seconds"] == {"1": step, "2": step}  # the same fixed interval per timed region
    assert step == pytest.approx(0.001 / 3)  # over the 3 timed steps of --small's 5 (2 of warm-up)
    batch = observed["batch_per_gpu"]
    assert observed["images_per_second"] == {"1": batch / step, "2": batch * 2 / step}
    assert observed["scaling_efficiency"] == {"1": 1.0, "2": 1.0}
    assert found["message"].startswith("NCCL DDP (") and found["message"].endswith("; scaling at 2: 1.00")


def test_compile_on_the_gpu_matches_eager_and_names_triton(tmp_path: Path) -> None:
    found = check("gpu.compile", sim([T4]), tmp_path)
    assert found["status"] == "passed", found["message"]
    # .venv-torch's CPU wheel has no Triton; the simulation compiles for the CPU (C++)
    assert found["message"].startswith("Inductor (Triton not importable): output ")
    assert " from eager" in found["message"]


@pytest.mark.parametrize("fault", ["compile_wrong_tanh", "compile_wrong_erf"])
def test_compile_on_the_gpu_fails_when_inductor_gets_a_nonlinearity_wrong(tmp_path: Path, fault: str) -> None:
    # the MLP's tanh, and the erf its GELU is made of: each compiled wrong must show (the simulation compiles C++)
    found = check("gpu.compile", sim([T4], faults=(fault,)), tmp_path)
    assert found["status"] == "failed", found["message"]
    assert found["message"].startswith("torch.compile on the GPU differs from eager: output ")


COMPILE_FAILS = """
import json, torch
from builder.smoke.expect import Expectations
from builder.smoke.framework import Context
from builder.smoke.runner import load_checks, run_one

def broken(*args, **kwargs):
    raise RuntimeError("Inductor could not find Python.h\\nsecond line of a long error")

torch.compile = broken
check = {c.name: c for c in load_checks()}["gpu.compile"]
result = run_one(check, Context(expect=Expectations(), arch=None, require_gpu=True))
print(json.dumps([result.status, result.message]))
"""


def test_a_gpu_compile_that_fails_says_so_in_its_first_line(tmp_path: Path) -> None:
    said = json.loads(python_with_torch(COMPILE_FAILS, sim([H100]), tmp_path).strip().splitlines()[-1])
    assert said == ["failed", "torch.compile on the GPU failed: RuntimeError: Inductor could not find Python.h"]


def test_compile_on_the_gpu_compares_in_full_fp32_whatever_tf32_was(tmp_path: Path) -> None:
    # drive.py leaves TF32 on for matmuls before the check (as a user's code or NGC's TORCH_ALLOW_TF32_CUBLAS_OVERRIDE
    # may): on an sm_80+ GPU eager and compiled then differ by ~1e-4 (1.7e-4 on a simulated H100 before the check
    # switched TF32 off for its comparison), past the tolerance, though nothing is wrong with torch.compile.
    found = check("gpu.compile", sim([H100], record=str(tmp_path / "record.jsonl")), tmp_path)
    assert found["status"] == "passed", found["message"]
    assert found["settings_after"] == found["settings_before"]  # TF32 put back as it was
    matmuls = [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    matmuls = [entry for entry in matmuls if entry.get("op") == "matmul"]
    assert matmuls and not any(entry["tf32"] for entry in matmuls)
    # eager's layers are the GPU's MLP (32 -> 64 -> 64 -> 10, with biases) on GPU 0, not the CPU's
    assert {(tuple(e["gpus"]), str(e["shapes"])) for e in matmuls} == {
        ((0, 0, 0), "[[16, 32], [64, 32], [64]]"),
        ((0, 0, 0), "[[16, 64], [64, 64], [64]]"),
        ((0, 0, 0), "[[16, 64], [10, 64], [10]]"),
    }
