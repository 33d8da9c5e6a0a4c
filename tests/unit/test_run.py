"""`torchyard run` on recorded machines (host_kit): the docker run line it prints (--dry-run) with each host's GPU
flags, --ipc=host, the workspace and the caller's user; no GPU flags without a GPU; an image that will not run
here refused with the one that would; where the image comes from (local, pulled, built). The engine is faked
at its seams (daemon_info, inspect, pull) and no container is started (run_container is replaced)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from host_kit import (
    A100_MIG,
    CUDA13_LABELS,
    DOCKER_PLAIN,
    DOCKER_WITH_TOOLKIT,
    GB10,
    H100X2_580,
    RTX4090_535,
    FakeSystem,
    RunEngine,
    holding,
    image,
    machine,
)
from matrix_kit import real

from builder.cli.main import main
from builder.cli.run_cmd import split_after
from builder.core.errors import UsageError
from builder.engine.interactive import ContainerSpec, docker_run_argv
from builder.engine.quick import QuickEngine
from builder.host.doctor import diagnose
from builder.host.identity import caller
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.resolve.query import RawQuery

M = real()
CDI = {"ServerVersion": "28.3.0", "Runtimes": {"runc": {}}, "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"]}
CDI_SPEC = {"/etc/cdi/nvidia.yaml": "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n"}
ME = caller().user  # the process's own UID:GID, or SUDO_UID:SUDO_GID under sudo
NAMED = ("-e", f"USER={caller().name}", "-e", f"LOGNAME={caller().name}")


def install(engine: RunEngine, monkeypatch: pytest.MonkeyPatch, system: FakeSystem, info: dict[str, Any]) -> None:
    """`engine` at QuickEngine's seams and in place of run_container; `system` as the machine."""
    monkeypatch.setattr("builder.cli.run_cmd.RealSystem", lambda: system)
    monkeypatch.setattr(QuickEngine, "daemon_info", lambda _: info)
    monkeypatch.setattr(QuickEngine, "inspect", lambda _, ref: engine.inspect(ref))
    monkeypatch.setattr(QuickEngine, "read_file", lambda _, *args, **kwargs: engine.read_file(*args, **kwargs))
    monkeypatch.setattr(QuickEngine, "pull", lambda _, ref, auth: engine.pull(ref, auth))
    monkeypatch.setattr(QuickEngine, "labelled", lambda _, label: engine.labelled(label))
    monkeypatch.setattr("builder.cli.run_cmd.run_container", engine.run)


@dataclass(frozen=True)
class Ran:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


Torchyard = Callable[..., tuple[Ran, RunEngine]]


