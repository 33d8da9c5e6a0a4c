"""What the project tests share (test_project_cli.py, test_project_lock.py): a project folder as the current one,
a recorded machine (host_kit.stand_ins) as the machine every command reads, torchyard through main (its one
error line and exit code), a lock written as render or build writes it, and the engine at run's and doctor's
seams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from host_kit import FakeSystem, RunEngine, stand_ins
from matrix_kit import real

import builder.host.probe
from builder.cli.main import main
from builder.core import env
from builder.core.kinds import Strategy
from builder.engine.quick import QuickEngine
from builder.lock.resolve_id import find_combination
from builder.project.lockfile import write_project_lock
from builder.project.settle import lock_for, open_project

M = real()
HOSTS = tuple(stand_ins())
DRY = ("build", "--dry-run", "--no-host-settings")
OLD = "torch2.14.1-cu126-py3.13-debian13"  # doctor's choice on the RTX 4090 with the 535 driver
NEW = "torch2.15.0-cu132-py3.13-debian13"  # ... and on two H100 with the 580 driver


def project_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder, the current one; build and render read the machine (no $TORCHYARD_ANY_HOST)."""
    here = tmp_path / "my-model"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.delenv(env.ANY_HOST, raising=False)
    return here


def on(monkeypatch: pytest.MonkeyPatch, name: str) -> FakeSystem:
    """The recorded machine `name`, fresh, as the machine every command reads."""
    system = stand_ins()[name]
    monkeypatch.setattr(builder.host.probe, "RealSystem", lambda: system)
    monkeypatch.setattr("builder.cli.doctor_cmd.RealSystem", lambda: system)
    monkeypatch.setattr("builder.cli.run_cmd.RealSystem", lambda: system)
    return system


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`torchyard ARGV`: its exit code, stdout and stderr."""
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def locked(folder: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """torchyard.toml with `text` and the lock render or build would write for it on the RTX 4090 + 535 (OLD)."""
    (folder / "torchyard.toml").write_text(text)
    on(monkeypatch, "rtx4090-535")
    project = open_project(M, folder / "torchyard.toml", re_resolve=True)
    c = find_combination(M, OLD)
    assert c is not None
    write_project_lock(project.lock_path, lock_for(M, project.config, c, "the RTX 4090", Strategy.WHEELS))


def docker(monkeypatch: pytest.MonkeyPatch, info: dict[str, Any]) -> RunEngine:
    """An engine with no images, at doctor's (DockerEngine) and run's (QuickEngine) seams; no container starts."""
    engine = RunEngine()
    monkeypatch.setattr("builder.engine.DockerEngine.daemon_info", lambda self: info)
    monkeypatch.setattr("builder.engine.DockerEngine.labelled", lambda self, label: engine.labelled(label))
    for name in ("inspect", "pull", "labelled", "read_file"):
        monkeypatch.setattr(QuickEngine, name, lambda _, *a, _n=name, **k: getattr(engine, _n)(*a, **k))
    monkeypatch.setattr(QuickEngine, "daemon_info", lambda _: info)
    monkeypatch.setattr("builder.cli.run_cmd.run_container", engine.run)
    return engine
