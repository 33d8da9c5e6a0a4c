"""torchyard.lock and the files a project's requirements files include (docs/project.md, "torchyard.lock"): each
-r/-c include is hashed after the file that names it, a change to one is refused naming it and the file that
includes it, one no longer read is said; the walk finds includes where the build's reader does and passes over
what that reader refuses (it says why, with its file:line)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from project_kit import DRY, NEW, cli, project_folder
from test_project_requirements import PROJECT, files

from builder.project.includes import included_files

TREE = {
    "requirements.txt": "numpy >= 1.20  # a comment\n-c constraints.txt\n",
    "constraints.txt": "numpy < 3\n",
    "dev/extra.txt": "-r base.txt\nrich\n",
    "dev/base.txt": "einops==0.8.1\n",
}
DEPS = '[dependencies]\nrequirements = ["requirements.txt", "dev/extra.txt"]\n'
REFUSED = "torchyard: error: torchyard.lock no longer fits torchyard.toml: {} (torchyard build --re-resolve " \
    "resolves it again)\n"  # fmt: skip


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    """A project with two requirements files and their includes, locked by render."""
    here = project_folder(tmp_path, monkeypatch)
    files(here, TREE)
    (here / "torchyard.toml").write_text(f'{PROJECT}[torch]\nid = "{NEW}"\n\n{DEPS}')
    code, _, err = cli(capsys, "render", "-o", "out")
    assert code == 0, err
    return here


def locked_files(folder: Path) -> list[str]:
    return re.findall(r'\[\[file\]\]\npath = "([^"]+)"', (folder / "torchyard.lock").read_text())


def test_the_lock_hashes_each_include_after_the_file_that_names_it(folder: Path) -> None:
    assert locked_files(folder) == ["requirements.txt", "dev/extra.txt", "constraints.txt", "dev/base.txt"]


def test_a_changed_include_is_refused_naming_it_and_what_includes_it(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "dev" / "base.txt").write_text("einops==0.8.2\n")
    for argv in (DRY, ("doctor",), ("run", "--dry-run")):
        code, out, err = cli(capsys, *argv)
        assert (code, out) == (2, ""), argv
        head, tail = REFUSED.split("{}")
        assert err.startswith(head) and err.endswith(tail), err
        changed = err.removeprefix(head).removesuffix(tail)
        assert re.fullmatch(r"dev/base.txt \(included by dev/extra.txt\) changed \(sha256 [0-9a-f]{12}\.\.\. -> "
                            r"[0-9a-f]{12}\.\.\.\)", changed), err  # fmt: skip
    assert cli(capsys, "render", "--re-resolve", "-o", "again")[0] == 0  # rewrites the lock (a dry run would not)
    assert cli(capsys, *DRY)[0] == 0


def test_an_include_no_longer_read_is_said(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / "constraints.txt").unlink()
    code, _, err = cli(capsys, *DRY)
    assert (code, err) == (2, REFUSED.format("constraints.txt is no longer read (included when the lock was written)"))


def test_a_lock_written_before_includes_were_hashed_still_fits(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = folder / "torchyard.lock"
    text = lock.read_text()
    lock.write_text(re.sub(r'\n\[\[file\]\]\npath = "(constraints|dev/base)\.txt"\nsha256 = "[0-9a-f]+"\n', "\n", text))
    assert locked_files(folder) == ["requirements.txt", "dev/extra.txt"]
    code, _, err = cli(capsys, *DRY)
    assert code == 0, err


# --- the walk -------------------------------------------------------------------------------------------------


def test_every_spelling_of_an_include_is_found_each_file_once(tmp_path: Path) -> None:
    files(tmp_path, {
        "requirements.txt": "-rone.txt\n--requirement=two.txt\n--constraint \\\n  three.txt\n-c one.txt\n"
                            "# -r commented.txt\nnumpy --hash=sha256:" + "0" * 64 + "\n",
        "one.txt": "-r requirements.txt\n",  # a cycle: the build's reader refuses it; the walk stops
        "two.txt": "",
        "three.txt": "",
        "commented.txt": "",
    })  # fmt: skip
    assert included_files(tmp_path, "requirements.txt") == [
        ("one.txt", "requirements.txt"),
        ("two.txt", "requirements.txt"),
        ("three.txt", "requirements.txt"),
    ]


def test_what_the_builds_reader_refuses_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("numpy\n")
    files(tmp_path, {
        "dev/extra.txt": "-r ../outside.txt\n-r https://example.com/r.txt\n-r missing.txt\n-r 'unclosed\n"
                         "-r link.txt\n-r sub/inner.txt\n",
        "dev/sub/inner.txt": "-r ../../outside.txt\n",
    })  # fmt: skip
    (tmp_path / "dev" / "link.txt").symlink_to(tmp_path / "outside.txt")
    assert included_files(tmp_path, "dev/extra.txt") == [("dev/sub/inner.txt", "dev/extra.txt")]