@pytest.fixture
def torchyard(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Torchyard:
    """`torchyard run ARGS` through main (its one error line and exit code) on a recorded machine."""

    def invoke(
        system: FakeSystem, *args: str, docker: dict[str, Any] | None = None, engine: RunEngine | None = None
    ) -> tuple[Ran, RunEngine]:
        engine = engine or RunEngine()
        install(engine, monkeypatch, system, DOCKER_WITH_TOOLKIT if docker is None else docker)
        with pytest.raises(SystemExit) as exited:
            main(["run", *args])
        out, err = capsys.readouterr()
        return Ran(int(exited.value.code or 0), out, err), engine

    return invoke


def line(result: Ran) -> list[str]:
    (printed,) = result.stdout.splitlines()
    return shlex.split(printed)


def chosen(system: FakeSystem, docker: dict[str, Any]) -> str:
    """The image doctor recommends for this machine: run must start the same one."""
    d = diagnose(M, probe(M, system), read_runtime(system, lambda: docker), RawQuery(), "torchyard")
    assert d.recommended is not None
    return d.recommended.image


GPU_HOSTS = {
    "RTX 4090 + 535, toolkit": (machine(RTX4090_535, driver="535.104.05"), DOCKER_WITH_TOOLKIT, ["--gpus", "all"]),
    "2x H100 + 580, toolkit": (machine(H100X2_580, driver="580.65.06"), DOCKER_WITH_TOOLKIT, ["--gpus", "all"]),
    "A100 MIG + 535, toolkit": (machine(A100_MIG, driver="535.216.01"), DOCKER_WITH_TOOLKIT, ["--gpus", "all"]),
    "GB10 (arm64) + 580, toolkit": (
        machine(GB10, arch="aarch64", driver="580.126.09"),
        DOCKER_WITH_TOOLKIT,
        ["--gpus", "all"],
    ),
    "RTX 4090 + 535, CDI": (
        machine(RTX4090_535, driver="535.104.05", toolkit=False, files=CDI_SPEC),
        CDI,
        ["--device", "nvidia.com/gpu=all"],
    ),
}


@pytest.mark.parametrize("host", sorted(GPU_HOSTS))
def test_dry_run_on_a_gpu_host_prints_its_gpu_flags_ipc_workspace_and_user(torchyard: Torchyard, host: str) -> None:
    system, docker, flags = GPU_HOSTS[host]
    result, engine = torchyard(system, "--dry-run", "--", "python", "-c", "1", docker=docker)
    assert result.exit_code == 0, result.output
    argv = line(result)
    name = argv[argv.index("--name") + 1]
    assert name.startswith("torchyard-run-")
    assert argv == [
        "docker", "run", "--rm", "--name", name, "-i", *flags, "--ipc=host",
        "-v", f"{os.getcwd()}:/workspace", "-w", "/workspace", "--user", ME, "-e", "HOME=/tmp", *NAMED,
        chosen(system, docker), "python", "-c", "1",
    ]  # fmt: skip
    assert "the container will use the CPU" not in result.stderr
    assert engine.pulled == [] and engine.started == []


def test_dry_run_without_a_gpu_has_no_gpu_flags_and_says_the_cpu_is_used(torchyard: Torchyard) -> None:
    system = machine(None, toolkit=False)
    result, _ = torchyard(system, "--dry-run", "--", "python", "-c", "1", docker=DOCKER_PLAIN)
    assert result.exit_code == 0, result.output
    argv = line(result)
    assert "--gpus" not in argv and "--device" not in argv
    assert argv[argv.index("--ipc=host") :] == [
        "--ipc=host", "-v", f"{os.getcwd()}:/workspace", "-w", "/workspace", "--user", ME, "-e", "HOME=/tmp", *NAMED,
        chosen(system, DOCKER_PLAIN), "python", "-c", "1",
    ]  # fmt: skip
    assert (
        "torchyard: no GPU here (no NVIDIA driver: nvidia-smi is not installed and no kernel module is loaded): "
        "the container will use the CPU"
    ) in result.stderr.splitlines()


def test_an_image_that_will_not_run_here_is_refused_with_the_one_that_would(torchyard: Torchyard) -> None:
    system = machine(RTX4090_535, driver="535.104.05")
    ref = "team/torch:cu130"
    engine = RunEngine(images={ref: image(CUDA13_LABELS)})
    result, _ = torchyard(system, "--dry-run", ref, "--", "python", "-c", "1", engine=engine)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"torchyard: error: {ref} will not run here: ")
    assert "driver 535.104.05: every CUDA 13 build needs >= 580.65.06" in error  # the driver-cuda rule
    assert error.endswith(f"; the image that runs here: {chosen(system, DOCKER_WITH_TOOLKIT)} (--force to run it)")
    forced, _ = torchyard(system, "--dry-run", "--force", ref, "--", "python", "-c", "1", engine=engine)
    assert forced.exit_code == 0, forced.output
    assert line(forced)[-4:] == [ref, "python", "-c", "1"]
    assert "running it anyway (--force)" in forced.stderr


def test_the_same_image_runs_on_a_580_driver(torchyard: Torchyard) -> None:
    ref = "team/torch:cu130"
    engine = RunEngine(images={ref: image(CUDA13_LABELS)})
    system = machine(RTX4090_535.replace("535.104.05", "580.65.06"), driver="580.65.06")
    result, _ = torchyard(system, "--dry-run", ref, "--", "python", "-c", "1", engine=engine)
    assert result.exit_code == 0, result.output
    assert line(result)[-4:] == [ref, "python", "-c", "1"]


