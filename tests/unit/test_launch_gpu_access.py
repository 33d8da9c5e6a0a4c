"""`torchyard run`'s GPU flags and notes for this machine (host.launch.gpu_access): none without a GPU (and why),
the engine's own flags, and the warning when the engine cannot give containers GPUs. Written for the survivors of
`bench/mutation.py host` (docs/mutation.md)."""

from __future__ import annotations

from host_kit import DOCKER_PLAIN, DOCKER_WITH_TOOLKIT, H100X2_580, SMI, FakeSystem, machine
from matrix_kit import real

from builder.host.launch import gpu_access
from builder.host.probe import probe
from builder.host.runtime import RuntimeReading, read_runtime
from builder.host.system import Ran

M = real()
REFUSED = (
    "the engine has no NVIDIA runtime, toolkit hook or CDI spec: docker will refuse the GPU flags (torchyard doctor "
    "names the fix)"
)


def test_without_a_gpu_no_flags_and_the_driver_s_reason() -> None:
    host = probe(M, machine(None))
    why = "no NVIDIA driver: nvidia-smi is not installed and no kernel module is loaded"
    assert gpu_access(host, None) == ((), [f"no GPU here ({why}): the container will use the CPU"])


def test_without_a_gpu_and_without_a_reason_says_none_was_found() -> None:
    host = probe(M, FakeSystem(commands={SMI: Ran(0, "")}))  # nvidia-smi answers, lists nothing, no error
    assert host.reading.problems == []
    assert gpu_access(host, None) == ((), ["no GPU here (no NVIDIA GPU found): the container will use the CPU"])


def test_gpus_and_an_engine_with_the_toolkit_get_its_flags_and_no_note() -> None:
    system = machine(H100X2_580, driver="580.65.06")
    host = probe(M, system)
    assert gpu_access(host, read_runtime(system, lambda: DOCKER_WITH_TOOLKIT)) == (("--gpus", "all"), [])
    assert gpu_access(host, None) == (("--gpus", "all"), [])  # the runtime not read: docker's usual flag


def test_gpus_and_an_engine_without_toolkit_or_cdi_are_warned_of() -> None:
    system = machine(H100X2_580, driver="580.65.06", toolkit=False)
    host = probe(M, system)
    assert gpu_access(host, read_runtime(system, lambda: DOCKER_PLAIN)) == (("--gpus", "all"), [REFUSED])


def test_gpus_and_an_engine_with_a_cdi_spec_only_get_the_cdi_flag_and_no_note() -> None:
    host = probe(M, machine(H100X2_580, driver="580.65.06", toolkit=False))
    cdi = RuntimeReading(engine="28.3.0", cdi_specs=("/etc/cdi/nvidia.yaml",), cdi_enabled=True)
    assert gpu_access(host, cdi) == (("--device", "nvidia.com/gpu=all"), [])


def test_gpus_and_no_engine_answering_are_not_warned_of_twice() -> None:
    host = probe(M, machine(H100X2_580, driver="580.65.06", toolkit=False))
    assert gpu_access(host, RuntimeReading(engine=None)) == (("--gpus", "all"), [])  # doctor says no engine
