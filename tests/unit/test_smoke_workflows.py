"""The workflow checks' verdicts (issue 20: ddp, determinism, profiler), from the reports their processes write.

No process is started here: the ranks' and runs' reports are written by hand, each breaking one promise, and the
fake torch drives what a torch without the feature does. Real torch runs them in test_smoke_workflows_torch.py.
"""

from __future__ import annotations

import json
import os
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from fake_torch import FakeImage, Gpu, Installer
from smoke_kit import context, outcome

from builder.smoke import checks_ddp, checks_determinism, checks_profiler, ddp_rank, procs
from builder.smoke.framework import FAIL, SKIP, Failed


def rank(number: int, **changes: Any) -> dict[str, Any]:
    found = {
        "rank": number,
        "world": 2,
        "before": f"start{number}",  # each rank initialises differently
        "broadcast": "rank0-weights",
        "after": "trained",
        "grad_error": 0.0,
        "grad_spread": 0.3,
        "losses": [2.7, 2.4, 2.1, 1.9],
        "step_seconds": 0.05,
    }
    found.update(changes)
    return found


def test_ranks_that_kept_every_promise_pass() -> None:
    found = checks_ddp.verdict([rank(0), rank(1)])
    assert found == {
        "world": 2,
        "steps": 4,
        "first_loss": 2.7,
        "last_loss": 1.9,
        "grad_error": 0.0,
        "different_starts": 2,
        "step_seconds": 0.05,
    }


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"broadcast": "own"}, "DDP did not broadcast rank 0's weights: the ranks started from different parameters"),
        ({"grad_error": 3e-3}, "rank 1: DDP's gradient differs from the mean of the ranks' own gradients by 3.0e-03"),
        (
            {"grad_error": float("nan")},
            "rank 1: DDP's gradient differs from the mean of the ranks' own gradients by nan",
        ),
        (
            {"after": "drifted"},
            "after 4 steps the parameters of rank(s) 1 differ from rank 0's (digest drifted against",
        ),
    ],
)
def test_each_broken_promise_fails_naming_it(changes: dict[str, Any], expected: str) -> None:
    with pytest.raises(Failed) as failed:
        checks_ddp.verdict([rank(0), rank(1, **changes)])
    assert str(failed.value).startswith(expected), failed.value


def test_ranks_on_the_same_data_do_not_show_averaging() -> None:
    with pytest.raises(Failed, match="every rank computed the same gradient"):
        checks_ddp.verdict([rank(0, grad_spread=0.0), rank(1, grad_spread=0.0)])
    assert checks_ddp.verdict([rank(0, grad_spread=0.0, world=1)])["world"] == 1  # one GPU: nothing to average


def test_a_loss_that_did_not_fall_fails() -> None:
    flat = [2.7, 2.7, 2.6, 2.5]
    with pytest.raises(Failed, match=r"the loss \(mean over the ranks\) went 2.7000 -> 2.5000 in 4 steps; expected"):
        checks_ddp.verdict([rank(0, losses=flat), rank(1, losses=flat)])


def _logs(folder: Path, **lines: str) -> None:
    for name, text in lines.items():
        (folder / f"{name}.log").write_text(text)


def test_a_hung_rank_is_reported_with_its_last_words(tmp_path: Path) -> None:
    _logs(tmp_path, rank0="rank 0: importing torch\nrank 0: joining the process group (gloo, world 2)\n")
    (tmp_path / "rank1.log").write_text("rank 1: importing torch (pid 7)\n\n")
    hung = procs.Finished(None, str(tmp_path / "torchrun.log"), 84.0)
    with pytest.raises(Failed) as failed:
        checks_ddp.collect(str(tmp_path), 2, hung, 84.0)
    assert str(failed.value) == (
        "the ranks did not finish within 84 s (a rank that never joined, or hung; torchrun and its ranks were "
        "stopped): rank 0's last words: 'rank 0: joining the process group (gloo, world 2)'; "
        "rank 1's last words: 'rank 1: importing torch (pid 7)'"
    )


def test_a_crashed_rank_is_reported_with_its_last_words_and_torchruns(tmp_path: Path) -> None:
    (tmp_path / "rank0.json").write_text(json.dumps(rank(0)))
    _logs(
        tmp_path, rank1="rank 1: failed: RuntimeError: Connection reset by peer\n", torchrun="a\nb\nChildFailedError\n"
    )
    crashed = procs.Finished(1, str(tmp_path / "torchrun.log"), 9.0)
    with pytest.raises(Failed) as failed:
        checks_ddp.collect(str(tmp_path), 2, crashed, 84.0)
    assert str(failed.value) == (
        "torchrun exited with code 1: rank 1's last words: 'rank 1: failed: RuntimeError: Connection reset by peer' "
        "(torchrun: a | b | ChildFailedError)"
    )