def test_without_a_gpu_only_the_platform_decides(torchyard: Torchyard) -> None:
    ref = "team/torch:arm64"
    engine = RunEngine(images={ref: image(CUDA13_LABELS, platform="linux/arm64")})
    result, _ = torchyard(machine(None, toolkit=False), "--dry-run", ref, docker=DOCKER_PLAIN, engine=engine)
    assert result.exit_code == 1
    assert "the image is linux/arm64, this machine linux/amd64" in result.stderr
    engine.images[ref] = image(CUDA13_LABELS)  # CUDA 13 on a machine without a GPU: its torch uses the CPU
    result, _ = torchyard(machine(None, toolkit=False), "--dry-run", ref, docker=DOCKER_PLAIN, engine=engine)
    assert result.exit_code == 0, result.output


def test_options_shell_root_shm_env_and_docker_options(torchyard: Torchyard) -> None:
    system = machine(None, toolkit=False)
    args = ("--dry-run", "--root", "--shm-size", "16g", "-e", "A=1", "-e", "B", "debian:bookworm-slim")
    engine = RunEngine(images={"debian:bookworm-slim": image()})
    result, _ = torchyard(system, *args, "--", "--network", "host", "--", "ls", "--", "-l", engine=engine)
    assert result.exit_code == 0, result.output
    argv = line(result)
    assert "--user" not in argv and "--ipc=host" not in argv
    assert argv[argv.index("-i") + 1 :] == [
        "--shm-size=16g", "-v", f"{os.getcwd()}:/workspace", "-w", "/workspace", "-e", "A=1", "-e", "B",
        "--network", "host", "debian:bookworm-slim", "ls", "--", "-l",
    ]  # fmt: skip
    shell, _ = torchyard(system, "--dry-run", "debian:bookworm-slim", engine=engine)
    assert line(shell)[-3:] == ["sh", "-c", 'exec "$(command -v bash || command -v sh)"']


def test_docker_options_without_the_second_separator_and_image_with_here_are_bad_flags(torchyard: Torchyard) -> None:
    with pytest.raises(UsageError, match="end with a second `--` before the command"):
        split_after(["--network", "host", "python"])
    assert split_after(["python", "-c", "1"]) == ([], ["python", "-c", "1"])
    result, _ = torchyard(machine(None, toolkit=False), "--here", "debian:bookworm-slim")
    assert result.exit_code == 2
    assert "give IMAGE or --here, not both" in result.stderr


def test_without_the_image_a_script_gets_the_build_command_and_nothing_starts(torchyard: Torchyard) -> None:
    system = machine(RTX4090_535, driver="535.104.05")
    result, engine = torchyard(system, "--", "python", "-c", "1")
    assert result.exit_code == 1, result.output
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"torchyard: error: {chosen(system, DOCKER_WITH_TOOLKIT)} is not here")
    assert "build it with `torchyard build --torch " in error and "--yes" in error
    assert engine.pulled == [] and engine.started == []  # no --repo: nothing to pull from


