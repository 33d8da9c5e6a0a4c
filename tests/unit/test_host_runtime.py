"""builder/host/runtime.py read precisely: what `docker info`, the toolkit's hook, the CDI specs and daemon.json say
about how containers get GPUs and /dev/shm (written for the host group of `bench/mutation.py`, docs/mutation.md)."""

from __future__ import annotations

from typing import Any

import pytest
from host_kit import DOCKER_PLAIN, DOCKER_WITH_TOOLKIT, FakeSystem, machine

from builder.core.errors import EngineError
from builder.host.runtime import DAEMON_JSON, DEFAULT_SHM_MIB, RuntimeReading, _shm_mib, read_runtime

SPEC = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n"


def daemon(info: dict[str, Any]) -> Any:
    return lambda: info


def test_docker_info_is_read_into_the_reading() -> None:
    reading = read_runtime(machine(toolkit=False), daemon(DOCKER_WITH_TOOLKIT))
    assert (reading.engine, reading.runtimes, reading.default_runtime) == (
        "24.0.7",
        ("io.containerd.runc.v2", "nvidia"),
        "runc",
    )
    assert reading.gpus_flag, "the nvidia runtime alone makes --gpus work"
    assert (reading.cdi_enabled, reading.cdi_specs, reading.shm_mib, reading.problems) == (False, (), 64, [])


def test_the_runtimes_are_sorted_and_the_hook_alone_makes_gpus_work() -> None:
    info = DOCKER_PLAIN | {"Runtimes": {"runc": {}, "crun": {}, "io.containerd.runc.v2": {}}}
    reading = read_runtime(machine(toolkit=True), daemon(info))
    assert reading.runtimes == ("crun", "io.containerd.runc.v2", "runc")
    assert reading.gpus_flag
    assert not read_runtime(machine(toolkit=False), daemon(info)).gpus_flag


@pytest.mark.parametrize(
    ("error", "problem"),
    [
        (EngineError("no Docker engine answers at unix:///var/run/docker.sock\nis dockerd running?"),
         "no Docker engine answers at unix:///var/run/docker.sock"),
        (ConnectionError(), "ConnectionError"),
    ],
)  # fmt: skip
def test_an_engine_that_does_not_answer_is_a_problem_of_one_line(error: Exception, problem: str) -> None:
    def down() -> dict[str, Any]:
        raise error

    reading = read_runtime(machine(toolkit=True), down)
    assert reading.problems == [problem]
    assert (reading.engine, reading.runtimes, reading.default_runtime, reading.cdi_enabled) == (None, (), None, False)
    assert reading.gpus_flag, "the hook is read from the machine, not from the engine"


def test_an_engine_without_a_version_is_not_an_engine_version() -> None:
    assert read_runtime(machine(), daemon({"ServerVersion": ""})).engine is None
    assert read_runtime(machine(), daemon({"ServerVersion": 27})).engine == "27"


def test_cdi_specs_naming_nvidia_gpus_are_found_in_the_engines_dirs_or_the_default_ones() -> None:
    files = {
        "/etc/cdi/nvidia.yaml": SPEC,
        "/etc/cdi/other.yaml": "kind: vendor.com/fpga\n",
        "/var/run/cdi/nvidia.json": '{"kind": "nvidia.com/gpu"}',
        "/var/run/cdi/nvidia.yml": SPEC,
        "/srv/cdi/nvidia.yaml": SPEC,
    }
    default = read_runtime(FakeSystem(files=files), daemon(DOCKER_PLAIN))
    assert default.cdi_specs == ("/etc/cdi/nvidia.yaml", "/var/run/cdi/nvidia.yml", "/var/run/cdi/nvidia.json")
    assert not default.cdi_enabled
    told = read_runtime(FakeSystem(files=files), daemon(DOCKER_PLAIN | {"CDISpecDirs": ["/srv/cdi"]}))
    assert (told.cdi_specs, told.cdi_enabled) == (("/srv/cdi/nvidia.yaml",), True)


