"""`torchyard devcontainer` on every recorded machine (host_kit.stand_ins): the image is the notebook image the
locator finds here (the runtime image as root with --flavor runtime), and the GPU access is the one this engine
needs: hostRequirements.gpu where the devcontainers CLI sees docker's nvidia runtime (it adds --gpus all itself),
--gpus all in runArgs with the toolkit's hook alone, CDI devices and no hostRequirements.gpu on a CDI host, neither
without a GPU. The file is written deterministically and never over one that is there without --force."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import pytest
from host_kit import DOCKER_PLAIN, DOCKER_WITH_TOOLKIT, RTX4090_535, FakeSystem, RunEngine, holding, machine, stand_ins
from matrix_kit import real
from test_run import CDI, CDI_SPEC

from builder.cli.main import main
from builder.core import env
from builder.core.errors import PushError
from builder.core.kinds import Flavor
from builder.engine.quick import QuickEngine
from builder.host.devcontainer import image_of
from builder.host.doctor import diagnose
from builder.host.locate import Location, Where
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.resolve.query import RawQuery

M = real()
HOOK_ONLY = {**DOCKER_PLAIN, "ServerVersion": "27.5.1"}  # the toolkit's hook on PATH, no nvidia runtime registered
WORK = "/home/jovyan/work"


def chosen(system: FakeSystem, docker: dict[str, Any], flavor: Flavor = Flavor.NOTEBOOK) -> tuple[str, str, str]:
    """(image, combination, platform) doctor's chooser names for this machine."""
    d = diagnose(M, probe(M, system), read_runtime(system, lambda: docker), RawQuery(), "torchyard", flavor=flavor)
    assert d.recommended is not None
    c = d.recommended.result.combo
    return d.recommended.image, c.id, c.platform.value


def with_image(system: FakeSystem, docker: dict[str, Any], flavor: Flavor = Flavor.NOTEBOOK) -> RunEngine:
    ref, combination, platform = chosen(system, docker, flavor)
    return RunEngine(images={ref: holding(ref, combination, platform=platform, flavor=flavor.value)})


Result = tuple[int, dict[str, Any] | None, str]


class Write(Protocol):
    def __call__(self, system: FakeSystem, docker: dict[str, Any], *args: str,
                 engine: RunEngine | None = None) -> Result: ...  # fmt: skip


