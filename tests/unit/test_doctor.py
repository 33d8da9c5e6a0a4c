"""The host probe and `torchyard doctor` on recorded machines (host_kit): what they read, what they recommend,
which problems they name, and that they always answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from host_kit import (
    A100_MIG,
    DOCKER_PLAIN,
    DOCKER_WITH_TOOLKIT,
    FUTURE,
    GB10,
    H100X2_550,
    H100X2_580,
    LSPCI,
    NO_DEVICES,
    RTX3090_PCI,
    RTX4090_535,
    SMI,
    SMI_BROKEN,
    SMI_NO_CC,
    T4_470,
    T4_470_NO_CC,
    V100_PCI,
    FakeSystem,
    RunEngine,
    holding,
    machine,
)
from matrix_kit import real

from builder.cli.doctor_cmd import as_data
from builder.cli.main import cli
from builder.core.errors import EngineError
from builder.host.doctor import Diagnosis, diagnose
from builder.host.gpus import read_gpus
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.host.system import Ran
from builder.resolve.facts import Facts
from builder.resolve.query import RawQuery

M = real()


def doctor(system: FakeSystem, docker: dict[str, Any] | None = None, **wish: Any) -> Diagnosis:
    info = DOCKER_WITH_TOOLKIT if docker is None else docker

    def daemon() -> dict[str, Any]:
        if not info:
            raise EngineError("no Docker engine answers at unix:///var/run/docker.sock: start dockerd")
        return info

    return diagnose(M, probe(M, system), read_runtime(system, daemon), RawQuery(**wish), "torchyard")


def checks(d: Diagnosis) -> list[str]:
    return [p.check for p in d.problems]


# --- reading the machine ---------------------------------------------------------------------------------


def test_nvidia_smi_csv_is_read_into_gpus_and_driver() -> None:
    reading = read_gpus(machine(H100X2_550))
    assert reading.source == "nvidia-smi"
    assert reading.driver == "550.54.15"
    assert [(g.index, g.name, g.compute_cap, g.memory_mib, g.mig) for g in reading.gpus] == [
        (0, "NVIDIA H100 80GB HBM3", "9.0", 81559, False),
        (1, "NVIDIA H100 80GB HBM3", "9.0", 81559, False),
    ]


def test_a_driver_without_compute_cap_is_asked_again_and_the_name_gives_the_arch() -> None:
    system = machine(None, driver="470.82.01")
    system.commands = {**system.commands, SMI: Ran(2, T4_470_NO_CC), SMI_NO_CC: Ran(0, T4_470)}
    host = probe(M, system)
    assert host.driver == "470.82.01"
    assert [(g.seen.compute_cap, g.arch and g.arch.name, g.known and g.known.name) for g in host.gpus] == [
        (None, "sm_75", "NVIDIA T4")
    ]


def test_gb10_memory_na_is_no_number() -> None:
    (gpu,) = read_gpus(machine(GB10, arch="aarch64")).gpus
    assert (gpu.name, gpu.compute_cap, gpu.memory_mib) == ("NVIDIA GB10", "12.1", None)


def test_no_nvidia_smi_and_no_module_says_so() -> None:
    reading = read_gpus(machine(None, toolkit=False))
    assert (reading.driver, reading.source, reading.gpus) == (None, None, [])
    assert reading.problems == ["no NVIDIA driver: nvidia-smi is not installed and no kernel module is loaded"]


def test_a_loaded_module_without_nvidia_smi_gives_the_driver_from_proc() -> None:
    reading = read_gpus(machine(None, driver="560.35.03"))
    assert (reading.driver, reading.source) == ("560.35.03", "/proc/driver/nvidia/version")


def test_the_pci_bus_names_gpus_the_driver_does_not_run() -> None:
    host = probe(M, machine(NO_DEVICES, smi_code=6, driver="590.48.01", lspci=V100_PCI))
    assert host.gpus == ()
    assert [(g.seen.name, g.arch and g.arch.name) for g in host.undriven] == [("Tesla V100 SXM2 16GB", "sm_70")]
    assert host.describe() == (
        "driver 590.48.01, no NVIDIA GPU the driver runs (the PCI bus has Tesla V100 SXM2 16GB) on this machine "
        "(linux/amd64)"
    )


def test_runtime_reading_finds_the_toolkit_cdi_and_shm_size() -> None:
    system = machine(
        RTX4090_535,
        toolkit=False,
        files={
            "/etc/cdi/nvidia.yaml": "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n",
            "/etc/docker/daemon.json": '{"default-shm-size": "2g"}',
        },
    )
    info = {"ServerVersion": "28.3.0", "Runtimes": {"runc": {}}, "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"]}
    rt = read_runtime(system, lambda: info)
    assert (rt.engine, rt.gpus_flag, rt.cdi_specs, rt.shm_mib) == ("28.3.0", False, ("/etc/cdi/nvidia.yaml",), 2048)
    assert rt.gpu_flags == ["--device", "nvidia.com/gpu=all"]


# --- what doctor recommends --------------------------------------------------------------------------------


def test_consumer_card_on_an_old_driver_gets_the_newest_cuda_12_build_and_the_reason() -> None:
    d = doctor(machine(RTX4090_535, driver="535.104.05"))
    assert d.recommended is not None
    # 535 runs CUDA 12 through minor-version compatibility (>= 525.60.13); every CUDA 13 build needs >= 580.65.06.
    assert d.recommended.result.combo.id == "torch2.14.1-cu126-py3.13-debian13"
    assert d.recommended.image == "torchyard:2.14.1-cuda12.6-cudnn9-py3.13-debian13-runtime"
    assert d.recommended.gpu_flags == ("--gpus", "all")
    assert d.run is None  # not built here, no registry to pull from: no docker run line
    here = "torchyard:2.14.1-cuda12.6-cudnn9-py3.13-debian13-runtime"
    engine = RunEngine(images={here: holding(here, "torch2.14.1-cu126-py3.13-debian13")})
    system = machine(RTX4090_535, driver="535.104.05")
    located = diagnose(M, probe(M, system), read_runtime(system, lambda: DOCKER_WITH_TOOLKIT), RawQuery(), "torchyard",
                       engine)  # fmt: skip
    assert located.run == (
        f'docker run --rm -it --gpus all --ipc=host -v "$PWD":/workspace -w /workspace {here} python'
    )
    (driver,) = [p for p in d.problems if p.check == "driver-cuda"]
    assert "every CUDA 13 build needs >= 580.65.06" in driver.message
    assert "update the driver (to >= 580.65.06)" in driver.fix


def test_two_datacenter_gpus_on_580_get_a_cuda_13_build() -> None:
    d = doctor(machine(H100X2_580, driver="580.65.06"))
    assert d.recommended is not None
    assert d.recommended.result.combo.variant.cuda is not None
    assert d.recommended.result.combo.variant.cuda.major == 13
    assert "driver-cuda" not in checks(d)
    assert doctor(machine(H100X2_550, driver="550.54.15")).recommended.result.combo.variant.name == "cu126"  # type: ignore[union-attr]


def test_mig_enabled_gpu_is_a_problem_with_its_fix() -> None:
    d = doctor(machine(A100_MIG, driver="535.216.01"))
    (mig,) = [p for p in d.problems if p.check == "mig"]
    assert "MIG is enabled on GPU 0 (NVIDIA A100-SXM4-80GB)" in mig.message
    assert "nvidia-smi -i 0 -mig 0" in mig.fix


def test_a_dropped_architecture_on_a_new_driver_names_the_last_branch_and_falls_back_to_cpu() -> None:
    d = doctor(machine(NO_DEVICES, smi_code=6, driver="590.48.01", lspci=V100_PCI))
    (window,) = [p for p in d.problems if p.check == "driver-gpu"]
    assert window.message == (
        "NVIDIA V100 (Volta) is supported up to the 580 driver branch (legacy); driver 590.48.01 no longer supports "
        "it: use a 580.x driver"
    )
    assert d.recommended is not None and d.recommended.result.combo.variant.name == "cpu"
    assert d.recommended.gpu_flags == ()


def test_nvidia_smi_failing_is_a_driver_problem() -> None:
    d = doctor(machine(SMI_BROKEN, smi_code=9, lspci=RTX3090_PCI))
    (driver,) = [p for p in d.problems if p.check == "driver"]
    assert driver.message.startswith("nvidia-smi failed (exit 9): NVIDIA-SMI has failed because it couldn't")
    assert "kernel module is not running" in driver.fix


def test_no_gpu_no_driver_still_answers_a_cpu_image() -> None:
    d = doctor(machine(None, toolkit=False))
    assert d.recommended is not None and d.recommended.result.combo.variant.name == "cpu"
    assert d.unchecked == ["GPU checks: no NVIDIA driver: nvidia-smi is not installed and no kernel module is loaded"]


def test_a_gpu_newer_than_the_matrix_falls_back_to_cpu_and_says_why() -> None:
    d = doctor(machine(FUTURE, driver="620.10.01"))
    assert checks(d)[:2] == ["gpu", "gpu-image"]
    assert d.recommended is not None and d.recommended.result.combo.variant.name == "cpu"


def test_no_docker_engine_is_said_and_the_rest_still_answers() -> None:
    d = doctor(machine(RTX4090_535, driver="535.104.05"), docker={})
    assert "docker" in checks(d)
    assert d.recommended is not None
    assert any("no Docker engine answers" in u for u in d.unchecked)


def test_no_nvidia_runtime_is_a_problem_when_there_are_gpus() -> None:
    d = doctor(machine(RTX4090_535, driver="535.104.05", toolkit=False), docker=DOCKER_PLAIN)
    (runtime,) = [p for p in d.problems if p.check == "nvidia-runtime"]
    assert "nvidia-ctk runtime configure --runtime=docker" in runtime.fix


def test_a_wish_narrows_the_choice() -> None:
    d = doctor(machine(RTX4090_535, driver="535.104.05"), torch="2.5", os="ubuntu22.04")
    assert d.recommended is not None
    # 535 runs CUDA 12.1 at full level and 12.4 only through minor-version compatibility: full level ranks first.
    assert d.recommended.result.combo.id == "torch2.5.1-cu121-py3.10-ubuntu22.04"


def test_json_carries_the_documented_keys() -> None:
    d = doctor(machine(RTX4090_535, driver="535.104.05"))
    data = as_data(d, Facts(M))
    assert {"schema", "driver", "platform", "gpus", "recommended", "problems"} <= set(data)
    assert data["driver"] == "535.104.05"
    assert data["reports_cuda"] == "12.2"
    assert data["gpus"] == [
        {
            "index": 0,
            "name": "NVIDIA GeForce RTX 4090",
            "arch": "sm_89",
            "memory_mib": 24564,
            "mig": False,
            "known_as": "GeForce RTX 4090",
        }
    ]
    assert {"id", "torch", "cuda", "image", "run"} <= set(data["recommended"])
    assert all(set(p) == {"check", "message", "fix"} for p in data["problems"])
    json.dumps(data)


def test_the_command_reads_the_machine_through_its_seams(monkeypatch: pytest.MonkeyPatch) -> None:
    system = machine(RTX4090_535, driver="535.104.05")
    monkeypatch.setattr("builder.cli.doctor_cmd.RealSystem", lambda: system)
    monkeypatch.setattr("builder.engine.DockerEngine.daemon_info", lambda self: DOCKER_WITH_TOOLKIT)
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["recommended"]["id"] == "torch2.14.1-cu126-py3.13-debian13"
    assert SMI in system.ran and LSPCI not in system.ran  # lspci only when the driver lists no GPU
