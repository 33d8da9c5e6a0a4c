"""The one line that says what was read of this machine (host.probe.Host.describe), and run's reason for using the
CPU, with every problem of the reading. Written for the survivors of `bench/mutation.py host` (docs/mutation.md)."""

from __future__ import annotations

from host_kit import H100X2_580, SMI_BROKEN, V100_PCI, machine
from matrix_kit import real

from builder.core.archs import arch_from
from builder.core.kinds import Platform
from builder.host.gpus import GpuReading, SeenGpu
from builder.host.launch import gpu_access
from builder.host.probe import Host, HostGpu, probe

M = real()


def test_a_machine_without_driver_or_gpu_on_a_platform_torch_lacks_names_its_machine() -> None:
    host = probe(M, machine(None, arch="s390x"))
    assert host.describe() == "no NVIDIA GPU the driver runs on this machine (s390x)"


def test_every_gpu_on_the_pci_bus_the_driver_does_not_run_is_named() -> None:
    host = probe(M, machine(None, lspci=V100_PCI + V100_PCI.replace("00:1e.0", "00:1f.0")))
    assert host.describe() == (
        "no NVIDIA GPU the driver runs (the PCI bus has Tesla V100 SXM2 16GB, Tesla V100 SXM2 16GB) on this machine "
        "(linux/amd64)"
    )


def test_gpus_are_counted_by_name_and_architecture_and_an_unknown_architecture_is_said() -> None:
    h100 = probe(M, machine(H100X2_580, driver="580.65.06")).gpus
    mystery = HostGpu(SeenGpu(2, "NVIDIA Mystery", None, None, mig=False), None, None)
    host = Host("x86_64", Platform.AMD64, GpuReading(driver="580.65.06"), (*h100, mystery))
    assert [g.arch for g in h100] == [arch_from("sm_90")] * 2
    assert host.describe() == (
        "driver 580.65.06, 2x NVIDIA H100 80GB HBM3 (sm_90), 1x NVIDIA Mystery (unknown architecture) on this "
        "machine (linux/amd64)"
    )


def test_run_s_reason_for_the_cpu_names_every_problem_of_the_reading() -> None:
    host = probe(M, machine(SMI_BROKEN, smi_code=9, driver="580.65.06"))
    assert len(host.reading.problems) == 2
    assert gpu_access(host, None) == (
        (),
        [f"no GPU here ({'; '.join(host.reading.problems)}): the container will use the CPU"],
    )
