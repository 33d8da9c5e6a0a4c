"""A project through the commands, on every recorded machine (host_kit.stand_ins): `torchyard init` writes the
combination doctor recommends there and its torchyard.lock; with the lock in place `build --dry-run` plans the
same combination, Dockerfile and tags on every machine without reading it (the lock, not the host, decides); a
pin or a flag that contradicts the choice, or a path out of the project, is one line and exit 2; doctor and run
read the project too; the project's requirements go on as --requirements would. (The lock itself:
test_project_lock.py.)"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from host_kit import DOCKER_WITH_TOOLKIT, stand_ins
from project_kit import DRY, HOSTS, NEW, OLD, M, cli, docker, on, project_folder

from builder.host.doctor import diagnose
from builder.host.probe import probe
from builder.project.config import TABLES, load_project
from builder.project.lockfile import read_project_lock
from builder.resolve.query import RawQuery


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return project_folder(tmp_path, monkeypatch)


def doctor_build(name: str) -> tuple[str, list[str]]:
    """doctor's recommendation on machine `name`: its combination and its `torchyard build` flags."""
    d = diagnose(M, probe(M, stand_ins()[name]), None, RawQuery(), "torchyard")
    assert d.recommended is not None, name
    return d.recommended.result.combo.id, shlex.split(d.recommended.build)[2:]


# -- init, and the lock deciding on every machine ----------------------------------------------------------------


