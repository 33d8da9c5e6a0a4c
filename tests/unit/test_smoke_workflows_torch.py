"""The workflow checks (issue 20) on real torch (.venv-torch's CPU wheel), as the suite runs them: ddp.cpu through
torchrun with 2 gloo ranks, determinism.cpu in two fresh processes, profiler.cpu's Chrome trace; and each of them
failing when what it checks is broken (tests/gpu_sim/torchyard_faults.py). Their GPU variants run on simulated
GPUs in test_gpu_sim.py. Like test_gpu_sim.py, these tests start processes (the suite, torchrun, the ranks).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from sim_kit import cpu_suite, needs_torch, python_with_torch, sim

from builder.smoke.compat import cpu_threads

pytestmark = needs_torch

WORKFLOWS = ("--only", "ddp.cpu", "--only", "determinism.cpu", "--only", "profiler.cpu")


def _checks(report: dict[str, object]) -> dict[str, tuple[str, str]]:
    checks = report["checks"]
    assert isinstance(checks, list)
    return {c["name"]: (c["status"], c["message"]) for c in checks}


def test_ddp_determinism_and_the_profiler_pass_on_real_torch(tmp_path: Path) -> None:
    share = max(1, cpu_threads()[0] // 2)  # determinism.cpu's two runs: half the CPUs each
    # torch's default in a fresh process is OMP_NUM_THREADS: another count, so a run that kept it shows
    code, report = cpu_suite(tmp_path, *WORKFLOWS, env={"OMP_NUM_THREADS": str(share + 1)})
    checks = _checks(report)
    assert {n: s for n, (s, _) in checks.items()} == dict.fromkeys(
        ("ddp.cpu", "determinism.cpu", "profiler.cpu"), "passed"
    ), checks
    assert code == 0
    assert checks["ddp.cpu"][1].startswith(
        "2 ranks (gloo, torchrun): parameters bit-identical after 6 steps, from 2 different starts"
    )
    assert checks["determinism.cpu"][1].startswith("2 fresh processes, seed 0,")
    assert "losses and weights bitwise equal over 4 steps" in checks["determinism.cpu"][1]
    observed = report["observed"]
    assert isinstance(observed, dict)
    assert observed["ddp_cpu"]["last_loss"] < 0.9 * observed["ddp_cpu"]["first_loss"]
    assert observed["determinism_cpu"]["threads"] == share
    assert observed["determinism_cpu"]["threads_used"] == [share, share]


def test_each_fails_when_broken_a_desynchronised_rank_a_non_deterministic_op_no_profiler(tmp_path: Path) -> None:
    code, report = cpu_suite(tmp_path, *WORKFLOWS, faults=("ddp_desync", "nondeterministic", "profiler_off"))
    checks = _checks(report)
    assert code == 1
    assert {n: s for n, (s, _) in checks.items()} == dict.fromkeys(
        ("ddp.cpu", "determinism.cpu", "profiler.cpu"), "failed"
    )
    assert checks["ddp.cpu"][1].startswith("after 6 steps the parameters of rank(s) 1 differ from rank 0's")
    # The injected noise (1e-6) can round away in the first loss; the step where the runs part is not the point.
    assert re.match(
        r"the same seeded run gave different losses in two processes from step \d+: ", checks["determinism.cpu"][1]
    ), checks["determinism.cpu"][1]
    assert checks["profiler.cpu"][1].startswith(
        "torch.profiler's Chrome trace lacks aten::convolution, aten::convolution_backward"
    )


def test_a_rank_that_never_joins_fails_inside_the_timeout_with_its_last_words(tmp_path: Path) -> None:
    # --timeout-scale 0.35: the check's 120 s become 42 s; it stops torchrun after 70 % of that.
    code, report = cpu_suite(tmp_path, "--only", "ddp.cpu", "--timeout-scale", "0.35", faults=("ddp_hang",))
    status, message = _checks(report)["ddp.cpu"]
    assert (code, status) == (1, "failed")
    # Whichever comes first ends it: the check's own deadline (29 s) or the waiting rank's process-group timeout
    # (gloo's store wait, when the ranks started late on a busy machine); either way the hung rank is named.
    assert message.startswith(
        ("the ranks did not finish within 29 s (a rank that never joined, or hung", "torchrun exited with code 1")
    ), message
    assert "rank 1's last words: 'rank 1: joining the process group (gloo, world 2)'" in message
    assert report["checks"][0]["seconds"] < 42


REFERENCE_RUN = """
import json, torch
from builder.smoke.checks_determinism import run_child
from builder.smoke.model import SmallResNet, digest

config = {"device": "cpu", "deterministic": True, "threads": 1, "steps": 3, "warmup": 2, "batch": 4, "size": 8,
          "width": 8, "seed": 0, "out": "run.json"}
assert run_child(config) == 0
with open("run.json", encoding="utf-8") as handle:
    found = json.load(handle)
# the same training written out: seed 0, the model, its data, Adam at 3e-3, every step's loss in order
torch.manual_seed(0)
model = SmallResNet(width=8)
images, labels = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for _ in range(3):
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    losses.append(float(loss.detach()).hex())
print(json.dumps({"losses": found["losses"] == losses, "weights": found["weights"] == digest(model),
                  "threads": found["threads"], "deterministic": found["deterministic"]}))
