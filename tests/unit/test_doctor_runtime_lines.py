"""doctor's reading of the container runtime, line by line (issue 24: mutmut left 34 changes of
`_runtime_problems` alive on 2026-12-02): what is "not checked" and why, each problem's exact message and fix,
and the conditions that raise them (a GPU without an NVIDIA runtime, hook or enabled CDI spec; Docker's 64 MB
/dev/shm; MIG). Unknown is neither yes nor no: a runtime not asked, or no engine, is named among the unchecked.
"""

from __future__ import annotations

from host_kit import A100_MIG, RTX4090_535, machine
from matrix_kit import real

from builder.host.doctor import Problem, _runtime_problems
from builder.host.probe import Host, probe
from builder.host.runtime import DEFAULT_SHM_MIB, RuntimeReading

M = real()
NO_ENGINE = Problem("docker", "no Docker engine answers", "install Docker Engine, or start it (dockerd)")
NO_RUNTIME = Problem(
    "nvidia-runtime",
    "the engine has no NVIDIA runtime, toolkit hook or CDI spec: `docker run --gpus all` fails "
    '(could not select device driver "" with capabilities: [[gpu]])',
    "install the NVIDIA Container Toolkit and run `nvidia-ctk runtime configure --runtime=docker`, then restart "
    "Docker (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html)",
)
SHM = Problem(
    "shm",
    "containers get a 64 MB /dev/shm by default: DataLoader workers and NCCL fail with 'Bus error' or 'unable to "
    "write to file </torch_...>'",
    "start containers with --ipc=host (the run line does) or --shm-size=16g",
)


def _gpu_host() -> Host:
    return probe(M, machine(RTX4090_535, driver="535.104.05"))


def _cpu_host() -> Host:
    return probe(M, machine(None))


def _problems(host: Host, runtime: RuntimeReading | None) -> tuple[list[Problem], list[str]]:
    unchecked: list[str] = []
    return _runtime_problems(host, runtime, unchecked), unchecked


def test_a_runtime_not_asked_is_unchecked_and_no_problem() -> None:
    assert _problems(_gpu_host(), None) == ([], ["the container runtime (not asked)"])


def test_no_engine_is_one_problem_and_the_runtime_unchecked_with_the_reason() -> None:
    assert _problems(_gpu_host(), RuntimeReading()) == (
        [NO_ENGINE],
        ["the container runtime: no Docker engine answered"],
    )


def test_no_engine_names_every_reason_the_reading_gave() -> None:
    reading = RuntimeReading(problems=["permission denied on /var/run/docker.sock", "dockerd is not running"])
    assert _problems(_cpu_host(), reading) == (
        [NO_ENGINE],
        ["the container runtime: permission denied on /var/run/docker.sock; dockerd is not running"],
    )


def test_a_gpu_without_runtime_hook_or_cdi_and_the_default_shm_are_two_problems_word_for_word() -> None:
    assert _problems(_gpu_host(), RuntimeReading(engine="24.0.7")) == ([NO_RUNTIME, SHM], [])


def test_a_cdi_spec_counts_only_where_the_engine_reads_cdi() -> None:
    host = _gpu_host()
    spec = ("/etc/cdi/nvidia.yaml",)
    big = DEFAULT_SHM_MIB + 1
    assert _problems(host, RuntimeReading(engine="25.0", cdi_specs=spec, shm_mib=big)) == ([NO_RUNTIME], [])
    assert _problems(host, RuntimeReading(engine="25.0", cdi_enabled=True, shm_mib=big)) == ([NO_RUNTIME], [])
    both = RuntimeReading(engine="25.0", cdi_specs=spec, cdi_enabled=True, shm_mib=big)
    assert _problems(host, both) == ([], [])
    assert _problems(host, RuntimeReading(engine="24.0.7", gpus_flag=True, shm_mib=big)) == ([], [])


def test_without_gpus_no_runtime_is_needed_and_shm_is_judged_at_its_bound() -> None:
    host = _cpu_host()
    assert _problems(host, RuntimeReading(engine="24.0.7", shm_mib=DEFAULT_SHM_MIB + 1)) == ([], [])
    small = RuntimeReading(engine="24.0.7", shm_mib=32)
    assert _problems(host, small)[0] == [Problem("shm", SHM.message.replace("64 MB", "32 MB"), SHM.fix)]


def test_mig_is_a_problem_naming_the_gpu_and_both_ways_out() -> None:
    host = probe(M, machine(A100_MIG, driver="535.216.01"))
    found, unchecked = _problems(host, RuntimeReading(engine="24.0.7", gpus_flag=True, shm_mib=DEFAULT_SHM_MIB + 1))
    assert unchecked == []
    assert found == [
        Problem(
            "mig",
            "MIG is enabled on GPU 0 (NVIDIA A100-SXM4-80GB): containers get MIG instances, and NCCL cannot span them",
            "give a container one instance (--gpus '\"device=0:0\"'; nvidia-smi -L names them), or turn MIG off: "
            "nvidia-smi -i 0 -mig 0",
        )
    ]