@pytest.mark.parametrize("name", HOSTS)
def test_init_writes_doctor_s_build_and_every_machine_builds_that_one(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    combo, flags = doctor_build(name)
    host = on(monkeypatch, name)
    code, out, err = cli(capsys, "init")
    assert (code, err) == (0, "")
    assert out.splitlines()[1].startswith(f"chose {combo}: doctor's best image here")
    assert out.splitlines()[-1] == f"wrote {folder / 'torchyard.toml'} and torchyard.lock; build it: torchyard build"
    config = load_project(folder / "torchyard.toml")
    lock = read_project_lock(folder / "torchyard.lock")
    assert (config.name, config.torch.id, config.torch.archs) == ("my-model", combo, ())
    assert lock is not None and (lock.combination, lock.resolved_for) == (combo, probe(M, host).describe())
    written = (folder / "torchyard.lock").read_bytes()
    code, doctors, _ = cli(capsys, *DRY, "--no-project", "--any-host", *flags)  # doctor's line, as printed
    assert code == 0 and doctors.startswith(f"chose {combo} ")
    for other in HOSTS:
        system = on(monkeypatch, other)
        code, planned, err = cli(capsys, *DRY)
        assert (code, planned[: len(doctors)]) == (0, doctors), other  # the same combination, Dockerfile, tags
        assert planned[len(doctors) :].startswith("\n[project] my-model over torchyard:"), other  # then its image
        assert err == f"torchyard: project torchyard.toml: torchyard.lock decides: {combo} (resolved for " \
            f"{lock.resolved_for})\n"  # fmt: skip
        assert system.ran == [], other  # the machine was not read for the choice
    assert (folder / "torchyard.lock").read_bytes() == written


def test_init_refuses_to_replace_a_project_unless_forced(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on(monkeypatch, "rtx4090-535")
    assert cli(capsys, "init")[0] == 0
    code, out, err = cli(capsys, "init")
    assert (code, out) == (2, "")
    assert (
        err == f"torchyard: error: {folder}: torchyard.toml and torchyard.lock already there; --force replaces them\n"
    )
    on(monkeypatch, "2xh100-580")
    code, out, _ = cli(capsys, "init", "--force")
    assert code == 0 and load_project(folder / "torchyard.toml").torch.id == NEW


def test_init_elsewhere_prints_the_build_line_that_finds_it(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on(monkeypatch, "rtx4090-535")
    other = folder / "with space"
    other.mkdir()
    code, out, _ = cli(capsys, "init", "--project", str(other), "--python", "3.12")
    assert code == 0
    assert out.splitlines()[-1] == f"wrote {other / 'torchyard.toml'} and torchyard.lock; build it: " \
        f"torchyard build --project '{other}'"  # fmt: skip
    assert load_project(other / "torchyard.toml").torch.id == "torch2.14.1-cu126-py3.12-ubuntu24.04"
    assert cli(capsys, "init", "--project", str(folder / "nowhere"))[2] == (
        f"torchyard: error: --project {folder / 'nowhere'}: not a folder\n"
    )


# -- contradictions and hostile paths through the CLI ------------------------------------------------------------


def test_a_torch_pin_that_contradicts_the_combination_is_exit_2(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on(monkeypatch, "rtx4090-535")
    (folder / "torchyard.toml").write_text(f'[torch]\nid = "{NEW}"\n\nversion = "2.14"\n')
    for argv in (DRY, ("render", "-o", "out"), ("doctor",), ("run", "--dry-run")):
        assert cli(capsys, *argv) == (2, "", f"torchyard: error: torchyard.toml:4: torch.version: '2.14' excludes "
                                             f"2.15.0: it contradicts torch.id {NEW}\n"), argv  # fmt: skip


@pytest.mark.parametrize(
    ("flag", "value"), [("--torch", "2.14"), ("--python", "3.12"), ("--variant", "cu130"), ("--os", "debian12"),
                        ("--platform", "linux/arm64"), ("--cuda", "12.6")]
)  # fmt: skip
def test_a_flag_that_contradicts_the_project_is_exit_2(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    on(monkeypatch, "rtx4090-535")
    (folder / "torchyard.toml").write_text(f'[torch]\nid = "{NEW}"\n')
    refused = f"torchyard: error: {flag} {value}: the project chooses {NEW} here (torch in torchyard.toml); " \
        "change torchyard.toml (then torchyard build --re-resolve), or give --no-project"  # fmt: skip
    for argv in (DRY, ("doctor",), ("run", "--dry-run")):
        if argv == DRY or flag in ("--torch", "--python", "--os"):  # doctor and run take these three
            code, out, err = cli(capsys, *argv, flag, value)
            assert (code, out, err.splitlines()[-1]) == (2, "", refused), argv
    assert cli(capsys, *DRY, "--python", "3.13")[0] == 0  # a flag that agrees is fine


@pytest.mark.parametrize(
    "text",
    ['[dependencies]\nrequirements = ["../secret.txt"]\n', '[dependencies]\nlock = "link-out.txt"\n',
     '[image]\ncopy = [{ from = "linked", to = "/app" }]\n', '[dependencies]\nrequirements = ["/etc/hostname"]\n'],
)  # fmt: skip
def test_a_path_out_of_the_project_is_exit_2_before_anything_is_chosen(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    (folder.parent / "secret.txt").write_text("token\n")
    (folder / "link-out.txt").symlink_to(folder.parent / "secret.txt")
    (folder / "linked").symlink_to(folder.parent)
    (folder / "torchyard.toml").write_text(text)
    system = on(monkeypatch, "rtx4090-535")
    code, out, err = cli(capsys, *DRY)
    assert (code, out, len(err.splitlines())) == (2, "", 1)
    assert err.startswith("torchyard: error: torchyard.toml:2: ") and "Traceback" not in err
    assert system.ran == [] and not (folder / "torchyard.lock").exists()


# -- doctor and run read the project -----------------------------------------------------------------------------


def test_doctor_recommends_the_locked_combination(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docker(monkeypatch, DOCKER_WITH_TOOLKIT)
    on(monkeypatch, "rtx4090-535")
    assert cli(capsys, "init")[0] == 0
    on(monkeypatch, "2xh100-580")  # alone, doctor would recommend NEW here
    code, out, err = cli(capsys, "doctor", "--json")
    assert code == 0, err
    assert json.loads(out)["recommended"]["id"] == OLD
    assert err.startswith(f"torchyard: project torchyard.toml: torchyard.lock decides: {OLD} ")
    code, out, _ = cli(capsys, "doctor", "--json", "--no-project")
    assert code == 0 and json.loads(out)["recommended"]["id"] == NEW


def test_run_starts_the_locked_combination(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docker(monkeypatch, DOCKER_WITH_TOOLKIT)
    on(monkeypatch, "rtx4090-535")
    assert cli(capsys, "init")[0] == 0
    on(monkeypatch, "2xh100-580")
    code, out, err = cli(capsys, "run", "--dry-run")
    assert code == 0 and err.startswith(f"torchyard: project torchyard.toml: torchyard.lock decides: {OLD} ")
    assert f"torchyard: the image of project my-model ({OLD}) is not built yet" in err  # its own: test_project_run.py
    code, out, _ = cli(capsys, "run", "--dry-run", "--no-project")
    assert code == 0 and " torchyard:2.15.0-cuda13.2-cudnn9-py3.13-debian13-runtime " in out


def test_a_locked_image_this_machine_cannot_run_is_said_not_replaced(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docker(monkeypatch, DOCKER_WITH_TOOLKIT)
    on(monkeypatch, "rtx4090-535")
    assert cli(capsys, "init")[0] == 0
    on(monkeypatch, "gb10-580-arm64")  # an arm64 machine: the locked linux/amd64 image cannot run here
    code, out, _ = cli(capsys, "doctor")
    assert code == 0 and "no image runs on this machine" in out
    assert "platform: NVIDIA GB10 sits in a Grace (Arm, SBSA) system: it needs linux/arm64 images" in out
    code, out, err = cli(capsys, "run", "--dry-run")
    assert (code, out) == (1, "")
    assert err.splitlines()[-1].startswith("torchyard: error: no image runs on this machine: NVIDIA GB10 sits in")


# -- the project's requirements, as --requirements passes them ----------------------------------------------------


def test_the_requirements_file_goes_in_the_project_image_and_the_base_stays_plain(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "requirements.txt").write_text("numpy\n")
    (folder / "torchyard.toml").write_text(
        f'[torch]\nid = "{NEW}"\n\n[dependencies]\nrequirements = ["requirements.txt"]\n'
    )
    code, planned, _ = cli(capsys, *DRY)
    flags = ("--torch", "2.15.0", "--variant", "cu132", "--python", "3.13", "--os", "debian13", "--any-host")
    plain = cli(capsys, *DRY, "--no-project", *flags)[1]
    assert (code, planned[: len(plain)]) == (0, plain)  # the base: the verified image a build outside makes
    code, _, _ = cli(capsys, "render", "-o", "out")
    assert code == 0 and "-r /opt/torchyard/requirements.txt" in (folder / "out" / "project" / "Dockerfile").read_text()
    assert (folder / "out" / "project" / "requirements.txt").read_text().endswith("numpy\n")
    assert cli(capsys, *DRY, "--requirements", "requirements.txt")[2] == "torchyard: error: --requirements: the " \
        "project names its requirement files (torchyard.toml: dependencies.requirements); add it there\n"  # fmt: skip


@pytest.mark.parametrize(
    ("deps", "message"),
    [('requirements = ["requirements.txt", "uv.lock"]', "dependencies.requirements: 'uv.lock' is a lockfile: it is "
      "installed alone; name it in dependencies.lock instead"),
     ('lock = "reqs.lock"', "dependencies.lock: 'reqs.lock': torchyard reads uv.lock, pylock.toml or "
      "pylock.NAME.toml (PEP 751)")],
)  # fmt: skip
def test_what_the_build_cannot_install_yet_is_one_located_line(
    folder: Path, capsys: pytest.CaptureFixture[str], deps: str, message: str
) -> None:
    for name in ("requirements.txt", "uv.lock", "reqs.lock"):
        (folder / name).write_text("numpy\n")
    (folder / "torchyard.toml").write_text(f"[dependencies]\n{deps}\n")
    assert cli(capsys, *DRY) == (2, "", f"torchyard: error: torchyard.toml:2: {message}\n")


def test_a_dry_run_shows_the_project_image_its_checks_and_its_tag(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "src").mkdir()
    (folder / "torchyard.toml").write_text(
        f'[torch]\nid = "{NEW}"\n\n[dependencies]\nsystem_packages = ["libgl1"]\n\n'
        '[image]\ncopy = [{ from = "src", to = "/app/src" }]\ncommand = ["python", "-m", "app"]\n'
    )
    code, out, _ = cli(capsys, *DRY)
    base = "torchyard:2.15.0-cuda13.2-cudnn9-py3.13-debian13-runtime"
    project = out[out.index("\n[project]") + 1 :].splitlines()
    assert code == 0 and project[0].startswith(f"[project] my-model over {base} (content id ")
    assert f"--target project -f build/torchyard/{NEW}/project/Dockerfile" in project[1]
    assert f"--build-arg TORCHYARD_BASE={base}" in project[1]
    assert project[2:4] == ["  then: the project's checks: import app, python -m app --help, then tag:",
                            f"    torchyard/my-model:{base.partition(':')[2]}-p{project[0][-16:-4]}"]  # fmt: skip


def test_every_key_the_starter_shows_commented_is_a_key_of_its_table(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on(monkeypatch, "2xh100-580")
    assert cli(capsys, "init")[0] == 0
    table, shown = "", []
    for line in (folder / "torchyard.toml").read_text().splitlines():
        if line.startswith("["):
            table = line.strip("[]")
        elif (key := re.match(r"# (\w+) = ", line)) is not None:
            shown.append(f"{table}.{key[1]}")
            assert key[1] in TABLES[table], line
    assert len(shown) == 14
