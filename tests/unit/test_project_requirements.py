"""Several requirements files (docs/project.md, "[dependencies]"): torchyard.toml's `requirements = [...]` is read
as one `pip install -r A -r B`: each file as pip reads it, in order, its -r/-c includes relative to that file and
inside its own folder, one set of index options for the install, local sources numbered across the files; a lockfile
among them is refused in one located line."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_kit import DRY, NEW, cli, project_folder
from render_kit import no_host_network

from builder.core.errors import UsageError
from builder.render.requirements import read_requirements, read_requirements_set, with_file_indexes

PROJECT = '[project]\nname = "my-model"\n\n'


def files(root: Path, contents: dict[str, str]) -> tuple[str, ...]:
    for name, text in contents.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return tuple(str(root / name) for name in contents)


def test_each_file_is_read_as_pip_reads_it_its_includes_relative_to_it(tmp_path: Path) -> None:
    paths = files(tmp_path, {
        "requirements.txt": "numpy >= 1.20  # a comment\n-c constraints.txt\n",
        "constraints.txt": "numpy < 3\n",
        "dev/extra.txt": "-r base.txt\nrich ; python_version >= '3.8'\n",
        "dev/base.txt": "einops==0.8.1\n",
    })  # fmt: skip
    reqs = read_requirements_set((paths[0], paths[2]), {})
    assert [(Path(e.where).name, e.line) for e in reqs.entries] == [
        ("requirements.txt:1", "numpy>=1.20"),
        ("base.txt:1", "einops==0.8.1"),
        ("extra.txt:2", 'rich; python_version >= "3.8"'),
    ]
    assert [e.line for e in reqs.constraints] == ["numpy<3"]
    assert reqs.path == "requirements.txt, extra.txt"  # the note in the image's file: names, not this checkout
    assert reqs.entries[1].where == str(tmp_path / "dev" / "base.txt") + ":1"


def test_one_file_is_read_as_requirements_reads_it(tmp_path: Path) -> None:
    (path,) = files(tmp_path, {"requirements.txt": "numpy\n"})
    assert read_requirements_set((path,), {}) == read_requirements(path, {})


def test_an_include_outside_its_own_files_folder_is_refused(tmp_path: Path) -> None:
    paths = files(tmp_path, {"requirements.txt": "numpy\n", "dev/extra.txt": "-r ../requirements.txt\n"})
    with pytest.raises(UsageError, match=r"extra.txt:1: ../requirements.txt: outside .*dev, the requirements file"):
        read_requirements_set(paths, {})


def test_local_sources_are_numbered_across_the_files(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name / "proj").mkdir(parents=True)
        (tmp_path / name / "proj" / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "0.1"\n')
    paths = files(tmp_path, {"a/requirements.txt": "./proj\n", "b/requirements.txt": "./proj\n"})
    reqs = read_requirements_set(paths, {})
    assert [e.source.context for e in reqs.entries if e.source] == ["req/01-proj", "req/02-proj"]


def test_the_files_index_options_are_the_one_installs(tmp_path: Path) -> None:
    paths = files(tmp_path, {
        "requirements.txt": "--index-url https://pypi.corp.example/simple\nnumpy\n",
        "dev/extra.txt": "--extra-index-url https://extra.example/simple\nrich\n",
    })  # fmt: skip
    network = with_file_indexes(no_host_network(), read_requirements_set(paths, {}), None)
    assert network.pip_conf() == (
        "[global]\nindex-url = https://pypi.corp.example/simple\nextra-index-url = https://extra.example/simple\n"
    )
    (tmp_path / "dev" / "extra.txt").write_text("--index-url https://other.example/simple\nrich\n")
    with pytest.raises(UsageError, match=r"extra.txt:1: a second --index-url .*requirements.txt:1 gave .*keep one"):
        read_requirements_set(paths, {})


def test_a_lock_beside_other_files_is_refused(tmp_path: Path) -> None:
    paths = files(tmp_path, {"requirements.txt": "numpy\n", "uv.lock": "version = 1\n"})
    with pytest.raises(UsageError, match=r"uv.lock: a lockfile is installed alone, not beside other requirements"):
        read_requirements_set(paths, {})


# --- in a project -----------------------------------------------------------------------------------------


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return project_folder(tmp_path, monkeypatch)


def test_a_project_with_several_files_installs_them_all_in_its_image(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files(folder, {"requirements.txt": "numpy >= 1.20\n", "dev/extra.txt": "-r base.txt\nrich\n",
                   "dev/base.txt": "einops==0.8.1\n"})  # fmt: skip
    deps = '[dependencies]\nrequirements = ["requirements.txt", "dev/extra.txt"]\n'
    (folder / "torchyard.toml").write_text(f'{PROJECT}[torch]\nid = "{NEW}"\n\n{deps}')
    code, _, err = cli(capsys, "render", "-o", "out")
    assert code == 0, err
    written = (folder / "out" / "project" / "requirements.txt").read_text().splitlines()
    assert written[0].startswith("# --requirements requirements.txt, extra.txt, as torchyard read it")
    assert written[1:] == ["numpy>=1.20", "einops==0.8.1", "rich"]
    assert "-r /opt/torchyard/requirements.txt" in (folder / "out" / "project" / "Dockerfile").read_text()
    assert "numpy" not in (folder / "out" / "Dockerfile").read_text()  # the base stays the verified image


def test_a_bad_line_in_the_second_file_is_one_line_with_its_file_and_line(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files(folder, {"requirements.txt": "numpy\n", "dev/extra.txt": "rich\n-e ./src\n"})
    deps = '[dependencies]\nrequirements = ["requirements.txt", "dev/extra.txt"]\n'
    (folder / "torchyard.toml").write_text(f'{PROJECT}[torch]\nid = "{NEW}"\n\n{deps}')
    code, out, err = cli(capsys, *DRY)
    assert (code, out) == (2, "")
    assert err.startswith(f"torchyard: error: --requirements {folder / 'dev' / 'extra.txt'}:2: -e ./src: an editable")
    assert len(err.splitlines()) == 1


def test_the_lock_holds_each_files_sha256_and_a_change_to_the_second_is_noticed(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files(folder, {"requirements.txt": "numpy\n", "dev/extra.txt": "rich\n"})
    deps = '[dependencies]\nrequirements = ["requirements.txt", "dev/extra.txt"]\n'
    (folder / "torchyard.toml").write_text(f'{PROJECT}[torch]\nid = "{NEW}"\n\n{deps}')
    assert cli(capsys, "render", "-o", "out")[0] == 0
    lock = (folder / "torchyard.lock").read_text()
    assert '"requirements.txt"' in lock and '"dev/extra.txt"' in lock
    (folder / "dev" / "extra.txt").write_text("rich\nscipy\n")
    code, _, err = cli(capsys, *DRY)
    assert code == 2 and "torchyard.lock no longer fits torchyard.toml: dev/extra.txt changed" in err, err
