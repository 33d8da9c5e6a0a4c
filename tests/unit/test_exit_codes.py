"""The README's exit-code table, command by command: each code a command can give, from a real cause, with one
error line on stderr and no traceback (a fake engine at the seam; no process starts)."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from fake_engine import FakeEngine, FakeRegistry, contents_of
from render_kit import plan

import builder.cli.build_cmd
import builder.cli.smoke_cmd
import builder.engine
import builder.host.image_inspect
import builder.pipeline.pipeline
import builder.publish.run
from builder.cli.main import main
from builder.cli.outdated_cmd import OUTDATED
from builder.core.errors import EngineError, Interrupted, PushError
from builder.core.kinds import Status
from builder.publish.report import ItemResult, PublishInterrupted, Report
from builder.resolve.verdict import CANNOT_TELL_EXIT

README = Path(__file__).resolve().parents[2] / "README.md"
IDENT = "torch2.14.1-cu130-py3.11-debian12"
PIN = ("--torch", "2.14.1", "--variant", "cu130", "--python", "3.11", "--os", "debian12", "--no-host-settings")
Setup = Callable[[pytest.MonkeyPatch, Path], None]


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    code: int
    setup: Setup | None = None


def _fake(monkeypatch: pytest.MonkeyPatch, **knobs: object) -> FakeEngine:
    registry = FakeRegistry()
    fake = FakeEngine(contents_of(plan(IDENT)), registry=registry)
    for name, value in knobs.items():
        setattr(fake, name, value)
    for module in (builder.cli.build_cmd, builder.cli.smoke_cmd, builder.engine):
        monkeypatch.setattr(module, "DockerEngine", lambda: fake)
    monkeypatch.setattr(builder.pipeline.pipeline, "Registry", lambda auth: registry)
    return fake


def engine(**knobs: object) -> Setup:
    def setup(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
        _fake(monkeypatch, **knobs)

    return setup


def read_only_registry() -> Setup:
    def setup(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
        fake = _fake(monkeypatch)
        assert fake.registry is not None
        fake.registry.push_refusal = PushError("registry 127.0.0.1:5000 will not take a push to t/x: HTTP 405")

    return setup


def terminated() -> Setup:
    """SIGTERM arrives while the image builds (a CI job cancelled): handled as Ctrl-C, exit 143."""

    def setup(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
        _fake(monkeypatch, on_build=lambda argv: os.kill(os.getpid(), signal.SIGTERM))

    return setup


def no_such_image() -> Setup:
    """Neither the engine nor the image's registry has it (the registry answers: no such manifest)."""

    class Absent:
        def image(self, repo: object, reference: str, platform: str) -> None:
            return None

    def setup(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
        _fake(monkeypatch)
        monkeypatch.setattr(builder.host.image_inspect, "Distribution", lambda http: Absent())

    return setup


def publish_result(status: str) -> Setup:
    def setup(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
        report = Report([ItemResult("x", Status(status), "r:t", reason="smoke suite failed")], [], 1.0)
        monkeypatch.setattr(builder.publish.run, "publish", lambda *a, **k: report)

    return setup


def network(refuse: bool) -> Setup:
    """Upstream for verify/lock/promote: the recorded PyPI documents (tests/unit/data/upstream), or nothing
    at all answering."""

    def setup(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
        import docker  # before requests.Session is replaced: the SDK's API client subclasses the real one
        import requests
        from http_kit import Net
        from matrix_kit import BASE
        from upstream_kit import Upstream

        assert docker
        net = (
            Net().on(lambda sent: requests.ConnectionError("refused")) if refuse else Upstream.recorded().attach(Net())
        )
        (tmp / "matrix.toml").write_text(BASE)
        monkeypatch.setenv("DOCKER_CONFIG", str(tmp / "docker-config"))
        monkeypatch.setattr("requests.Session", net.session)
        monkeypatch.setattr("builder.net.http.time.sleep", net.waits.append)

    return setup


def _out(tmp: Path) -> str:
    return str(tmp / "out")


CASES = [
    Case("lookup ok", ("lookup", "--gpu", "RTX 4090"), 0),
    Case("lookup nothing valid", ("lookup", "--driver", "550", "--gpu", "RTX 5090"), 1),
    Case("lookup bad flag", ("lookup", "--driver", "five"), 2),
    Case("lookup bad matrix", ("--matrix", "/dev/null/x", "lookup"), 2),
    Case("explain valid", ("explain", "--gpu", "RTX 4090"), 0),
    Case("explain not valid", ("explain", "--driver", "450", "--gpu", "H100"), 1),
    Case("explain bad flag", ("explain", "--arch", "sm_999"), 2),
    Case("matrix show bad name", ("matrix", "show", "cuda", "99.9"), 2),
    Case("matrix check bad file", ("matrix", "check", "/dev/zero"), 2),
    Case("render nothing valid", ("render", "--gpu", "RTX 5090", "--driver", "550", "-o", "@out"), 1),
    Case("render bad repo", ("render", "--repo", "Team/Torch", "-o", "@out"), 2),
    Case("build dry run", ("build", *PIN, "--dry-run", "-o", "@out"), 0),
    Case("build no engine", ("build", *PIN, "-o", "@out"), 3, engine(info_error=EngineError("no Docker engine"))),
    Case("build fails", ("build", *PIN, "-o", "@out"), 4, engine(smoke_failures={"train.cpu": "loss did not fall"})),
    Case(
        "build push refused",
        ("build", *PIN, "--push", "--repo", "127.0.0.1:5000/t/x", "-o", "@out"),
        5,
        engine(fail_push=PushError("push: denied")),
    ),
    Case(
        "build push registry read-only",
        ("build", *PIN, "--push", "--repo", "127.0.0.1:5000/t/x", "-o", "@out"),
        5,
        read_only_registry(),
    ),
    Case("build interrupted", ("build", *PIN, "-o", "@out"), 130, engine(fail_build=Interrupted("interrupted"))),
    Case("build terminated", ("build", *PIN, "-o", "@out"), 143, terminated()),
    Case("smoke bad image", ("smoke", "Upper/Case"), 2),
    Case("smoke no engine", ("smoke", "img:1"), 3, engine(info_error=EngineError("no Docker engine"))),
    Case("inspect missing image", ("inspect", "nope:1"), 2, no_such_image()),
    Case("inspect registry unreachable", ("inspect", "127.0.0.1:1/nope:1"), 5, engine()),
    Case("publish bad jobs", ("publish", "--jobs", "0"), 2),
    Case("publish an image failed", ("publish", "--no-push", "-o", "@out"), 4, publish_result("failed")),
    Case("publish all built", ("publish", "--no-push", "-o", "@out"), 0, publish_result("built")),
    Case("matrix verify bad kind", ("matrix", "verify", "--only", "wheels"), 2),
    Case(
        "matrix verify drift",
        ("--matrix", "@matrix", "matrix", "verify", "--only", "torch,companions"),
        1,
        network(False),
    ),
    Case("matrix verify unreachable", ("--matrix", "@matrix", "matrix", "verify"), 5, network(True)),
    Case("matrix sync has it", ("--matrix", "@matrix", "matrix", "sync", "--torch", "2.5.1"), 2, network(False)),
    Case("matrix sync not on pypi", ("--matrix", "@matrix", "matrix", "sync", "--torch", "2.6.0"), 1, network(False)),
    Case("matrix lock unreachable", ("--matrix", "@matrix", "matrix", "lock"), 5, network(True)),
    Case("promote bad target", ("promote", "a:1", "127.0.0.1:5000/t/b"), 2),
    Case("promote unreachable", ("promote", "127.0.0.1:5000/t/a:1", "127.0.0.1:5000/t/b:1"), 5, network(True)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_exit_code(
    case: Case, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if case.setup is not None:
        case.setup(monkeypatch, tmp_path)
    argv = [
        _out(tmp_path) if a == "@out" else str(tmp_path / "matrix.toml") if a == "@matrix" else a for a in case.argv
    ]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    out, err = capsys.readouterr()
    assert exit_.value.code == case.code, err or out
    assert "Traceback" not in out + err
    if case.code not in (0, 1, 4) or case.argv[0] in ("render",):
        errors = [line for line in err.splitlines() if line.startswith("torchyard: error: ")]
        assert len(errors) == 1, err


def test_the_readme_table_lists_every_code_the_cases_give() -> None:
    text = README.read_text()
    listed = {int(code) for code in re.findall(r"^\| (\d+) \|", text, flags=re.M)}
    # 6: explain/inspect, tests/unit/test_one_chooser; 7: matrix outdated, tests/unit/test_outdated
    assert {c.code for c in CASES} | {70, CANNOT_TELL_EXIT, OUTDATED} == listed


def test_an_interrupted_publish_writes_its_report_and_exits_130(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = Report([ItemResult("x", Status.FAILED, reason="interrupted before it finished")], [], 1.0)

    def stopped(*args: object, **kwargs: object) -> Report:
        raise PublishInterrupted("interrupted: run the same publish again to finish", report)

    monkeypatch.setattr(builder.publish.run, "publish", stopped)
    path = tmp_path / "report.json"
    with pytest.raises(SystemExit) as exit_:
        main(["publish", "--no-push", "-o", _out(tmp_path), "--report", str(path)])
    _, err = capsys.readouterr()
    assert exit_.value.code == 130
    assert json.loads(path.read_text())["items"][0]["reason"] == "interrupted before it finished"
    assert err.splitlines()[-1] == "torchyard: error: interrupted: run the same publish again to finish"
