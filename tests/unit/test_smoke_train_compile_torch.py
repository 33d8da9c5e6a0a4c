"""train.cpu and compile.cpu on real torch (.venv-torch's CPU wheel), at the sizes of issue 21: both pass, and each
fails when what it proves is broken (tests/gpu_sim/torchyard_faults.py): convolutions that never learn (only the
classifier and the norms do) leave the loss above half its start; Inductor generating tanh(x) as x makes the
compiled MLP differ from eager. Like test_gpu_sim.py, these tests start processes (the suite and its worker)."""

from __future__ import annotations

from pathlib import Path

from sim_kit import cpu_suite, needs_torch

pytestmark = needs_torch

CHECKS = ("--only", "train.cpu", "--only", "compile.cpu")


def _checks(report: dict[str, object]) -> dict[str, tuple[str, str]]:
    checks = report["checks"]
    assert isinstance(checks, list)
    return {c["name"]: (c["status"], c["message"]) for c in checks}


def test_train_and_compile_pass_on_real_torch(tmp_path: Path) -> None:
    code, report = cpu_suite(tmp_path, *CHECKS)
    checks = _checks(report)
    assert {n: s for n, (s, _) in checks.items()} == {"train.cpu": "passed", "compile.cpu": "passed"}, checks
    assert code == 0
    assert checks["train.cpu"][1].startswith("loss ") and " in 16 steps of 8 " in checks["train.cpu"][1]
    assert checks["compile.cpu"][1].startswith("Inductor (C++ with ")


def test_each_fails_when_broken_convolutions_that_never_learn_and_a_wrong_compiled_tanh(tmp_path: Path) -> None:
    code, report = cpu_suite(tmp_path, *CHECKS, faults=("conv_no_grad", "compile_wrong_tanh"))
    checks = _checks(report)
    assert code == 1
    assert {n: s for n, (s, _) in checks.items()} == {"train.cpu": "failed", "compile.cpu": "failed"}, checks
    assert checks["train.cpu"][1].startswith("loss went ")
    assert checks["train.cpu"][1].endswith("in 16 steps; expected below 50% of the start")
    assert checks["compile.cpu"][1].startswith("torch.compile on the CPU differs from eager: output ")
