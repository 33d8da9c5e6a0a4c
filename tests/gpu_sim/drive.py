"""Run one smoke check in this process under the simulated GPUs and print what happened as JSON.

    PYTHONPATH=tests/gpu_sim:. TORCHYARD_GPU_SIM='{...}' python tests/gpu_sim/drive.py gpu.tf32 [--full]

Before the check, the global settings a check may change are set to values that are not torch's defaults;
the report shows them after the check, so a test can see that the check put them back.
"""

from __future__ import annotations

import json
import sys

import torch

from builder.smoke.expect import Expectations
from builder.smoke.framework import Context
from builder.smoke.runner import load_checks, run_one

SETTINGS = {
    "matmul.allow_tf32": (torch.backends.cuda.matmul, "allow_tf32", True),
    "cudnn.allow_tf32": (torch.backends.cudnn, "allow_tf32", False),
    "cudnn.benchmark": (torch.backends.cudnn, "benchmark", False),
    "cudnn.deterministic": (torch.backends.cudnn, "deterministic", True),
}

THREADS = 3


def main(argv: list[str]) -> int:
    name = argv[0]
    for holder, attr, value in SETTINGS.values():
        setattr(holder, attr, value)
    torch.set_num_threads(THREADS)  # not torch's default either: a check that sets it must put it back
    expect = Expectations(source="flags", min_driver="580.65.06")
    ctx = Context(expect=expect, arch=None, require_gpu=True, small="--full" not in argv)
    result = run_one({c.name: c for c in load_checks()}[name], ctx)
    after: dict[str, object] = {key: getattr(holder, attr) for key, (holder, attr, _) in SETTINGS.items()}
    before: dict[str, object] = {key: value for key, (_, _, value) in SETTINGS.items()}
    after["threads"], before["threads"] = torch.get_num_threads(), THREADS
    report = {"status": result.status, "message": result.message, "observed": ctx.observed}
    print(json.dumps(dict(report, settings_before=before, settings_after=after), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
