"""examples/project (docs/project.md, "An example"): a small real project pinned to the docker tier's shared e2e
combination, so `torchyard build` in it plans the very base image the README's main job (`torchyard build --arch
sm_89`) builds (same content hash, same tags), then the project's image over it; its shipped lock fits its file;
`torchyard render` in it writes a hadolint-clean project Dockerfile. (Built for real: the docker tier's
tests/integration/test_project_example.py.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from project_kit import cli
from test_readme_job import e2e_id
from test_render_matrix import HADOLINT_CONFIG, _lint

from builder.core import env
from builder.project.config import load_project
from builder.project.image import import_names

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "project"
DRY = ("build", "--dry-run", "--no-host-settings")


@pytest.fixture
def copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example, copied (render writes beside torchyard.toml), as the current folder."""
    folder = tmp_path / "project"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("build", "__pycache__"))
    monkeypatch.chdir(folder)
    monkeypatch.delenv(env.ANY_HOST, raising=False)
    return folder


def planned(out: str) -> list[str]:
    """A dry run's base image: its combination, content hash and tags."""
    keep = ("chose ", "content hash: ", "    torchyard:")
    return [line.split(" (the best")[0] for line in out.splitlines() if line.startswith(keep)]


def test_the_example_pins_the_e2e_combination_and_builds_the_main_job_s_base_then_its_own_image(
    copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert load_project(copy / "torchyard.toml").torch.id == e2e_id()
    code, out, err = cli(capsys, *DRY)
    assert code == 0, err
    assert err.splitlines()[0] == (
        f"torchyard: project torchyard.toml: torchyard.lock decides: {e2e_id()} (resolved for any machine (torch.id "
        "names it))"
    )
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    monkeypatch.chdir(empty)
    code, main_job, err = cli(capsys, *DRY, "--any-host", "--arch", "sm_89")  # the README's main job
    assert code == 0, err
    assert planned(out) == planned(main_job) and len(planned(out)) == 5  # chose, content hash, three tags
    assert f"chose {e2e_id()}" in planned(out)
    base = "torchyard:2.15.0-cuda13.2-cudnn9-py3.13-debian13-runtime-sm89"
    assert f"\n[project] tinyproj over {base} (content id " in out
    assert "  then: the project's checks: import tinyproj, python -m tinyproj --help, then tag:" in out
    assert f"\n    torchyard/tinyproj:{base.partition(':')[2]}-p" in out


def test_render_in_the_example_keeps_its_lock_and_writes_a_hadolint_clean_project_dockerfile(
    copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = (copy / "torchyard.lock").read_bytes()
    code, _, err = cli(capsys, "render", "--no-host-settings", "-o", "out")
    assert code == 0, err
    assert (copy / "torchyard.lock").read_bytes() == lock  # the shipped lock fits the file: nothing rewritten
    dockerfile = copy / "out" / "project" / "Dockerfile"
    text = dockerfile.read_text()
    assert "--require-hashes" in text and "COPY code/0/ /app/src\n" in text
    assert 'CMD ["python", "-m", "tinyproj"]\n' in text
    assert "tabulate==0.10.0 --hash=sha256:" in (copy / "out" / "project" / "requirements.txt").read_text()
    assert _lint([dockerfile], HADOLINT_CONFIG, tmp_path) == []


def test_the_import_check_imports_the_package_the_command_runs() -> None:
    config = load_project(EXAMPLE / "torchyard.toml")
    assert import_names(config) == (("tinyproj",), "image.command")
    assert (EXAMPLE / "src" / "tinyproj" / "__main__.py").is_file()
    for path in EXAMPLE.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")  # the example's code at least parses