@pytest.fixture
def write(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Write:
    """(exit code, the file written, stderr) of `torchyard devcontainer ARGS -o tmp/.devcontainer/devcontainer.json`
    on `system` with `docker`'s info; the engine holds the chosen image unless given."""

    def invoke(system: FakeSystem, docker: dict[str, Any], *args: str, engine: RunEngine | None = None) -> Result:
        engine = with_image(system, docker) if engine is None else engine
        monkeypatch.delenv(env.ANY_HOST, raising=False)  # unit_walls sets it: --any-host is asked for here
        monkeypatch.setattr("builder.cli.devcontainer_cmd.RealSystem", lambda: system)
        monkeypatch.setattr(QuickEngine, "daemon_info", lambda _: docker)
        monkeypatch.setattr(QuickEngine, "labelled", lambda _, label: engine.labelled(label))
        target = tmp_path / ".devcontainer" / "devcontainer.json"
        with pytest.raises(SystemExit) as exited:
            main(["devcontainer", "-o", str(target), *args])
        found = json.loads(target.read_text()) if target.exists() else None
        return int(exited.value.code or 0), found, capsys.readouterr().err

    return invoke


def gpu_hosts() -> list[str]:
    return sorted(name for name, system in stand_ins().items() if probe(M, system).gpus)


def cpu_hosts() -> list[str]:
    return sorted(name for name, system in stand_ins().items() if not probe(M, system).gpus)


@pytest.mark.parametrize("name", gpu_hosts())
def test_a_host_with_the_nvidia_runtime_gets_host_requirements_and_the_cli_adds_the_gpus(
    write: Write, name: str
) -> None:
    system = stand_ins()[name]
    code, found, _ = write(system, DOCKER_WITH_TOOLKIT)
    assert code == 0 and found is not None
    assert found["hostRequirements"] == {"gpu": True}
    assert found["runArgs"] == ["--ipc=host", "--group-add", "100"]  # no second --gpus all beside the CLI's
    assert found["image"] == chosen(system, DOCKER_WITH_TOOLKIT)[0]


@pytest.mark.parametrize("name", gpu_hosts())
def test_a_host_with_the_toolkit_hook_alone_gets_gpus_all_in_run_args(write: Write, name: str) -> None:
    code, found, _ = write(stand_ins()[name], HOOK_ONLY)
    assert code == 0 and found is not None
    assert found["runArgs"] == ["--gpus", "all", "--ipc=host", "--group-add", "100"]
    assert "hostRequirements" not in found


def test_a_cdi_host_gets_cdi_devices_and_no_gpu_host_requirement(write: Write) -> None:
    system = machine(RTX4090_535, driver="535.104.05", toolkit=False, files=CDI_SPEC)
    code, found, _ = write(system, CDI)
    assert code == 0 and found is not None
    assert found["runArgs"] == ["--device", "nvidia.com/gpu=all", "--ipc=host", "--group-add", "100"]
    assert "hostRequirements" not in found  # the CLI's --gpus all would fail on this engine


@pytest.mark.parametrize("name", cpu_hosts())
def test_a_host_without_a_gpu_gets_neither(write: Write, name: str) -> None:
    code, found, err = write(stand_ins()[name], DOCKER_PLAIN)
    assert code == 0 and found is not None
    assert found["runArgs"] == ["--ipc=host", "--group-add", "100"] and "hostRequirements" not in found
    assert "the container will use the CPU" in err


def test_the_notebook_file_in_full(write: Write, tmp_path: Path) -> None:
    system = stand_ins()["rtx4090-535"]
    code, found, _ = write(system, HOOK_ONLY)
    assert code == 0
    assert found == {
        "image": chosen(system, HOOK_ONLY)[0],
        "name": "torchyard notebook",
        "overrideCommand": True,
        "remoteUser": "jovyan",
        "runArgs": ["--gpus", "all", "--ipc=host", "--group-add", "100"],
        "updateRemoteUserUID": True,
        "workspaceFolder": WORK,
        "workspaceMount": f"source=${{localWorkspaceFolder}},target={WORK},type=bind",
    }
    assert "features" not in found
    text = (tmp_path / ".devcontainer" / "devcontainer.json").read_text()
    assert text == json.dumps(found, indent=2, sort_keys=True) + "\n"


def test_the_runtime_flavor_runs_as_root_at_workspace(write: Write) -> None:
    system = stand_ins()["rtx4090-535"]
    engine = with_image(system, HOOK_ONLY, Flavor.RUNTIME)
    code, found, _ = write(system, HOOK_ONLY, "--flavor", "runtime", engine=engine)
    assert code == 0 and found is not None
    assert found["remoteUser"] == "root" and "updateRemoteUserUID" not in found
    assert found["image"] == chosen(system, HOOK_ONLY, Flavor.RUNTIME)[0]
    assert found["runArgs"] == ["--gpus", "all", "--ipc=host"]
    assert found["workspaceFolder"] == "/workspace"


def test_serve_starts_the_server_and_forwards_its_port(write: Write) -> None:
    code, found, _ = write(stand_ins()["no-gpu"], DOCKER_PLAIN, "--serve")
    assert code == 0 and found is not None
    assert found["overrideCommand"] is False and found["forwardPorts"] == [8888]


def test_any_host_leaves_the_gpus_to_the_cli(write: Write) -> None:
    code, found, _ = write(stand_ins()["rtx4090-535"], CDI, "--any-host")
    assert code == 0 and found is not None
    assert found["hostRequirements"] == {"gpu": "optional"} and found["runArgs"] == ["--ipc=host", "--group-add", "100"]


def test_an_existing_file_is_kept_without_force(write: Write, tmp_path: Path) -> None:
    target = tmp_path / ".devcontainer" / "devcontainer.json"
    target.parent.mkdir()
    target.write_text("{}\n")
    code, _, err = write(stand_ins()["no-gpu"], DOCKER_PLAIN)
    assert code == 2 and target.read_text() == "{}\n"
    assert err == f"torchyard: error: devcontainer: {target} is already there; --force replaces it\n"
    code, found, _ = write(stand_ins()["no-gpu"], DOCKER_PLAIN, "--force")
    assert code == 0 and found is not None and found["remoteUser"] == "jovyan"


def test_no_image_here_is_one_line_with_its_build_command(write: Write) -> None:
    system = stand_ins()["rtx4090-535"]
    code, found, err = write(system, HOOK_ONLY, engine=RunEngine())
    assert code == 1 and found is None
    (line,) = err.splitlines()
    assert line.startswith(f"torchyard: error: devcontainer: {chosen(system, HOOK_ONLY)[0]} is not here: build it ")
    assert line.endswith("--target notebook --repo torchyard`")


def test_a_flavor_without_a_dev_container_is_refused(write: Write) -> None:
    code, found, _ = write(stand_ins()["no-gpu"], DOCKER_PLAIN, "--flavor", "devel")
    assert code == 2 and found is None


class _Registry:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def manifest(self, repo: Any, reference: str) -> Any:
        if self.error:
            raise self.error
        return type("M", (), {"digest": "sha256:" + "ab" * 32})()


def test_an_image_in_the_registry_is_named_by_its_digest() -> None:
    loc = Location(Where.REPOSITORY, "registry.example.com/team/torch:2.15.0-notebook", (), "build", "size")
    assert image_of(loc, _Registry()) == ("registry.example.com/team/torch@sha256:" + "ab" * 32, [])  # type: ignore[arg-type]
    ref, notes = image_of(loc, _Registry(PushError("refused")))  # type: ignore[arg-type]
    assert ref == loc.reference and notes == [
        f"the digest of {ref} could not be read (refused): the file names the tag"
    ]
    local = Location(Where.LOCAL, "torchyard:2.15.0-notebook", (), "build", "size")
    assert image_of(local) == ("torchyard:2.15.0-notebook", [])
