"""`torchyard smoke IMAGE` on the host side: every argument checked before the engine is asked anything
(exit 2, one line), the report files checked before the suite runs, the README's 4 when a check failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_engine import FakeEngine, FakeRegistry, contents_of
from render_kit import plan

import builder.cli.build_cmd
import builder.cli.smoke_cmd
import builder.engine
import builder.pipeline.pipeline
from builder.cli.main import main

IDENT = "torch2.14.1-cu130-py3.11-debian12"
PIN = ("--torch", "2.14.1", "--variant", "cu130", "--python", "3.11", "--os", "debian12", "--no-host-settings")
IMAGE = "127.0.0.1:5000/t/x:2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> FakeEngine:
    """A fake engine holding one image torchyard built (built here through `torchyard build`)."""
    registry = FakeRegistry()
    engine = FakeEngine(contents_of(plan(IDENT)), registry=registry)
    for module in (builder.cli.build_cmd, builder.cli.smoke_cmd, builder.engine):
        monkeypatch.setattr(module, "DockerEngine", lambda: engine)
    monkeypatch.setattr(builder.pipeline.pipeline, "Registry", lambda auth: registry)
    assert _exit(["build", *PIN, "--target", "runtime", "--repo", "127.0.0.1:5000/t/x", "-o", str(tmp_path / "o")]) == 0
    assert engine.inspect(IMAGE) is not None
    capsys.readouterr()
    engine.calls.clear()
    return engine


def _exit(argv: list[str]) -> int | str | None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    return exit_.value.code


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    errors = [line for line in err.splitlines() if line.startswith("torchyard: error: ")]
    assert len(errors) == 1, err
    return errors[0]


def test_a_passing_suite_exits_0_and_writes_both_reports(fake: FakeEngine, tmp_path: Path) -> None:
    code = _exit(["smoke", IMAGE, "--report", str(tmp_path / "r.json"), "--junit", str(tmp_path / "j.xml")])

    assert code == 0
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["failed"] == 0
    assert (tmp_path / "j.xml").read_text().startswith("<testsuite")


def test_a_failed_check_exits_4_the_smoke_code_and_still_writes_the_report(fake: FakeEngine, tmp_path: Path) -> None:
    fake.smoke_failures = {"train.cpu": "loss did not fall"}

    assert _exit(["smoke", IMAGE, "--report", str(tmp_path / "r.json")]) == 4
    checks = json.loads((tmp_path / "r.json").read_text())["checks"]
    assert {"name": "train.cpu", "status": "failed", "message": "loss did not fall"} in checks


def test_a_report_in_a_new_folder_makes_the_folder(fake: FakeEngine, tmp_path: Path) -> None:
    assert _exit(["smoke", IMAGE, "--report", str(tmp_path / "new" / "deeper" / "r.json")]) == 0
    assert json.loads((tmp_path / "new" / "deeper" / "r.json").read_text())["schema"] == 1


def test_json_prints_the_report_as_one_object(fake: FakeEngine, capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(["smoke", IMAGE, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == 1 and data["summary"]["failed"] == 0


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--arch", "sm_999x"], "--arch: 'sm_999x' is not a GPU architecture"),
        (["--report", "/dev/null/r.json"], "--report /dev/null/r.json: Not a directory"),
        (["--report", "@dir"], "a directory, not a file to write a report to"),
        (["--junit", "/dev/null/j.xml"], "--junit /dev/null/j.xml: Not a directory"),
        (["--expect", "@missing"], "cannot read: No such file or directory"),
        (["--expect", "@dir"], "a directory, not a file"),
        (["--expect", "@notjson"], ":2:1: not JSON"),
        (["--expect", "@list"], "not a torchyard manifest: a manifest is a JSON object"),
        (["--expect-value", "gpu=9"], "--expect-value 'gpu=9': expected KEY=VERSION"),
        (["--gpus", "two"], "--gpus: 'two' is not all, none or a positive number"),
    ],
)
def test_bad_arguments_are_refused_before_the_suite_runs(
    fake: FakeEngine, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    (tmp_path / "notjson").write_text("{\n]")
    (tmp_path / "list").write_text("[1]")
    files = {"@dir": tmp_path, "@missing": tmp_path / "missing.json", "@notjson": tmp_path / "notjson"}
    files["@list"] = tmp_path / "list"
    argv = [str(files[a]) if a in files else a for a in argv]

    assert _exit(["smoke", IMAGE, *argv]) == 2
    assert says in _one_error(capsys)
    assert not fake.of("run"), "the suite never started"


def test_an_arch_is_passed_on_in_its_canonical_name(fake: FakeEngine) -> None:
    assert _exit(["smoke", IMAGE, "--arch", "8.9"]) == 0
    (run,) = fake.of("run")
    assert "sm_89" in run.args
