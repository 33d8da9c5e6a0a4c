"""Arms the simulated GPUs (torchyard_gpu_sim) in every Python process that has this folder on PYTHONPATH
and TORCHYARD_GPU_SIM set: the smoke suite's workers and the processes they spawn. Test-only."""

import os

if os.environ.get("TORCHYARD_GPU_SIM"):
    import torchyard_gpu_sim

    torchyard_gpu_sim.arm()