def test_a_rank_that_wrote_nothing_says_so(tmp_path: Path) -> None:
    with pytest.raises(Failed, match="rank 0 wrote nothing; rank 1 wrote nothing"):
        checks_ddp.collect(str(tmp_path), 2, procs.Finished(2, str(tmp_path / "torchrun.log"), 1.0), 84.0)


def test_the_reports_of_ranks_that_finished_are_read(tmp_path: Path) -> None:
    for number in (0, 1):
        (tmp_path / f"rank{number}.json").write_text(json.dumps(rank(number)))
    found = checks_ddp.collect(str(tmp_path), 2, procs.Finished(0, "", 5.0), 84.0)
    assert [r["rank"] for r in found] == [0, 1]


@pytest.mark.parametrize(
    ("gpus", "counts"), [(1, [1]), (2, [1, 2]), (3, [1, 2, 3]), (6, [1, 2, 4, 6]), (8, [1, 2, 4, 8])]
)
def test_ddp_steps_are_timed_on_1_2_4_and_every_gpu(gpus: int, counts: list[int]) -> None:
    assert checks_ddp.gpu_counts(gpus) == counts


def _launches(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, image: FakeImage, step_seconds: Any = None
) -> list[tuple[Any, ...]]:
    """The fake torch with distributed, no torchrun beside the interpreter, and `launch` faked: each call
    (world, run, backend, device, budget) recorded, answered by `world` ranks that kept every promise."""
    Installer(monkeypatch)(image)
    monkeypatch.setattr(checks_ddp, "_distributed", lambda: None)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    launched: list[tuple[Any, ...]] = []

    def launch(world: int, run: dict[str, Any], backend: str, device: str, budget: float) -> list[dict[str, Any]]:
        launched.append((world, run, backend, device, budget))
        timing = {} if step_seconds is None else {"step_seconds": step_seconds(world)}
        return [rank(r, world=world, **timing) for r in range(world)]

    monkeypatch.setattr(checks_ddp, "launch", launch)
    return launched


def test_ddp_cpu_launches_two_gloo_ranks_on_the_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    launched = _launches(monkeypatch, tmp_path, FakeImage())
    ctx = context(tmp_path)
    ctx.timeout_scale = 2.0
    assert outcome("ddp.cpu", ctx) == (
        "passed",
        "2 ranks (gloo, python -m torch.distributed.run): parameters bit-identical after 4 steps, from 2 different "
        "starts; gradient = the ranks' mean (0e+00); loss 2.700 -> 1.900",
    )
    assert launched == [(2, checks_ddp.CPU_RUN, "gloo", "cpu", pytest.approx(120 * 2.0 * 0.7))]
    assert ctx.observed["ddp_cpu"]["world"] == 2


