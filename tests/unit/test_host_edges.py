"""The host's reading of nvidia-smi, the probe and the chooser, at their edges (written for the survivors of
`bench/mutation.py host`, docs/mutation.md): short and unreadable nvidia-smi rows, a driver that fails while
another part answers, GPUs only the PCI bus sees, and what the flags leave to the machine."""

from __future__ import annotations

import pytest
from host_kit import FUTURE, NO_DEVICES, RTX4090_535, SMI, SMI_NO_CC, V100_PCI, FakeSystem, machine
from matrix_kit import real

from builder.core.kinds import Platform
from builder.host.choose import choose_here, driver_failing, host_query
from builder.host.gpus import GpuReading, SeenGpu, read_gpus
from builder.host.probe import Host, fill_from_host, probe
from builder.host.system import Ran
from builder.resolve.query import RawQuery

M = real()


# --- nvidia-smi's rows ----------------------------------------------------------------------------------------


def test_a_short_row_reads_what_it_has() -> None:
    reading = read_gpus(machine("0, NVIDIA GeForce RTX 4090, 8.9\n"))
    assert reading.source == "nvidia-smi"
    assert reading.gpus == [SeenGpu(0, "NVIDIA GeForce RTX 4090", "8.9", None, mig=False)]
    assert reading.driver is None


def test_fields_nvidia_smi_cannot_fill_are_unknown_not_guessed() -> None:
    reading = read_gpus(machine("[N/A], NVIDIA GeForce RTX 4090, [N/A], [N/A], 535.104.05, [N/A]\n"))
    assert reading.gpus == [SeenGpu(0, "NVIDIA GeForce RTX 4090", None, None, mig=False)]
    assert reading.driver == "535.104.05"


def test_a_driver_that_sees_no_device_is_still_read_from_nvidia_smi() -> None:
    reading = read_gpus(machine(NO_DEVICES, smi_code=6, driver="590.48.01"))
    assert (reading.source, reading.driver, reading.gpus) == ("nvidia-smi", "590.48.01", [])
    assert reading.problems == ["nvidia-smi found no GPUs (No devices were found)"]


def test_any_failure_naming_compute_cap_asks_again_without_it() -> None:
    system = FakeSystem(
        commands={
            SMI: Ran(1, "", 'Field "compute_cap" is not a valid field to query.\n'),
            SMI_NO_CC: Ran(0, "0, Tesla T4, 15360, 470.256.02, Disabled\n"),
        }
    )
    reading = read_gpus(system)
    assert reading.gpus == [SeenGpu(0, "Tesla T4", None, 15360, mig=False)]
    assert (reading.driver, reading.source, reading.problems) == ("470.256.02", "nvidia-smi", [])


# --- the probe --------------------------------------------------------------------------------------------------


def test_a_gpu_the_driver_lists_without_a_driver_version_is_described_as_unknown() -> None:
    host = probe(M, machine("0, NVIDIA GeForce RTX 4090, 8.9, 24564, , [N/A]\n"))
    assert host.driver is None
    assert host.describe() == "driver unknown, 1x NVIDIA GeForce RTX 4090 (sm_89) on this machine (linux/amd64)"


def test_gpus_only_the_pci_bus_sees_have_no_index_capability_or_mig() -> None:
    mystery = "02:00.0 3D controller [0302]: NVIDIA Corporation GX999 [Mystery Accelerator] [10de:9999] (rev a1)\n"
    host = probe(M, machine(NO_DEVICES, smi_code=6, driver="590.48.01", lspci=V100_PCI + mystery))
    v100, unknown = host.undriven
    assert v100.seen == SeenGpu(-1, "Tesla V100 SXM2 16GB", None, None, mig=False)
    assert v100.arch is not None and v100.arch.name == "sm_70" and v100.known is not None
    assert (unknown.seen.index, unknown.arch, unknown.known) == (-1, None, None)