"""


def test_a_determinism_run_is_the_seeded_training_it_says_step_by_step(tmp_path: Path) -> None:
    """run_child against the same training written out (2 warm-up steps of 3): each loss, in its step's place."""
    said = json.loads(python_with_torch(REFERENCE_RUN, sim([]), tmp_path).strip().splitlines()[-1])
    assert said == {"losses": True, "weights": True, "threads": 1, "deterministic": True}


REFERENCE_DDP = """
import json, os, socket
import torch
import torch.multiprocessing as mp
from builder.smoke import ddp_rank
from builder.smoke.model import SmallResNet, digest

CONFIG = {"steps": 4, "warmup": 2, "batch": 4, "size": 8, "width": 8, "lr": 0.05, "out": os.getcwd(),
          "backend": "gloo", "device": "cpu", "timeout": 60.0, "threads": 2}


def rank(index, port):
    os.environ.update(RANK=str(index), WORLD_SIZE="2", LOCAL_RANK=str(index), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(3)  # not the rank's share: main must set its own
    assert ddp_rank.main(CONFIG) == 0
    with open(f"threads{index}", "w", encoding="utf-8") as handle:
        handle.write(str(torch.get_num_threads()))


with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
mp.start_processes(rank, args=(port,), nprocs=2, join=True, start_method="fork")  # -c: nothing to spawn from
found = [json.load(open(f"rank{r}.json", encoding="utf-8")) for r in (0, 1)]

# the same DDP training written out in one process: each rank's start (seed 1000 + rank), its own data (a
# generator seeded by its rank), rank 0's weights for both, the ranks' mean gradient, SGD with momentum 0.9
torch.set_num_threads(1)
starts = []
for r in (0, 1):
    torch.manual_seed(1000 + r)
    starts.append(SmallResNet(width=8))
digests = [digest(s) for s in starts]
data = []
for r in (0, 1):
    g = torch.Generator().manual_seed(r)
    data.append((torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 10, (4,), generator=g)))
model = starts[0]


def local_gradients():
    grads, losses = [], []
    for images, labels in data:
        model.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
        losses.append(float(loss))
    return grads, losses


grads, _ = local_gradients()
mean = torch.stack(grads).mean(dim=0)
scale = float(mean.abs().max()) or 1.0
spread = [max(float((g - grads[r]).abs().max()) for g in grads) / scale for r in (0, 1)]
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
losses = []
for _ in range(4):
    grads, each = local_gradients()
    model.zero_grad(set_to_none=True)
    sizes = [p.numel() for p in model.parameters()]
    for p, chunk in zip(model.parameters(), torch.stack(grads).mean(dim=0).split(sizes)):
        p.grad = chunk.view_as(p).clone()
    optimizer.step()
    losses.append(sum(each) / 2)
print(json.dumps({
    "before": [f["before"] for f in found] == digests,
    "broadcast": [f["broadcast"] for f in found] == [digests[0]] * 2,
    "ranks": [(f["rank"], f["world"], f["timed_steps"]) for f in found],
    "spread": [abs(f["grad_spread"] - s) <= 1e-5 * s for f, s in zip(found, spread)],
    "error": [f["grad_error"] < 1e-5 for f in found],
    "losses": [max(abs(a - b) / b for a, b in zip(f["losses"], losses)) < 1e-5 for f in found],
    "threads": [int(open(f"threads{r}", encoding="utf-8").read()) for r in (0, 1)],
    "log": [line.split("(pid ")[0] for line in open("rank1.log", encoding="utf-8").read().splitlines()],
}))
"""


def test_ddp_ranks_train_what_the_same_ddp_training_written_out_gives(tmp_path: Path) -> None:
    """Two gloo ranks of ddp_rank.main against one process doing their work by hand: starts, data, the first
    gradients' spread, every step's loss (the ranks' mean) in its place."""
    said = json.loads(python_with_torch(REFERENCE_DDP, sim([]), tmp_path).strip().splitlines()[-1])
    assert said == {
        "before": True,
        "broadcast": True,
        "ranks": [[0, 2, 2], [1, 2, 2]],
        "spread": [True, True],
        "error": [True, True],
        "losses": [True, True],
        "threads": [2, 2],
        "log": [  # each stage announced first: the last line of a rank that hangs or dies says where
            "rank 1: importing torch ",
            "rank 1: joining the process group (gloo, world 2)",
            "rank 1: joined; building the model",
            "rank 1: local gradients (no_sync) against DDP's",
            "rank 1: steps 1-4 (2 of warm-up)",
            "rank 1: done",
        ],
    }


def test_ddp_fails_when_its_gradient_is_not_the_ranks_mean_and_says_by_how_much(tmp_path: Path) -> None:
    # ddp_grad_off: DDP's all_reduce gives 1.001 times the mean, so every rank's gradient is off by 1e-3 of the largest
    code, report = cpu_suite(tmp_path, "--only", "ddp.cpu", faults=("ddp_grad_off",))
    ((status, message),) = _checks(report).values()
    assert (code, status) == (1, "failed")
    assert re.fullmatch(
        r"rank [01]: DDP's gradient differs from the mean of the ranks' own gradients by 1\.0e-03 of its largest "
        r"value \(tolerance 1e-05\): gradients not averaged",
        message,
    ), message
