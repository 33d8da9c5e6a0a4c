"""torchyard.toml (builder/project): every key parsed into its frozen type; a wrong key, a bad value, a pin that
contradicts the exact combination, or a path out of the project is one `file:line: key: message` line (exit 2
through the CLI); the file is found from the current folder upward (stopping at a repository's root), or named
by --project."""

from __future__ import annotations

from pathlib import Path

import pytest
from matrix_kit import real

from builder.cli.main import main
from builder.core.errors import ProjectError, UsageError
from builder.core.kinds import Flavor
from builder.project.check import check_project, wish_of
from builder.project.config import Copy, ProjectConfig, load_project
from builder.project.find import find_project, given_project
from builder.resolve.query import RawQuery

M = real()
EXACT = "torch2.15.0-cu132-py3.13-debian13"
EVERY_KEY = """\
[project]
name = "my-model"

[torch]
version = ">=2.14"
variant = "cu132"
python = "3.13"
os = "debian13"
platform = "linux/amd64"
flavor = "devel"
archs = ["sm_90", "8.9"]

[dependencies]
requirements = ["requirements.txt", "extra/more.txt"]
pip = ["einops==0.8.1"]
system_packages = ["libgl1", "ffmpeg=7:7.1.1-1"]

[image]
copy = [{ from = "src", to = "/app/src" }, { from = "configs/base.yaml", to = "/app/configs/base.yaml" }]
workdir = "/app/"
command = ["python", "-m", "my_model"]
env = { PYTHONUNBUFFERED = "1", EMPTY = "" }
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with the files EVERY_KEY names, as the current folder."""
    (tmp_path / "src").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "base.yaml").write_text("lr: 1\n")
    (tmp_path / "extra").mkdir()
    (tmp_path / "requirements.txt").write_text("numpy\n")
    (tmp_path / "extra" / "more.txt").write_text("pandas\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def load(folder: Path, text: str) -> ProjectConfig:
    (folder / "torchyard.toml").write_text(text)
    config = load_project(folder / "torchyard.toml")
    check_project(M, config)
    return config


def refused(folder: Path, text: str) -> str:
    with pytest.raises(ProjectError) as exc:
        load(folder, text)
    return str(exc.value)


def test_every_key_is_read_into_its_type(project: Path) -> None:
    c = load(project, EVERY_KEY)
    assert (c.name, c.root) == ("my-model", project)
    t = c.torch
    assert (t.id, t.version, t.variant, t.python, t.os, t.platform) == (
        None, ">=2.14", "cu132", "3.13", "debian13", "linux/amd64"
    )  # fmt: skip
    assert (t.flavor, t.archs) == (Flavor.DEVEL, ("sm_90", "sm_89"))
    d = c.dependencies
    assert d.requirements == ("requirements.txt", "extra/more.txt")
    assert (d.lock, d.pip, d.system_packages) == (None, ("einops==0.8.1",), ("libgl1", "ffmpeg=7:7.1.1-1"))
    assert c.image.copy == (Copy("src", "/app/src"), Copy("configs/base.yaml", "/app/configs/base.yaml"))
    assert (c.image.workdir, c.image.command) == ("/app", ("python", "-m", "my_model"))
    assert c.image.env == (("EMPTY", ""), ("PYTHONUNBUFFERED", "1"))
    assert wish_of(M, c, None) == RawQuery(
        torch=">=2.14", variant="cu132", python="3.13", os="debian13", platform="linux/amd64", archs=("sm_90", "sm_89")
    )


def test_an_empty_file_asks_nothing(project: Path) -> None:
    c = load(project, "")
    assert (c.name, c.torch.flavor, c.torch.archs, c.dependencies.requirements, c.image.command) == (
        None, Flavor.RUNTIME, (), (), ()
    )  # fmt: skip
    assert wish_of(M, c, None) == RawQuery()


def test_an_exact_id_is_the_question_whose_only_answer_it_is(project: Path) -> None:
    c = load(project, f'[torch]\nid = "{EXACT}"\npython = "3.13"\nversion = "2.15"\n')
    combo = check_project(M, c)
    assert combo is not None and combo.id == EXACT
    assert wish_of(M, c, combo) == RawQuery(
        torch="2.15.0", variant="cu132", python="3.13", os="debian13", platform="linux/amd64"
    )


WRONG_KEYS = [
    ("[torchh]\n", "torchyard.toml:1: torchh: unknown key (did you mean 'torch'?); allowed: project, torch, "
     "dependencies, image"),
    ("[torch]\nverison = '2.15'\n", "torchyard.toml:2: torch.verison: unknown key (did you mean 'version'?); "
     "allowed: id, version, variant, python, os, platform, flavor, archs"),
    ("[project]\nname = 'a'\n\n[dependencies]\nrequirement = []\n", "torchyard.toml:5: dependencies.requirement: "
     "unknown key (did you mean 'requirements'?); allowed: requirements, lock, pip, system_packages"),
    ("[image]\ncomand = ['x']\n", "torchyard.toml:2: image.comand: unknown key (did you mean 'command'?); "
     "allowed: copy, workdir, command, env"),
    ("[[image.copy]]\nform = 'src'\nto = '/app'\n", "torchyard.toml:2: image.copy[0].form: unknown key (did you "
     "mean 'from'?); allowed: from, to"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), WRONG_KEYS, ids=[m.split(":")[2] for _, m in WRONG_KEYS])
def test_a_wrong_key_is_located_with_did_you_mean_and_what_is_allowed(project: Path, text: str, message: str) -> None:
    assert refused(project, text) == message


BAD_VALUES = [
    ("[torch]\nflavor = 'fast'\n", "torchyard.toml:2: torch.flavor: 'fast' is not one of runtime, devel, inference"),
    ("[torch]\npython = 3.10\n", "torchyard.toml:2: torch.python: expected a string, found the number 3.1: quote it "
     '("3.10" is not 3.1)'),
    ("[torch]\nversion = '2.5.1+cu124'\n", "torchyard.toml:2: torch.version: '2.5.1+cu124' is torch.__version__ of "
     "one build: version = '2.5.1', variant = 'cu124'"),
    ("[torch]\nversion = 'latest'\n", "torchyard.toml:2: torch.version: 'latest' is not a version or version range "
     "(examples: 2.5, 2.5.1, '>=2.4,<2.7')"),
    ("[torch]\nversion = '2.99'\n", "torchyard.toml:2: torch.version: no torch release in the matrix matches '2.99' "
     "(the newest is 2.15.0)"),
    ("[torch]\nplatform = 'windows'\n", "torchyard.toml:2: torch.platform: 'windows' is not a platform torchyard "
     "builds for: linux/amd64, linux/arm64"),
    ("[torch]\nvariant = 'cu1320'\n", "torchyard.toml:2: torch.variant: 'cu1320' is not in the matrix (did you mean "
     "'cu132'?); known: "),
    ("[torch]\nos = 'debian14'\n", "torchyard.toml:2: torch.os: 'debian14' is not in the matrix (did you mean "
     "'debian13'?); known: debian13, debian12, ubuntu20.04, ubuntu22.04, ubuntu24.04"),
    ("[torch]\narchs = ['sm_91']\n", "torchyard.toml:2: torch.archs: 'sm_91' is not a GPU architecture in the "
     "matrix (did you mean "),
    ("[torch]\nvariant = 'cpu'\narchs = ['sm_90']\n", "torchyard.toml:3: torch.archs: the cpu variant compiles no "
     "GPU code: leave archs out"),
    ("[torch]\nid = 'torch2.15.0-cu132-py3.13-debian14'\n", "torchyard.toml:2: torch.id: "
     "'torch2.15.0-cu132-py3.13-debian14' is not a combination of the matrix (did you mean "
     f"'{EXACT}'?) (torchyard lookup lists them)"),
    ("[project]\nname = 'My Model'\n", "torchyard.toml:2: project.name: 'My Model': a name is lowercase letters, "
     "digits, '.', '_', '-' (like my-model)"),
    ("[dependencies]\npip = ['numpy>=>2']\n", "torchyard.toml:2: dependencies.pip: 'numpy>=>2' is not a pip "
     "requirement (like 'numpy>=2' or 'einops==0.8.1')"),
    ("[dependencies]\nsystem_packages = ['lib gl']\n", "torchyard.toml:2: dependencies.system_packages: 'lib gl' "
     "is not an OS package name (like libgl1, or ffmpeg=7:7.1.1-1)"),
    ("[dependencies]\nrequirements = ['requirements.txt']\nlock = 'requirements.txt'\n", "torchyard.toml:3: "
     "dependencies.lock: give requirements files or one lockfile, not both"),
    ("[image]\nworkdir = 'app'\n", "torchyard.toml:2: image.workdir: 'app': expected an absolute path in the image "
     "like /app (letters, digits, ._-@%+=:,/)"),
    ("[image]\nworkdir = '/app/../etc'\n", "torchyard.toml:2: image.workdir: '/app/../etc': expected a plain "
     "absolute path (no '..', '.' or '//')"),
    ("[image]\nworkdir = '/'\n", "torchyard.toml:2: image.workdir: '/': give a folder in the image, not its root"),
    ("[image]\ncommand = []\n", "torchyard.toml:2: image.command: expected the command as a non-empty list of "
     'words, like ["python", "-m", "app"]'),
    ("[image]\ncommand = 'python app.py'\n", "torchyard.toml:2: image.command: expected a list of strings, found "
     "'python app.py'"),
    ("[image]\nenv = { 1A = 'x' }\n", "torchyard.toml:2: image.env.1A: a variable name is letters, digits and _"),
    ("[image]\nenv = { A = 1 }\n", "torchyard.toml:2: image.env.A: expected a one-line string, found 1"),
    ('[image]\nenv = { A = "x\\ny" }\n', "torchyard.toml:2: image.env.A: expected a one-line string, found 'x\\ny'"),
    ("[image]\ncopy = [{ from = 'src' }]\n", "torchyard.toml:2: image.copy[0]: missing required key 'to'"),
    ("[image]\ncopy = { from = 'src', to = '/app' }\n", "torchyard.toml:2: image.copy: expected a list of "
     "{from = ..., to = ...} tables, found "),
    ("torch = '2.15'\n", "torchyard.toml:1: torch: expected a table, found str"),
    ("[project]\nname = 'a'\n[torch]\nversion = '2.5'\nvariant = 'cu132'\n", "torchyard.toml:3: torch: no "
     "combination of the matrix has version '2.5', variant 'cu132' together (torchyard lookup --torch 2.5 --variant "
     "cu132 says why)"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), BAD_VALUES, ids=[m.split(":")[2] for _, m in BAD_VALUES])
def test_a_bad_value_is_one_located_line(project: Path, text: str, message: str) -> None:
    assert refused(project, text).startswith(message)


CONTRADICTIONS = [
    ("python = '3.12'", 3, "torch.python: '3.12' excludes 3.13"),
    ("version = '2.14'", 3, "torch.version: '2.14' excludes 2.15.0"),
    ("variant = 'cu130'", 3, "torch.variant: 'cu130' excludes cu132"),
    ("os = 'debian12'", 3, "torch.os: 'debian12' excludes debian13"),
    ("platform = 'linux/arm64'", 3, "torch.platform: 'linux/arm64' excludes linux/amd64"),
]


@pytest.mark.parametrize(("line", "at", "message"), CONTRADICTIONS, ids=[c[0].split()[0] for c in CONTRADICTIONS])
def test_a_pin_that_contradicts_the_exact_combination_is_refused(
    project: Path, line: str, at: int, message: str
) -> None:
    text = f'[torch]\nid = "{EXACT}"\n{line}\n'
    assert refused(project, text) == f"torchyard.toml:{at}: {message}: it contradicts torch.id {EXACT}"


def test_not_toml_is_one_line_naming_the_file(project: Path) -> None:
    assert refused(project, "[torch\n") == "torchyard.toml: not a TOML file: Expected ']' at the end of a table " \
        "declaration (at line 1, column 7)"  # fmt: skip


# -- hostile paths -----------------------------------------------------------------------------------------------


def _outside(project: Path) -> Path:
    secret = project.parent / f"{project.name}-outside"
    secret.mkdir()
    (secret / "secret.txt").write_text("token\n")
    return secret


HOSTILE = [
    ("requirements = ['../x-outside/secret.txt']", "dependencies.requirements", "'../x-outside/secret.txt' climbs "
     "out with '..': give a path inside the project"),
    ("requirements = ['src/../../x']", "dependencies.requirements", "'src/../../x' climbs out with '..'"),
    ("requirements = ['/etc/passwd']", "dependencies.requirements", "'/etc/passwd' is not inside the project"),
    ("requirements = ['~/.netrc']", "dependencies.requirements", "'~/.netrc' is not inside the project"),
    ("lock = 'link-out.txt'", "dependencies.lock", "'link-out.txt' leads out of the project through a symbolic "
     "link (to "),
    ("requirements = ['linked/secret.txt']", "dependencies.requirements", "'linked/secret.txt' leads out of the "
     "project through a symbolic link (to "),
    ("requirements = ['missing.txt']", "dependencies.requirements", "'missing.txt': no such file in "),
    ("requirements = ['src']", "dependencies.requirements", "'src' is not a file"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "key", "message"), HOSTILE, ids=[h[2].split()[0] for h in HOSTILE])
def test_a_path_out_of_the_project_is_refused(project: Path, line: str, key: str, message: str) -> None:
    outside = _outside(project)
    (project / "link-out.txt").symlink_to(outside / "secret.txt")
    (project / "linked").symlink_to(outside)
    got = refused(project, f"[dependencies]\n{line}\n")
    assert got.startswith(f"torchyard.toml:2: {key}: {message}")


@pytest.mark.parametrize("source", ["../x", "/etc", "linked", "linked/secret.txt", "missing"])
def test_a_copied_folder_out_of_the_project_is_refused(project: Path, source: str) -> None:
    outside = _outside(project)
    (project / "linked").symlink_to(outside)
    got = refused(project, f"[image]\ncopy = [{{ from = '{source}', to = '/app' }}]\n")
    assert got.startswith("torchyard.toml:2: image.copy[0].from: ")


def test_a_symbolic_link_that_stays_inside_is_followed(project: Path) -> None:
    (project / "reqs").symlink_to(project / "extra")
    (project / "data").symlink_to(project / "src")
    text = "[dependencies]\nrequirements = ['./reqs/more.txt']\n\n[image]\ncopy = [{from='data', to='/d'}]\n"
    c = load(project, text)
    assert (c.dependencies.requirements, c.image.copy) == (("reqs/more.txt",), (Copy("data", "/d"),))


# -- finding the project -----------------------------------------------------------------------------------------


def test_the_file_is_found_from_the_current_folder_upward(tmp_path: Path) -> None:
    (tmp_path / "torchyard.toml").write_text("")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_project(deep) == tmp_path / "torchyard.toml"
    assert find_project(tmp_path) == tmp_path / "torchyard.toml"


def test_the_search_stops_at_a_repository_root(tmp_path: Path) -> None:
    (tmp_path / "torchyard.toml").write_text("")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    assert find_project(repo / "sub") is None
    (repo / "torchyard.toml").write_text("")
    assert find_project(repo / "sub") == repo / "torchyard.toml"


def test_project_names_a_folder_or_its_file(tmp_path: Path) -> None:
    (tmp_path / "torchyard.toml").write_text("")
    file = tmp_path / "torchyard.toml"
    assert given_project(str(tmp_path)) == given_project(str(file)) == file
    (tmp_path / "empty").mkdir()
    for text, message in [
        (
            str(tmp_path / "empty"),
            f"--project {tmp_path / 'empty'}: no torchyard.toml there (torchyard init writes one)",
        ),
        (str(tmp_path / "nowhere"), f"--project {tmp_path / 'nowhere'}: no such folder"),
        (str(tmp_path / "torchyard.toml") + "x", f"--project {tmp_path / 'torchyard.toml'}x: no such folder"),
        ("  ", "--project: empty; give a project folder (or its torchyard.toml)"),
    ]:
        with pytest.raises(UsageError) as exc:
            given_project(text)
        assert str(exc.value) == message


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    out, err = capsys.readouterr()
    assert isinstance(done.value.code, int)
    return done.value.code, out, err


def test_render_in_a_subfolder_reads_the_project_and_a_bad_file_is_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "torchyard.toml").write_text(f'[torch]\nid = "{EXACT}"\nflavr = "runtime"\n')
    monkeypatch.chdir(project / "src")
    code, out, err = _cli(capsys, "render", "-o", str(project / "out"))
    assert (code, out) == (2, "")
    assert err == (
        f"torchyard: error: {project / 'torchyard.toml'}:3: torch.flavr: unknown key (did you mean "
        "'flavor'?); allowed: id, version, variant, python, os, platform, flavor, archs\n"
    )


def test_project_path_from_elsewhere_and_no_project(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    (project / "torchyard.toml").write_text(f'[torch]\nid = "{EXACT}"\n')
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    monkeypatch.chdir(elsewhere)
    code, out, err = _cli(capsys, "build", "--dry-run", "--project", str(project), "--no-host-settings")
    assert code == 0
    assert out.splitlines()[0] == f"chose {EXACT} (the best of 1 valid combinations)"
    lock = project / "torchyard.lock"
    file = project / "torchyard.toml"
    assert err == f"torchyard: project {file}: would write {lock}: {EXACT} (a dry run writes nothing)\n"
    assert not lock.exists()
    code, out, err = _cli(capsys, "build", "--dry-run", "--project", str(project), "--no-project")
    assert (code, err) == (2, "torchyard: error: --project and --no-project: give one of them\n")
    monkeypatch.chdir(project)
    code, out, err = _cli(capsys, "build", "--dry-run", "--no-project", "--torch", "2.14", "--no-host-settings")
    assert code == 0 and out.startswith("chose torch2.14.1-")