def test_the_flags_win_and_the_machine_fills_what_they_leave_open() -> None:
    host = probe(M, machine(RTX4090_535))
    filled, notes = fill_from_host(RawQuery(), host, M)
    assert (filled.driver, filled.gpus, filled.archs, filled.platform, notes) == (
        "535.104.05",
        ("GeForce RTX 4090",),
        (),
        "linux/amd64",
        [],
    )
    asked = RawQuery(driver="550.54.15", archs=("sm_80",), platform="linux/arm64")
    filled, _ = fill_from_host(asked, host, M)
    assert (filled.driver, filled.gpus, filled.archs, filled.platform) == ("550.54.15", (), ("sm_80",), "linux/arm64")
    gpus_only, _ = fill_from_host(RawQuery(gpus=("A100",)), host, M)
    assert (gpus_only.gpus, gpus_only.archs) == (("A100",), ())


def test_a_machine_torch_has_no_platform_for_leaves_the_platform_open() -> None:
    host = probe(M, FakeSystem(machine_name="riscv64"))
    assert host.platform is None
    filled, _ = fill_from_host(RawQuery(), host, M)
    assert filled.platform is None


def test_a_gpu_newer_than_every_known_architecture_leaves_the_query_with_a_note() -> None:
    host = probe(M, machine(FUTURE))
    filled, notes = fill_from_host(RawQuery(), host, M)
    assert (filled.archs, filled.gpus) == ((), ())
    [note] = notes
    assert note.startswith("NVIDIA Future GPU is sm_") and note.endswith(
        ", newer than every architecture torchyard knows"
    )


# --- the chooser ------------------------------------------------------------------------------------------------


def host_of(reading: GpuReading, gpus: bool = False, undriven: bool = False) -> Host:
    listed = probe(M, machine(RTX4090_535)).gpus if gpus else ()
    pci = probe(M, machine(NO_DEVICES, smi_code=6, driver="590.48.01", lspci=V100_PCI)).undriven if undriven else ()
    return Host("x86_64", Platform.AMD64, reading, listed, pci)


@pytest.mark.parametrize(
    ("problems", "gpus", "undriven", "failing"),
    [
        (["NVML could not start: NVMLError_Unknown"], True, False, None),  # the GPUs were listed all the same
        ([], False, False, None),
        (["no NVIDIA driver: nvidia-smi is not installed and no kernel module is loaded"], False, False, None),
        (["nvidia-smi found no GPUs (No devices were found)"], False, True, None),  # the driver-GPU rule says why
        (["nvidia-smi failed (exit 9): it has failed"], False, True, "nvidia-smi failed (exit 9): it has failed"),
        (["nvidia-smi failed (exit 9): a", "NVML: b"], False, False, "nvidia-smi failed (exit 9): a; NVML: b"),
    ],
)  # fmt: skip
def test_a_driver_is_failing_only_when_it_lists_nothing_for_a_reason_of_its_own(
    problems: list[str], gpus: bool, undriven: bool, failing: str | None
) -> None:
    assert driver_failing(host_of(GpuReading(driver="550.54.15", problems=problems), gpus, undriven)) == failing


def test_a_failing_driver_leaves_the_question_to_the_flags() -> None:
    host = host_of(GpuReading(driver="550.54.15", problems=["nvidia-smi failed (exit 9): x"]), undriven=True)
    asked = host_query(M, host, RawQuery(driver="535.104.05"), cpu_without_gpu=False)
    assert asked.failing == "nvidia-smi failed (exit 9): x" and not asked.gpu
    assert (asked.query.driver is not None and str(asked.query.driver), asked.query.gpus) == ("535.104.05", ())


def test_a_machine_whose_gpus_run_a_gpu_image_is_no_fallback() -> None:
    choice = choose_here(M, probe(M, machine(RTX4090_535)), RawQuery())
    assert choice.fallback is False and choice.result is not None
    assert choice.gpu_query == choice.here.query
