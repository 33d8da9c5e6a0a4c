"""The smoke checks' plain helpers at their edges, without torch: where the driver version is read (the proc
file's first dotted number, nvidia-smi's exact command and first line), /etc/os-release without ID or
VERSION_ID, the architecture verdict's PTX and arch-specific cases and its refusal lines, the profiler's trace
reading and libcupti's package, and how a determinism run's report is read. Written for the survivors of
`bench/mutation.py smoke/checks` (docs/mutation.md)."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import types
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from fake_torch import FakeImage, Installer
from smoke_kit import context, files

from builder.smoke import (
    checks_compile,
    checks_cpu,
    checks_data,
    checks_ddp,
    checks_determinism,
    checks_gpu,
    checks_gpu_perf,
    checks_nccl,
    checks_onnx,
    checks_profiler,
    procs,
)
from builder.smoke.framework import CPU_BUILD, NO_GPU, Failed, Skipped

# --- checks_gpu.driver_version --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("NVRM version: NVIDIA UNIX x86.64 Kernel Module 2024 550.54 Release Build\n", "550.54"),  # one dot will do
        ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n", "580.65.06"),
    ],
)
def test_the_proc_file_gives_its_first_all_digit_dotted_word(
    monkeypatch: pytest.MonkeyPatch, line: str, expected: str
) -> None:
    # "x86.64" has a dot but not only digits, "2024" only digits but no dot: neither is a version
    with files(monkeypatch, checks_gpu, {checks_gpu.DRIVER_FILE: line + "GCC version: gcc 12.2.0\n"}):
        assert checks_gpu.driver_version() == expected


def test_nvidia_smi_is_asked_exactly_and_its_first_line_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[list[str], dict[str, Any]]] = []

    def fake_run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append((argv, kwargs))
        return subprocess.CompletedProcess(argv, 0, "575.57.08\n", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    with files(monkeypatch, checks_gpu, {checks_gpu.DRIVER_FILE: None}):
        assert checks_gpu.driver_version() == "575.57.08"  # one GPU: one line
    assert calls == [
        (
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            {"capture_output": True, "text": True, "check": True, "timeout": 30},
        )
    ]


# --- checks_cpu.os_name ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nVERSION_ID="22.04"\n', "ubuntu22.04"),
        ('PRETTY_NAME="Debian GNU/Linux trixie/sid"\nID=debian\n', "debian"),  # testing/sid: no VERSION_ID
        ('NAME="Something"\nVERSION_ID="1"\n', "unknown1"),  # no ID
    ],
)
def test_os_name_from_os_release(monkeypatch: pytest.MonkeyPatch, text: str, expected: str) -> None:
    with files(monkeypatch, checks_cpu, {"/etc/os-release": text}):
        assert checks_cpu.os_name() == expected


# --- checks_cpu.verdict and _cover ----------------------------------------------------------------------


def test_ptx_of_the_target_itself_is_jit_compiled() -> None:
    assert checks_cpu.verdict("sm_90", [], ["compute_90"]) == ("ptx", "compute_90")
    assert checks_cpu.verdict("sm_90", [], ["compute_100"]) == ("none", "")


def test_arch_specific_ptx_is_never_jit_compiled_for_another_gpu() -> None:
    assert checks_cpu.verdict("sm_100", [], ["compute_90a"]) == ("none", "")
    assert checks_cpu.verdict("sm_100", [], ["compute_90a", "compute_80"]) == ("ptx", "compute_80")


def test_cover_lines_with_empty_code_lists(tmp_path: Path) -> None:
    ctx = context(tmp_path, arch_list=[])
    with pytest.raises(Skipped) as skipped:
        checks_cpu._cover(ctx, "torch", [], [])
    assert str(skipped.value) == "no target architecture (give --arch); torch has no SASS"
    with pytest.raises(Failed) as failed:
        checks_cpu._cover(context(tmp_path, arch="sm_90"), "torch", [], ["compute_100", "compute_120"])
    assert str(failed.value) == "torch has no code for sm_90 (SASS: none; PTX: compute_100 compute_120)"
    with pytest.raises(Failed) as failed:
        checks_cpu._cover(context(tmp_path, arch="sm_90"), "torch", ["sm_100", "sm_120"], [])
    assert str(failed.value) == "torch has no code for sm_90 (SASS: sm_100 sm_120; PTX: none)"


# --- checks_profiler ------------------------------------------------------------------------------------


def test_read_trace_takes_a_trace_object_or_a_bare_list(tmp_path: Path) -> None:
    event = {"cat": "cpu_op", "name": "aten::convolution"}
    wrapped, bare, other = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    wrapped.write_text(json.dumps({"traceEvents": [event, 3], "other": []}))
    bare.write_text(json.dumps([event, "x"]))
    other.write_text(json.dumps({"events": [event]}))
    assert checks_profiler.read_trace(str(wrapped)) == [event]
    assert checks_profiler.read_trace(str(bare)) == [event]
    with pytest.raises(Failed) as failed:
        checks_profiler.read_trace(str(other))
    assert str(failed.value) == "the profiler's Chrome trace has no traceEvents list"


def test_operators_names_what_is_missing_and_counts_the_names() -> None:
    events: list[dict[str, Any]] = [
        {"cat": "cpu_op", "name": "aten::convolution"},
        {"cat": "cpu_op"},  # no name: counted as ""
        {"cat": "cpu_op", "name": ""},  # the same name
        {"cat": "user_annotation", "name": "Optimizer.step#SGD.step"},
        {"cat": "kernel", "name": "aten::convolution_backward"},  # not an operator category
        {"cat": "cpu_op", "name": "aten::convolution_backward_x"},  # not the name, and no '#' to end a prefix
    ]
    with pytest.raises(Failed) as failed:
        checks_profiler.operators(events)
    assert str(failed.value) == (
        "torch.profiler's Chrome trace lacks aten::convolution_backward (4 operator names recorded): "
        "the profiler did not record the training step"
    )
    two = [{"cat": "cpu_op", "name": "aten::convolutionX"}, {"cat": "cpu_op", "name": "aten::linear"}]
    with pytest.raises(Failed) as failed:
        checks_profiler.operators(two)
    assert "lacks aten::convolution, aten::convolution_backward, Optimizer.step# (2 operator names" in str(failed.value)


def test_no_kernel_with_libcupti_loaded_names_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    maps = (
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libc.so.6\n"
        "7f02-7f03 r-xp 00000000 08:01 2 /opt/venv/nvidia/cuda_cupti/lib/libcupti.so.12\n"
    )
    with files(monkeypatch, checks_cpu, {"/proc/self/maps": maps}), pytest.raises(Failed) as failed:
        checks_profiler.kernels([{"cat": "cpu_op"}])
    assert str(failed.value) == (
        "torch.profiler recorded no CUDA kernel although /opt/venv/nvidia/cuda_cupti/lib/libcupti.so.12 is loaded"
    )
    assert checks_profiler.kernels([{"cat": "kernel"}, {"cat": "kernel"}, {"cat": "cpu_op"}]) == 2


def test_cupti_package_reads_torchs_own_requirement(monkeypatch: pytest.MonkeyPatch) -> None:
    def requires(name: str) -> list[str]:
        if name != "torch":
            raise metadata.PackageNotFoundError(name)
        return ["filelock", 'nvidia-cuda-cupti-cu12==12.8.90; platform_system == "Linux"']

    monkeypatch.setattr(metadata, "requires", requires)  # checks_profiler calls metadata.requires
    assert checks_profiler.cupti_package() == "install nvidia-cuda-cupti-cu12==12.8.90 (torch's requirement)"


# --- checks_determinism ---------------------------------------------------------------------------------


def test_a_runs_report_is_read_only_after_a_clean_exit(tmp_path: Path) -> None:
    log, report = tmp_path / "run2.log", tmp_path / "run2.json"
    log.write_text("one\ntwo\nthree\nTraceback: boom\n")
    report.write_text(json.dumps({"deterministic": True, "losses": []}))
    assert checks_determinism._report(2, procs.Finished(0, str(log), 1.0), str(report)) == {
        "deterministic": True,
        "losses": [],
    }
    with pytest.raises(Failed) as failed:
        checks_determinism._report(2, procs.Finished(1, str(log), 1.0), str(report))
    assert str(failed.value) == "run 2 exited with code 1: two | three | Traceback: boom"
    with pytest.raises(Failed) as failed:
        checks_determinism._report(2, procs.Finished(0, str(log), 1.0), str(tmp_path / "missing.json"))
    assert str(failed.value) == "run 2 exited with code 0: two | three | Traceback: boom"


def test_compare_names_the_run_and_both_digests() -> None:
    good = {"deterministic": True, "losses": [(1.5).hex(), (0.5).hex()], "weights": "a" * 20}
    with pytest.raises(Failed) as failed:
        checks_determinism.compare(good, dict(good, deterministic=False))
    assert str(failed.value).startswith("run 2: ")
    with pytest.raises(Failed) as failed:
        checks_determinism.compare(dict(good, deterministic=False), good)
    assert str(failed.value).startswith("run 1: ")
    with pytest.raises(Failed) as failed:
        checks_determinism.compare(good, dict(good, weights="b" * 20))
    assert "(digest aaaaaaaaaaaa against bbbbbbbbbbbb)" in str(failed.value)


# --- checks_ddp -----------------------------------------------------------------------------------------


def ddp_rank(number: int, **changes: Any) -> dict[str, Any]:
    found = {
        "rank": number,
        "world": 3,
        "before": f"start{number}",
        "broadcast": "rank0-weights",
        "after": "trained-digest-0123456789",
        "grad_error": 0.0,
        "grad_spread": 0.3,
        "losses": [2.0, 1.9, 1.0, 1.7],
        "step_seconds": 0.05,
    }
    found.update(changes)
    return found


def test_ddp_collect_when_every_rank_finished_or_wrote_its_report(tmp_path: Path) -> None:
    for number in (0, 1):
        (tmp_path / f"rank{number}.json").write_text(json.dumps(ddp_rank(number)))
    hung = procs.Finished(None, str(tmp_path / "torchrun.log"), 84.0)
    with pytest.raises(Failed) as failed:
        checks_ddp.collect(str(tmp_path), 2, hung, 84.0)
    assert str(failed.value).endswith("ranks were stopped): every rank had finished")
    crashed = procs.Finished(3, str(tmp_path / "torchrun.log"), 9.0)  # no torchrun log: nothing to quote
    with pytest.raises(Failed) as failed:
        checks_ddp.collect(str(tmp_path), 2, crashed, 84.0)
    assert str(failed.value) == "torchrun exited with code 3: every rank wrote its report"
    assert [r["rank"] for r in checks_ddp.collect(str(tmp_path), 2, procs.Finished(0, "", 9.0), 84.0)] == [0, 1]
    (tmp_path / "rank1.json").unlink()
    with pytest.raises(Failed) as failed:  # a clean exit all the same: a rank is missing
        checks_ddp.collect(str(tmp_path), 2, procs.Finished(0, str(tmp_path / "torchrun.log"), 9.0), 84.0)
    assert str(failed.value) == "torchrun exited with code 0: rank 1 wrote nothing"


def test_ddp_verdict_bounds_and_lines() -> None:
    at_tolerance = [ddp_rank(0), ddp_rank(1, grad_error=checks_ddp.GRAD_TOLERANCE), ddp_rank(2)]
    with pytest.raises(Failed, match="rank 1: DDP's gradient differs"):
        checks_ddp.verdict(at_tolerance)  # the tolerance itself is too much
    with pytest.raises(Failed) as failed:
        checks_ddp.verdict([ddp_rank(0, grad_spread=0.0), ddp_rank(1, grad_spread=0.0), ddp_rank(2, grad_spread=0.0)])
    assert str(failed.value) == "every rank computed the same gradient: the ranks did not train on different data"
    drifted = [ddp_rank(0), ddp_rank(1, after="drifted-digest-abcdefghij"), ddp_rank(2, after="other")]
    with pytest.raises(Failed) as failed:
        checks_ddp.verdict(drifted)
    assert str(failed.value) == (
        "after 4 steps the parameters of rank(s) 1, 2 differ from rank 0's "
        "(digest drifted-dige against trained-dige): the ranks desynchronised"
    )
    # the last loss against 90 % of the first (1.8): the second or the last but one would decide otherwise
    for losses in ([2.0, 1.9, 1.9, 1.7], [2.0, 1.0, 1.0, 1.7]):
        assert checks_ddp.verdict([ddp_rank(n, losses=losses) for n in range(3)])["last_loss"] == 1.7
    edge = [2.0, 1.0, 1.9, 1.8]  # exactly 90 % of the start is not below it
    with pytest.raises(Failed) as failed:
        checks_ddp.verdict([ddp_rank(n, losses=edge) for n in range(3)])
    assert str(failed.value) == (
        "the loss (mean over the ranks) went 2.0000 -> 1.8000 in 4 steps; expected below 90% of the start"
    )
    assert checks_ddp.verdict([ddp_rank(n, losses=[2.0, 3.0, 1.0, 1.7]) for n in range(3)]) is not None


# --- checks_onnx, checks_compile, checks_determinism: what a torch module has or lacks -------------------


def test_onnxruntime_missing_fails_an_inference_image_and_skips_another(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` raises ImportError
    with pytest.raises(Failed) as failed:
        checks_onnx.onnxruntime(context(tmp_path, flavor="inference"))
    assert str(failed.value).startswith("an inference image without a working onnxruntime: import of onnxruntime")
    with pytest.raises(Skipped) as skipped:
        checks_onnx.onnxruntime(context(tmp_path, flavor="runtime"))
    assert str(skipped.value) == "no onnxruntime (not an inference image)"


def test_onnx_runtime_falling_back_names_the_providers_it_has_and_the_likely_causes() -> None:
    ort = types.SimpleNamespace(get_available_providers=lambda: ["AzureExecutionProvider", "CPUExecutionProvider"])
    cpu_only = types.SimpleNamespace(get_providers=lambda: ["CPUExecutionProvider"])
    none = types.SimpleNamespace(get_providers=lambda: [])
    causes = "onnxruntime-gpu could not load CUDA/cuDNN of torch's majors, or a CPU onnxruntime is installed"
    with pytest.raises(Failed) as fell_back:
        checks_onnx.first_provider(cpu_only, ort)
    assert str(fell_back.value) == (
        "ONNX Runtime fell back to CPUExecutionProvider (session providers: ['CPUExecutionProvider']; available: "
        f"AzureExecutionProvider, CPUExecutionProvider): {causes}"
    )
    with pytest.raises(Failed) as nothing:
        checks_onnx.first_provider(none, ort)
    assert str(nothing.value).startswith("ONNX Runtime fell back to no provider (session providers: []; available: ")
    first = types.SimpleNamespace(get_providers=lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert checks_onnx.first_provider(first, ort) == ["CUDAExecutionProvider", "CPUExecutionProvider"]


def test_first_line_of_an_error() -> None:
    assert checks_compile._first_line(RuntimeError("")) == "RuntimeError: "
    assert checks_compile._first_line(ValueError("  first\nsecond")) == "ValueError: first"


def test_compile_checks_use_fresh_inductor_and_triton_caches_and_put_the_old_ones_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a kernel cached by an earlier run is loaded, not compiled: the compiler the image needs would go unchecked
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/earlier/inductor")
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    with checks_compile._private_cache():
        inductor = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
        assert inductor.is_dir() and not list(inductor.iterdir())
        assert os.environ["TRITON_CACHE_DIR"] == str(inductor / "triton")
    assert not inductor.exists()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/earlier/inductor" and "TRITON_CACHE_DIR" not in os.environ


def test_the_compile_verdict_names_each_error_and_fails_at_the_tolerance_itself() -> None:
    with pytest.raises(Failed) as at_tolerance:
        checks_compile._verdict("the CPU", (checks_compile.COMPILE_TOLERANCE, 0.0))
    assert str(at_tolerance.value) == (
        "torch.compile on the CPU differs from eager: output 1.00e-04, gradients 0.00e+00 (tolerance 0.0001)"
    )
    with pytest.raises(Failed) as gradients:
        checks_compile._verdict("the GPU", (2e-5, 3e-4))
    assert "output 2.00e-05, gradients 3.00e-04 " in str(gradients.value)
    assert checks_compile._verdict("the GPU", (1e-6, 2e-5)) == "output 1.0e-06, gradients 2.0e-05 from eager"


def fake_inductor(monkeypatch: pytest.MonkeyPatch, **settings: Any) -> list[dict[str, Any]]:
    """torch._inductor.config with these settings (dotted names: nested); what config.patch was given."""
    patched: list[dict[str, Any]] = []

    def patch(known: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        patched.append(known)
        return ("patch", known)

    config = types.SimpleNamespace(patch=patch)
    for name, value in settings.items():
        holder = config
        *parents, last = name.split(".")
        for part in parents:
            holder = holder.__dict__.setdefault(part, types.SimpleNamespace())
        setattr(holder, last, value)
    inductor = types.ModuleType("torch._inductor")
    inductor.config = config  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    monkeypatch.setitem(sys.modules, "torch._inductor", inductor)
    return patched


@pytest.mark.parametrize(
    ("machine", "expected"),
    [
        ("x86_64", {"compile_threads": 1, "cpp_cache_precompile_headers": False, "cpp.vec_isa_ok": True}),
        ("AMD64", {"compile_threads": 1, "cpp_cache_precompile_headers": False, "cpp.vec_isa_ok": True}),
        ("aarch64", {"compile_threads": 1, "cpp_cache_precompile_headers": False}),
    ],
)
def test_fast_inductor_sets_what_this_inductor_has(
    monkeypatch: pytest.MonkeyPatch, machine: str, expected: dict[str, Any]
) -> None:
    patched = fake_inductor(
        monkeypatch, compile_threads=8, cpp_cache_precompile_headers=True, **{"cpp.vec_isa_ok": None}
    )
    monkeypatch.setattr(platform, "machine", lambda: machine)
    assert checks_compile._fast_inductor() == ("patch", expected)
    assert patched == [expected]


def test_fast_inductor_leaves_out_settings_an_older_inductor_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_inductor(monkeypatch, compile_threads=8, cpp=types.SimpleNamespace())  # no cpp.vec_isa_ok, no headers
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    assert checks_compile._fast_inductor() == ("patch", {"compile_threads": 1})


def test_determinism_needs_use_deterministic_algorithms(monkeypatch: pytest.MonkeyPatch) -> None:
    old = types.ModuleType("torch")
    old.__version__ = "1.7.1"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", old)
    with pytest.raises(Skipped) as skipped:
        checks_determinism._torch()
    assert str(skipped.value) == "torch 1.7.1 has no torch.use_deterministic_algorithms (torch >= 1.8)"
    old.use_deterministic_algorithms = print  # type: ignore[attr-defined]
    assert checks_determinism._torch() is old


# --- checks_gpu._cuda and unreachable: the whole lines ---------------------------------------------------


def test_no_gpu_reason_skips_the_gpu_checks_only_where_every_one_would_skip(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install = Installer(monkeypatch)
    monkeypatch.setattr(checks_gpu, "DEVICE_NODES", str(tmp_path / "dev" / "nvidia[0-9]*"))
    install(FakeImage(cuda=None))
    assert checks_gpu.no_gpu_reason(context(tmp_path)) == CPU_BUILD
    install(FakeImage(gpus=()))  # a CUDA build, no GPU visible, no device node
    assert checks_gpu.no_gpu_reason(context(tmp_path)) == NO_GPU
    # --require-gpu: each GPU check runs and fails saying why, so no reason to skip them all
    assert checks_gpu.no_gpu_reason(context(tmp_path, require_gpu=True)) is None


def test_a_device_node_without_cuda_and_require_gpu_without_a_gpu_give_whole_lines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    Installer(monkeypatch)(FakeImage(gpus=()))
    monkeypatch.setattr(checks_gpu, "DEVICE_NODES", str(tmp_path / "dev" / "nvidia[0-9]*"))
    monkeypatch.setattr(checks_gpu, "driver_version", lambda: "550.54.15")
    with pytest.raises(Failed) as failed:
        checks_gpu._cuda(context(tmp_path, require_gpu=True))
    assert str(failed.value) == (
        "--require-gpu, but torch.cuda.is_available() is False (no GPU visible, or the driver is too old for this "
        "CUDA build)"
    )
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia1").touch()
    with pytest.raises(Failed) as failed:
        checks_gpu._cuda(context(tmp_path, min_driver=None))
    assert str(failed.value) == (
        f"{tmp_path}/dev/nvidia1 exists but torch.cuda.is_available() is False: the host's driver is 550.54.15; "
        "this image (CUDA 13.0) needs driver >= unknown (no manifest). Update the host driver, or start the "
        "container with the NVIDIA runtime (--gpus)"
    )


def test_squares_items_are_3x64x64_filled_with_their_index(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[Any, float]] = []

    def full(shape: Any, value: float) -> float:
        made.append((shape, value))
        return value

    torch = types.ModuleType("torch")
    torch.full = full  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert checks_data.Squares(5)[3] == 3.0
    assert made == [((3, 64, 64), 3.0)]


def test_sizes_are_the_small_ones_on_a_small_device(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    assert checks_gpu_perf._sizes(ctx, "full", "small") == "full"
    ctx.small = True
    assert checks_gpu_perf._sizes(ctx, "full", "small") == "small"


# --- checks_compile._triton, checks_nccl._free_port ---------------------------------------------------------


def test_the_compile_message_names_triton_or_says_it_is_not_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    assert checks_compile._triton() == "Triton not importable"
    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(__version__="3.4.0"))
    assert checks_compile._triton() == "Triton 3.4.0"


def test_the_rendezvous_port_is_one_the_system_handed_out() -> None:
    # port 0 asks the kernel for a free ephemeral port; a fixed low one may be taken or, for a user, refused
    port = checks_nccl._free_port()
    assert 1024 <= port <= 65535
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))  # free: the ranks' rendezvous can listen on it


# --- checks_gpu_perf._only: one attention backend at a time, on torch >= 2.3 and on 2.0-2.2 ---------------------


def _attention_torch(*, new: bool) -> Any:
    """A torch module with only what `_only` reads: torch.nn.attention (>= 2.3) or torch.backends.cuda.sdp_kernel."""
    names = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")
    attention = types.SimpleNamespace(
        sdpa_kernel=lambda backends: ("sdpa_kernel", backends),
        SDPBackend=types.SimpleNamespace(**{n: n for n in names}),
    )
    return types.SimpleNamespace(
        nn=types.SimpleNamespace(attention=attention) if new else types.SimpleNamespace(),
        backends=types.SimpleNamespace(cuda=types.SimpleNamespace(sdp_kernel=lambda **flags: ("sdp_kernel", flags))),
    )


@pytest.mark.parametrize(
    ("backend", "kernel"),
    [
        ("math", "MATH"),
        ("flash", "FLASH_ATTENTION"),
        ("efficient", "EFFICIENT_ATTENTION"),
        ("cudnn", "CUDNN_ATTENTION"),
    ],
)
def test_only_one_attention_backend_on_torch_2_3_and_newer(backend: str, kernel: str) -> None:
    assert checks_gpu_perf._only(_attention_torch(new=True), backend) == ("sdpa_kernel", [kernel])


@pytest.mark.parametrize("backend", ["math", "flash", "efficient"])
def test_only_one_attention_backend_on_torch_2_0_to_2_2(backend: str) -> None:
    flags = {"enable_flash": backend == "flash", "enable_math": backend == "math"}
    flags["enable_mem_efficient"] = backend == "efficient"
    assert checks_gpu_perf._only(_attention_torch(new=False), backend) == ("sdp_kernel", flags)
    # torch.nn.attention without sdpa_kernel (as in 2.2): still the old switch
    old = _attention_torch(new=False)
    old.nn.attention = types.SimpleNamespace()
    assert checks_gpu_perf._only(old, backend) == ("sdp_kernel", flags)


def test_backends_tries_cudnn_attention_only_where_torch_has_it() -> None:
    without = types.SimpleNamespace(nn=types.SimpleNamespace())  # torch < 2.0: no torch.nn.attention
    assert checks_gpu_perf._backends(without, (9, 0)) == [("efficient", True), ("flash", True)]
    older = _attention_torch(new=True)
    older.nn.attention.SDPBackend = types.SimpleNamespace(MATH="MATH")  # torch 2.3-2.4: no CUDNN_ATTENTION
    assert checks_gpu_perf._backends(older, (8, 6)) == [("efficient", True), ("flash", True)]
    newer = _attention_torch(new=True)
    assert checks_gpu_perf._backends(newer, (10, 0)) == [("efficient", True), ("flash", False), ("cudnn", False)]
    assert checks_gpu_perf._backends(newer, (7, 5)) == [("efficient", True), ("flash", False), ("cudnn", False)]


# --- checks_gpu.within and between: every tolerance the GPU checks judge by --------------------------------------


def test_an_error_passes_only_strictly_below_its_tolerance_and_nan_never() -> None:
    assert checks_gpu.within(0.99e-5, 1e-5)
    assert not checks_gpu.within(1e-5, 1e-5)  # exactly at the tolerance fails
    assert not checks_gpu.within(float("nan"), 1e-5)
    assert not checks_gpu.within(float("inf"), 1e-5)


def test_a_precision_s_error_range_holds_both_ends_and_not_nan() -> None:
    low, high = checks_gpu.TF32_MIN, checks_gpu.TF32_MAX
    assert checks_gpu.between(low, low, high) and checks_gpu.between(high, low, high)
    assert not checks_gpu.between(low * 0.999, low, high)
    assert not checks_gpu.between(high * 1.001, low, high)
    assert not checks_gpu.between(float("nan"), low, high)