def test_the_chosen_image_is_pulled_from_the_team_repository_and_started(
    torchyard: Torchyard, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = machine(RTX4090_535, driver="535.104.05")
    monkeypatch.setenv("TORCHYARD_REPO", "127.0.0.1:5000/team/torch")
    ref = chosen(system, DOCKER_WITH_TOOLKIT).replace("torchyard:", "127.0.0.1:5000/team/torch:")
    engine = RunEngine(registry={ref: image()})
    result, _ = torchyard(system, "--", "python", "-c", "1", engine=engine)
    assert result.exit_code == 7, result.output  # the container's own exit code
    assert engine.pulled == [ref]
    (spec,) = engine.started
    assert (spec.image, spec.command, spec.gpu_flags, spec.user) == (ref, ("python", "-c", "1"), ("--gpus", "all"), ME)
    missing, engine = torchyard(system, "--", "python", engine=RunEngine())
    assert missing.exit_code == 1 and engine.pulled == [ref] and engine.started == []
    assert "not pulled (pull " in missing.stderr


def test_a_given_image_is_pulled_then_judged(torchyard: Torchyard) -> None:
    ref = "127.0.0.1:5000/team/torch:cu130"
    engine = RunEngine(registry={ref: image(CUDA13_LABELS)})
    result, _ = torchyard(machine(RTX4090_535, driver="535.104.05"), ref, engine=engine)
    assert result.exit_code == 1 and engine.pulled == [ref] and engine.started == []
    assert f"{ref} will not run here" in result.stderr


def test_the_argv_builder_puts_every_flag_before_the_image(tmp_path: Path) -> None:
    spec = ContainerSpec(image="img", command=("a", "b"), name="n", gpu_flags=("--gpus", "all"), tty=True,
                         workspace=str(tmp_path), user="1000:1000", extra=("--network", "none"))  # fmt: skip
    assert docker_run_argv(spec, "/usr/bin/docker") == [
        "/usr/bin/docker", "run", "--rm", "--name", "n", "-it", "--gpus", "all", "--ipc=host",
        "-v", f"{tmp_path}:/workspace", "-w", "/workspace", "--user", "1000:1000", "-e", "HOME=/tmp",
        "--network", "none", "img", "a", "b",
    ]  # fmt: skip


def test_as_root_through_sudo_the_container_runs_as_the_sudo_caller(
    torchyard: Torchyard, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "getuid", lambda: 0)
    monkeypatch.setattr(os, "getgid", lambda: 0)
    for name, value in {"SUDO_UID": "1000", "SUDO_GID": "1000", "SUDO_USER": "ana"}.items():
        monkeypatch.setenv(name, value)
    result, _ = torchyard(machine(None, toolkit=False), "--dry-run", "--", "id", docker=DOCKER_PLAIN)
    assert result.exit_code == 0, result.output
    argv = line(result)
    assert argv[argv.index("--user") : argv.index("--user") + 8] == [
        "--user", "1000:1000", "-e", "HOME=/tmp", "-e", "USER=ana", "-e", "LOGNAME=ana"
    ]  # fmt: skip
    rooted, _ = torchyard(machine(None, toolkit=False), "--dry-run", "--root", "--", "id", docker=DOCKER_PLAIN)
    assert "--user" not in line(rooted)


SM89 = "torchyard:2.15.0-cuda13.2-cudnn9-py3.13-debian13-runtime-sm89"  # what `torchyard build --arch sm_89` tags


def test_the_image_build_arch_sm_89_made_is_the_one_run_starts_on_an_rtx_4090_with_580(torchyard: Torchyard) -> None:
    engine = RunEngine(images={SM89: holding(SM89, "torch2.15.0-cu132-py3.13-debian13", arch_list="sm_89")})
    system = machine(RTX4090_535.replace("535.104.05", "580.65.06"), driver="580.65.06")
    result, _ = torchyard(system, "--dry-run", "--", "python", "-c", "1", engine=engine)
    assert result.exit_code == 0, result.output
    assert line(result)[-4:] == [SM89, "python", "-c", "1"]
    assert "is not in the local engine" not in result.stderr


def test_on_a_t4_with_535_the_cuda_13_image_is_passed_over_for_the_one_that_runs(torchyard: Torchyard) -> None:
    engine = RunEngine(images={SM89: holding(SM89, "torch2.15.0-cu132-py3.13-debian13", arch_list="sm_89")})
    system = machine("0, Tesla T4, 7.5, 15360, 535.104.05, Disabled\n", driver="535.104.05")
    result, _ = torchyard(system, "--dry-run", "--", "python", "-c", "1", engine=engine)
    assert result.exit_code == 0, result.output
    chosen = "torchyard:2.14.1-cuda12.6-cudnn9-py3.13-debian13-runtime"
    assert line(result)[-4:] == [chosen, "python", "-c", "1"]
    assert f"torchyard: {chosen} is not in the local engine: run builds it (torchyard build --torch 2.14.1" in (
        result.stderr
    )