def test_a_spec_file_that_cannot_be_read_names_no_gpu() -> None:
    class Unreadable(FakeSystem):
        def read(self, path: str, limit: int = 1 << 20) -> str | None:
            return None

    reading = read_runtime(Unreadable(files={"/etc/cdi/nvidia.yaml": SPEC}), daemon(DOCKER_PLAIN))
    assert reading.cdi_specs == () and reading.shm_mib == DEFAULT_SHM_MIB


@pytest.mark.parametrize(
    ("specs", "enabled", "hook", "flags"),
    [
        (("/etc/cdi/nvidia.yaml",), True, False, ["--device", "nvidia.com/gpu=all"]),
        (("/etc/cdi/nvidia.yaml",), True, True, ["--gpus", "all"]),  # the hook works: --gpus is the usual way
        (("/etc/cdi/nvidia.yaml",), False, False, ["--gpus", "all"]),  # the engine does not read the specs
        ((), True, False, ["--gpus", "all"]),
    ],
)
def test_gpu_flags_use_cdi_only_where_the_engine_reads_nvidia_specs_and_the_hook_is_missing(
    specs: tuple[str, ...], enabled: bool, hook: bool, flags: list[str]
) -> None:
    assert RuntimeReading(cdi_specs=specs, cdi_enabled=enabled, gpus_flag=hook).gpu_flags == flags


def test_daemon_json_gives_the_containers_shm_size() -> None:
    files = {DAEMON_JSON: '{"default-shm-size": "2g"}'}
    assert read_runtime(machine(files=files), daemon(DOCKER_PLAIN)).shm_mib == 2048


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        (None, 64),
        ("", 64),
        ("{}", 64),
        ('{"default-shm-size": "1g"}', 1024),
        ('{"default-shm-size": "1G"}', 1024),
        ('{"default-shm-size": "512m"}', 512),
        ('{"default-shm-size": "512MB"}', 512),
        ('{"default-shm-size": " 256m "}', 256),
        ('{"default-shm-size": "256 m"}', 256),
        ('{"default-shm-size": "2048k"}', 2),
        ('{"default-shm-size": "2047k"}', 1),
        ('{"default-shm-size": 268435456}', 256),
        ('{"default-shm-size": "268435455"}', 255),
        ('{"default-shm-size": "268435456b"}', 256),
        ('{"default-shm-size": "1t"}', 64),  # not a unit Docker takes here
        ('{"default-shm-size": "-1g"}', 64),
        ('{"default-shm-size": "1.5g"}', 64),
        ('{"default-shm-size": "g"}', 64),
        ('{"default-shm-size": "1g "}', 1024),
        ('{"default-shm-size": "x1g"}', 64),
        ('{"default-shm-size": "1gx"}', 64),
        ('{"default-shm-size": "\\u0661g"}', 64),  # an Arabic-Indic one: \\d without re.ASCII would take it
        ('{"default-shm-size": null}', 64),
        ("[1, 2]", 64),  # JSON, but not an object
        ("{not json", 64),
    ],
)
def test_shm_size_forms(text: str | None, mib: int) -> None:
    assert _shm_mib(text) == mib


def test_the_image_store_is_read_and_doctor_says_it() -> None:
    """Docker 26 with the containerd image store (what Docker 29 gives fresh installs) against the graph driver."""
    from builder.cli.doctor_cmd import _runtime_data

    system = machine(None, toolkit=False)
    containerd = DOCKER_PLAIN | {"ServerVersion": "26.1.5+dfsg1",
                                 "DriverStatus": [["driver-type", "io.containerd.snapshotter.v1"]]}  # fmt: skip
    store = read_runtime(system, lambda: containerd)
    assert (store.containerd_store, store.image_store) == (True, "containerd image store")
    graph = read_runtime(system, lambda: DOCKER_PLAIN | {"DriverStatus": [["Backing Filesystem", "extfs"]]})
    assert (graph.containerd_store, graph.image_store) == (False, "graph driver")
    assert (_runtime_data(store) or {})["image_store"] == "containerd"
    assert (_runtime_data(graph) or {})["image_store"] == "graph driver"
