"""Arms the simulated GPUs (torchyard_gpu_sim) in every Python process that has this folder on PYTHONPATH
and TORCHYARD_GPU_SIM set, and the workflow checks' faults (torchyard_faults) where TORCHYARD_SMOKE_FAULTS is
set: the smoke suite's workers and the processes they start. Test-only."""

import os

if os.environ.get("TORCHYARD_GPU_SIM") or os.environ.get("TORCHYARD_SMOKE_FAULTS"):
    import torchyard_gpu_sim

    torchyard_gpu_sim.arm()
