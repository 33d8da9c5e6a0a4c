"""train.cpu and compile.cpu on real torch (.venv-torch's CPU wheel), at the sizes of issue 21: both pass, and each
fails when what it proves is broken (tests/gpu_sim/torchyard_faults.py): convolutions that never learn (only the
classifier and the norms do) leave the loss above half its start; Inductor generating tanh(x) as x makes the
compiled MLP differ from eager. Like test_gpu_sim.py, these tests start processes (the suite and its worker)."""

from __future__ import annotations

import json
from pathlib import Path

from sim_kit import H100, cpu_suite, needs_torch, python_with_torch, sim

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


COMPILER = """
import json, shutil
import torch
from builder.smoke import checks_compile
from builder.smoke.compat import cpu_threads
from builder.smoke.expect import Expectations
from builder.smoke.framework import Context
from builder.smoke.runner import load_checks, run_one

seen = []
def compare(torch_, device):  # the compile itself is the other tests': here, what the check runs it with
    seen.append([torch_.get_num_threads(), device])
    return 1e-6, 2e-6

checks_compile._compare = compare
check = {c.name: c for c in load_checks()}["compile.cpu"]
ctx = Context(expect=Expectations(), arch=None, require_gpu=False)
torch.set_num_threads(3)
said = {}
for present in (("g++", "c++"), ("c++",), ()):
    shutil.which = lambda name, present=present: "/bin/" + name if name in present else None
    result = run_one(check, ctx)
    said[" ".join(present) or "none"] = [result.status, result.message, torch.get_num_threads()]
print(json.dumps({"said": said, "seen": seen, "threads": cpu_threads()[0]}))
"""


def test_compile_cpu_names_the_compiler_it_found_and_runs_on_the_container_s_cpus(tmp_path: Path) -> None:
    found = json.loads(python_with_torch(COMPILER, sim([]), tmp_path).strip().splitlines()[-1])
    verdict = "output 1.0e-06, gradients 2.0e-06 from eager"
    assert found["said"] == {
        "g++ c++": ["passed", f"Inductor (C++ with /bin/g++): {verdict}", 3],  # g++ first, as Inductor looks
        "c++": ["passed", f"Inductor (C++ with /bin/c++): {verdict}", 3],
        "none": ["failed", "no C++ compiler (g++) on PATH: torch.compile (Inductor) compiles C++ at run time", 3],
    }
    # the CPU's MLP on the container's CPUs while compiling; torch's 3 threads put back after
    assert found["seen"] == [[found["threads"], "cpu"]] * 2


LAYERS = """
import json, torch
from builder.smoke.checks_compile import _mlp

def layers(device):
    found = []
    for layer in _mlp(torch, device):
        if isinstance(layer, torch.nn.Linear):
            found.append(["Linear", layer.in_features, layer.out_features, layer.bias is not None])
        else:
            found.append([type(layer).__name__])
    return found

print(json.dumps({"cpu": layers("cpu"), "cuda": layers("cuda")}))
"""


def test_compile_s_mlps_are_the_small_cpu_one_and_the_gpu_one_of_issue_11(tmp_path: Path) -> None:
    found = json.loads(python_with_torch(LAYERS, sim([H100]), tmp_path).strip().splitlines()[-1])
    # on the CPU one hidden layer without biases (issue 21): Inductor compiles one C++ kernel for its forward, one for
    # its backward, each a compile of the check's time
    assert found["cpu"] == [["Linear", 32, 32, False], ["Tanh"], ["Linear", 32, 10, False]]
    assert found["cuda"] == [
        ["Linear", 32, 64, True],
        ["GELU"],
        ["Linear", 64, 64, True],
        ["Tanh"],
        ["Linear", 64, 10, True],
    ]