class FakeProcs:
    """procs.start and procs.wait_all replaced: what each process was started with, and the budgets waited on.
    Starting one writes the reports its real counterpart would (`reports(config)` -> {file name: report})."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, reports: Any, codes: dict[int, int | None] | None = None
    ) -> None:
        self.reports, self.codes = reports, codes or {}  # codes: the exit code of the Nth process started (else 0)
        self.started: list[tuple[list[str], str, dict[str, str], dict[str, Any]]] = []
        self.waited: list[tuple[list[int], float]] = []
        monkeypatch.setattr(procs, "start", self.start)
        monkeypatch.setattr(procs, "wait_all", self.wait_all)

    def start(self, argv: list[str], log: str, env: dict[str, str] | None = None) -> int:
        config = json.loads(argv[-1])
        self.started.append((argv, log, dict(env or {}), config))
        for path, report in self.reports(config).items():
            Path(path).write_text(json.dumps(report))
        return len(self.started)

    def wait_all(self, started: list[int], budget: float) -> list[procs.Finished]:
        self.waited.append((started, budget))
        return [procs.Finished(self.codes.get(n, 0), self.started[n - 1][1], 1.0) for n in started]


def test_ddp_launch_starts_torchrun_with_the_ranks_configuration(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(checks_ddp, "cpu_threads", lambda: (5, "test"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # no torchrun beside it
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    fake = FakeProcs(monkeypatch, lambda c: {os.path.join(c["out"], f"rank{r}.json"): rank(r) for r in range(2)})
    found = checks_ddp.launch(2, {"steps": 6}, "gloo", "cpu", 80.0)
    assert [r["rank"] for r in found] == [0, 1]
    [(argv, log, env, config)] = fake.started
    folder = Path(config["out"])
    assert argv == [
        str(tmp_path / "python"),
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "--local_addr=127.0.0.1",
        procs.PACKAGE_DIR,
        "--smoke-helper",
        "ddp-rank",
        argv[-1],
    ]
    # the ranks' own timeout is 3/4 of the budget: a rank that waits for a peer gives up before torchrun is stopped
    assert config == {"steps": 6, "out": str(folder), "backend": "gloo", "device": "cpu", "timeout": 60.0, "threads": 2}
    assert (env["OMP_NUM_THREADS"], env["PYTHONUNBUFFERED"], env["PATH"]) == ("2", "1", os.environ["PATH"])
    assert Path(log) == folder / "torchrun.log" and folder.name.startswith("torchyard-ddp-")
    assert not folder.exists()  # removed with what the ranks wrote
    assert fake.waited == [([1], 80.0)]
    fake.started.clear()
    with pytest.raises(Failed, match="rank 2 wrote nothing"):  # 8 ranks asked for, 2 reports written
        checks_ddp.launch(8, {"steps": 6}, "nccl", "cuda", 80.0)  # more ranks than CPUs: one thread each
    assert fake.started[0][3]["threads"] == 1 and fake.started[0][2]["OMP_NUM_THREADS"] == "1"


def test_ddp_launch_that_torchrun_did_not_finish_names_its_budget(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    FakeProcs(monkeypatch, lambda c: {os.path.join(c["out"], "rank0.json"): rank(0)}, codes={1: None})
    with pytest.raises(Failed, match=r"^the ranks did not finish within 80 s .*: rank 1 wrote nothing$"):
        checks_ddp.launch(2, {"steps": 6}, "gloo", "cpu", 80.0)


def test_determinism_run_that_fails_is_named_by_its_number(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    FakeProcs(monkeypatch, _determinism_reports, codes={2: 1})
    with pytest.raises(Failed, match=r"^run 2 exited with code 1: "):
        checks_determinism.runs([{"seed": 0}, {"seed": 1}, {"seed": 2}], 90.0, together=False)


def _determinism_reports(config: dict[str, Any]) -> dict[str, Any]:
    return {config["out"]: run(weights=f"seed{config['seed']}")}


def test_determinism_runs_each_in_a_process_of_its_own_with_its_own_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    fake = FakeProcs(monkeypatch, _determinism_reports)
    found = checks_determinism.runs([{"seed": 0}, {"seed": 1}, {"seed": 2}], 90.0, together=False)
    assert [f["weights"] for f in found] == ["seed0", "seed1", "seed2"]
    assert fake.waited == [([1], 30.0), ([2], 30.0), ([3], 30.0)]  # one after another, a third of the budget each
    folder = Path(fake.started[0][3]["out"]).parent
    assert folder.name.startswith("torchyard-determinism-") and not folder.exists()
    for number, (argv, log, env, config) in enumerate(fake.started, start=1):
        assert argv[:-1] == [sys.executable, procs.PACKAGE_DIR, "--smoke-helper", "determinism"]
        assert (config["out"], log) == (str(folder / f"run{number}.json"), str(folder / f"run{number}.log"))
        assert (env["CUBLAS_WORKSPACE_CONFIG"], env["PATH"]) == (":4096:8", os.environ["PATH"])
    fake.started.clear()
    fake.waited.clear()
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")  # the user's own setting is kept
    checks_determinism.runs([{"seed": 0}, {"seed": 1}], 60.0, together=True)
    assert fake.waited == [([1, 2], 60.0)]  # at once, in the whole budget
    assert [env["CUBLAS_WORKSPACE_CONFIG"] for _, _, env, _ in fake.started] == [":16:8", ":16:8"]


STEP_SECONDS = {1: 0.010, 2: 0.0125, 3: 0.015}  # a step on 1, 2 and 3 GPUs: images/s 6400, 10240, 12800 at 64


@pytest.mark.parametrize(("small", "batch"), [(False, 64), (True, 8)])
def test_gpu_ddp_times_every_gpu_count_and_names_the_scaling_at_all_of_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, small: bool, batch: int
) -> None:
    launched = _launches(
        monkeypatch, tmp_path, FakeImage(gpus=(Gpu(),) * 3), lambda world: STEP_SECONDS[world] * batch / 64
    )
    ctx = context(tmp_path)
    ctx.small, ctx.timeout_scale = small, 2.0
    status, message = outcome("gpu.ddp", ctx)
    run = checks_ddp.SMALL_GPU_RUN if small else checks_ddp.GPU_RUN
    # the check's 600 s, scaled by 2, 70 % of it for the runs, shared by the 3 GPU counts
    assert launched == [(n, run, "nccl", "cuda", pytest.approx(280.0)) for n in (1, 2, 3)]
    assert (status, message) == (
        "passed",
        "NCCL DDP (python -m torch.distributed.run): parameters bit-identical on every rank, gradients averaged, "
        f"loss fell; step time (batch {batch} per GPU): 1 GPU {10 * batch / 64:.1f} ms, 2 GPUs {12.5 * batch / 64:.1f}"
        f" ms, 3 GPUs {15 * batch / 64:.1f} ms; scaling at 3: 0.67",
    )
    observed = ctx.observed["ddp_gpu"]
    assert observed["batch_per_gpu"] == batch
    assert observed["images_per_second"] == pytest.approx({"1": 6400.0, "2": 10240.0, "3": 12800.0})
    assert observed["scaling_efficiency"] == pytest.approx({"1": 1.0, "2": 0.8, "3": 12800 / 19200})
    assert observed["step_seconds"] == {str(n): STEP_SECONDS[n] * batch / 64 for n in (1, 2, 3)}
    assert [observed["runs"][n]["world"] for n in ("1", "2", "3")] == [1, 2, 3]


def test_torchrun_beside_the_interpreter_else_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    monkeypatch.setattr(sys, "executable", str(python))
    assert checks_ddp.launcher() == [str(python), "-m", "torch.distributed.run"]
    script = tmp_path / "bin" / "torchrun"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert checks_ddp.launcher() == [str(script)]


# --- determinism -------------------------------------------------------------------------------------


def run(losses: tuple[float, ...] = (2.5, 2.1, 1.8), weights: str = "w1", **changes: Any) -> dict[str, Any]:
    found = {"losses": [x.hex() for x in losses], "weights": weights, "deterministic": True, "step_seconds": 0.1}
    found.update(changes)
    return found


def test_bitwise_equal_runs_pass() -> None:
    assert checks_determinism.compare(run(), run()) == (
        "losses and weights bitwise equal over 3 steps (loss 2.5000 -> 1.8000)"
    )


def test_a_last_bit_difference_in_a_loss_fails_naming_the_step() -> None:
    nudged = 2.1 + 2.1 * 2**-52  # the next float after 2.1: equal to four decimals, not bitwise
    with pytest.raises(Failed) as failed:
        checks_determinism.compare(run(), run((2.5, nudged, 1.8)))
    assert str(failed.value) == (
        f"the same seeded run gave different losses in two processes from step 2: 2.1 against {nudged!r} "
        "(a non-deterministic op ran)"
    )


def test_equal_losses_with_different_weights_fail() -> None:
    with pytest.raises(Failed, match="equal losses but different weights after 3 steps"):
        checks_determinism.compare(run(), run(weights="w2"))


def test_a_run_where_deterministic_algorithms_did_not_turn_on_fails() -> None:
    with pytest.raises(Failed, match=r"run 2: torch.are_deterministic_algorithms_enabled\(\) is False"):
        checks_determinism.compare(run(), run(deterministic=False))


def test_a_run_that_hangs_or_crashes_fails_with_its_words(tmp_path: Path) -> None:
    log = tmp_path / "run2.log"
    log.write_text("Traceback (most recent call last):\n  File x\nRuntimeError: CUDA error: out of memory\n")
    with pytest.raises(Failed, match=r"run 2 did not finish in 84 s; its last words: 'RuntimeError: CUDA error"):
        checks_determinism._report(2, procs.Finished(None, str(log), 84.0), str(tmp_path / "none.json"))
    with pytest.raises(Failed) as failed:
        checks_determinism._report(2, procs.Finished(1, str(log), 3.0), str(tmp_path / "none.json"))
    assert str(failed.value) == (
        "run 2 exited with code 1: Traceback (most recent call last): | File x | "
        "RuntimeError: CUDA error: out of memory"
    )


def _determinism(monkeypatch: pytest.MonkeyPatch, image: FakeImage, found: list[dict[str, Any]]) -> list[Any]:
    """The fake torch with use_deterministic_algorithms, and `runs` answering `found`: what it was asked."""
    modules = Installer(monkeypatch)(image)
    monkeypatch.setattr(modules["torch"], "use_deterministic_algorithms", lambda on: None, raising=False)
    asked: list[Any] = []

    def runs(configs: list[dict[str, Any]], budget: float, together: bool) -> list[dict[str, Any]]:
        asked.append((configs, budget, together))
        return found

    monkeypatch.setattr(checks_determinism, "runs", runs)
    return asked


@pytest.mark.parametrize(("cpus", "threads"), [(1, 1), (5, 2)])
def test_determinism_cpu_runs_two_processes_at_once_sharing_the_cpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cpus: int, threads: int
) -> None:
    reports = [run(weights="abcdef0123456789", threads=threads), run(weights="abcdef0123456789", threads=threads + 1)]
    asked = _determinism(monkeypatch, FakeImage(), reports)
    monkeypatch.setattr(checks_determinism, "cpu_threads", lambda: (cpus, "test"))
    ctx = context(tmp_path)
    ctx.timeout_scale = 2.0
    assert outcome("determinism.cpu", ctx) == (
        "passed",
        f"2 fresh processes, seed 0, {threads} thread(s) each: losses and weights bitwise equal over 3 steps "
        "(loss 2.5000 -> 1.8000)",
    )
    config = dict(checks_determinism.CPU_RUN, device="cpu", deterministic=True, threads=threads)
    assert asked == [([config, config], pytest.approx(120 * 2.0 * 0.7), True)]
    assert asked[0][0][0] is not asked[0][0][1]  # each run is told its own report file
    assert ctx.observed["determinism_cpu"] == {
        "steps": 3,
        "weights": "abcdef0123456789",
        "threads": threads,
        "threads_used": [threads, threads + 1],
    }


@pytest.mark.parametrize("small", [False, True])
def test_gpu_determinism_runs_two_deterministic_runs_and_a_default_one_after_another(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, small: bool
) -> None:
    workspace = ":4096:8"
    found = [
        run(step_seconds=0.03, cublas_workspace=workspace),
        run(step_seconds=0.05, cublas_workspace=workspace),
        run(step_seconds=0.02),
    ]
    asked = _determinism(monkeypatch, FakeImage(gpus=(Gpu(),)), found)
    ctx = context(tmp_path)
    ctx.small, ctx.timeout_scale = small, 2.0
    assert outcome("gpu.determinism", ctx) == (
        "passed",
        "2 fresh processes, seed 0, CUBLAS_WORKSPACE_CONFIG=:4096:8: losses and weights bitwise equal over 3 steps "
        "(loss 2.5000 -> 1.8000); a step takes 1.50x torch's default (non-deterministic) time",
    )
    base = dict(checks_determinism.SMALL_GPU_RUN if small else checks_determinism.GPU_RUN, device="cuda", threads=1)
    configs = [dict(base, deterministic=True), dict(base, deterministic=True), dict(base, deterministic=False)]
    assert asked == [(configs, pytest.approx(300 * 2.0 * 0.7), False)]
    assert ctx.observed["determinism_gpu"] == {
        "steps": 3,
        "batch": 8 if small else 64,
        "cublas_workspace_config": ":4096:8",
        "step_seconds_deterministic": 0.03,
        "step_seconds_default": 0.02,
        "cost": pytest.approx(1.5),
    }


def test_gpu_determinism_fails_when_the_cublas_setting_did_not_reach_the_first_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    found = [run(cublas_workspace=None), run(cublas_workspace=":4096:8"), run(cublas_workspace=":4096:8")]
    _determinism(monkeypatch, FakeImage(gpus=(Gpu(),)), found)
    assert outcome("gpu.determinism", context(tmp_path)) == (
        FAIL,
        "CUBLAS_WORKSPACE_CONFIG did not reach the run: cuBLAS is not deterministic without it",
    )


# --- profiler ----------------------------------------------------------------------------------------

STEP = [
    {"cat": "cpu_op", "name": "aten::convolution"},
    {"cat": "cpu_op", "name": "aten::convolution_backward"},
    {"cat": "user_annotation", "name": "Optimizer.step#SGD.step"},
]


def test_a_trace_with_the_steps_operators_passes() -> None:
    assert checks_profiler.operators(STEP).startswith("3 operators in the Chrome trace")


def test_a_trace_without_the_backward_fails_naming_it() -> None:
    with pytest.raises(Failed, match=r"lacks aten::convolution_backward \(2 operator names recorded\)"):
        checks_profiler.operators([STEP[0], STEP[2]])


def test_a_trace_that_is_not_json_fails(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text("{not json")
    with pytest.raises(Failed, match="the profiler's Chrome trace is not JSON"):
        checks_profiler.read_trace(str(tmp_path / "t.json"))
    (tmp_path / "t.json").write_text(json.dumps(STEP))  # the format also allows a bare list of events
    assert checks_profiler.read_trace(str(tmp_path / "t.json")) == STEP


def test_no_kernels_without_libcupti_names_torchs_requirement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks_profiler, "_loaded", lambda fragment: None)
    # torch 2.14.1+cu130's own requirement (read in the image with importlib.metadata)
    requires = [
        "filelock",
        "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.3; "
        'platform_system == "Linux"',
    ]
    monkeypatch.setattr(metadata, "requires", lambda name: requires)
    with pytest.raises(Failed) as failed:
        checks_profiler.kernels(STEP)
    assert str(failed.value) == (
        "torch.profiler recorded no CUDA kernel and libcupti is not loaded: install cuda-toolkit[cupti]==13.0.3 "
        "(torch's requirement)"
    )
    cu12 = ["nvidia-cuda-cupti-cu12==12.8.90; platform_system == 'Linux'"]
    monkeypatch.setattr(metadata, "requires", lambda name: cu12)
    assert checks_profiler.cupti_package() == "install nvidia-cuda-cupti-cu12==12.8.90 (torch's requirement)"
    monkeypatch.setattr(metadata, "requires", lambda name: [])
    assert checks_profiler.cupti_package().startswith("install the nvidia-cuda-cupti wheel of this CUDA, or the")


def test_no_kernels_with_libcupti_loaded_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks_profiler, "_loaded", lambda fragment: "/venv/nvidia/cu13/lib/libcupti.so.13")
    with pytest.raises(
        Failed, match=re.escape("no CUDA kernel although /venv/nvidia/cu13/lib/libcupti.so.13 is loaded")
    ):
        checks_profiler.kernels(STEP)
    assert checks_profiler.kernels([*STEP, {"cat": "kernel", "name": "sm90_xmma"}]) == 1


# --- a torch without the feature -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ddp.cpu", "torch 2.14.1+cu130 has no torch.distributed"),
        ("determinism.cpu", "torch 2.14.1+cu130 has no torch.use_deterministic_algorithms (torch >= 1.8)"),
        ("profiler.cpu", "torch 2.14.1+cu130 has no torch.profiler (torch >= 1.8.1)"),
    ],
)
def test_a_torch_without_the_feature_skips(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, expected: str
) -> None:
    Installer(monkeypatch)(FakeImage())
    assert outcome(name, context(tmp_path)) == (SKIP, expected)


def test_a_torch_built_without_distributed_fails_ddp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from types import ModuleType

    modules = Installer(monkeypatch)(FakeImage())
    dist = ModuleType("torch.distributed")
    dist.is_available = lambda: False  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    monkeypatch.setattr(modules["torch"], "distributed", dist, raising=False)
    assert outcome("ddp.cpu", context(tmp_path)) == (
        FAIL,
        "torch 2.14.1+cu130 was built without distributed support: DDP cannot run",
    )


# --- ddp_rank.main: what a rank that fails leaves in its log ---------------------------------------------------


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (
            RuntimeError("\n  NCCL error: unhandled system error\nLast error: socket timeout\n"),
            "RuntimeError: NCCL error: unhandled system error",
        ),
        (KeyError("backend"), "KeyError: 'backend'"),
        (MemoryError(), "MemoryError: "),
        (OSError("cannot read /données/rank1"), "OSError: cannot read /données/rank1"),  # UTF-8 whatever the locale
    ],
)
def test_a_rank_that_fails_logs_the_first_line_of_why_and_writes_no_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, c_locale: None, raised: BaseException, said: str
) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(ddp_rank, "die_with_parent", lambda: None)

    def train(config: dict[str, Any], rank: int, world: int, log: ddp_rank.Log) -> dict[str, Any]:
        log("importing torch (pid 7)")
        raise raised

    monkeypatch.setattr(ddp_rank, "train", train)
    with pytest.raises(type(raised)):
        ddp_rank.main({"out": str(tmp_path)})
    lines = (tmp_path / "rank1.log").read_text(encoding="utf-8").splitlines()
    assert lines == ["rank 1: importing torch (pid 7)", f"rank 1: failed: {said}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank1.log"]
