"""torchyard.lock through the commands: a range is resolved on the machine (a dry run only says what it would
write), then the lock decides on every machine; a lock that no longer fits its file (a [torch] key, the
requirements, a file's content) is refused with what changed by build, render, doctor and run until
--re-resolve; a damaged lock is one located line; a lock or file linked out of the project is neither read nor
written through."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_kit import DRY, NEW, OLD, cli, locked, on, project_folder

from builder.project.lockfile import read_project_lock


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return project_folder(tmp_path, monkeypatch)


def test_a_range_is_resolved_on_the_machine_then_the_lock_decides(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "torchyard.toml").write_text('[torch]\nversion = ">=2.14"\npython = "3.13"\n')
    on(monkeypatch, "2xh100-580")
    code, out, err = cli(capsys, *DRY)  # a dry run says what it would lock, and writes nothing
    assert code == 0 and out.startswith(f"chose {NEW} ")
    assert err.splitlines()[-1] == f"torchyard: project torchyard.toml: would write torchyard.lock: {NEW} (a dry run " \
        "writes nothing)"  # fmt: skip
    assert not (folder / "torchyard.lock").exists()
    on(monkeypatch, "rtx4090-535")
    code, out, err = cli(capsys, "render", "-o", str(folder / "out"))
    assert code == 0, err
    lock = read_project_lock(folder / "torchyard.lock")
    assert lock is not None and lock.combination == OLD
    assert err.splitlines()[-1] == f"torchyard: project torchyard.toml: wrote torchyard.lock: {OLD} (resolved for " \
        f"{lock.resolved_for})"  # fmt: skip
    on(monkeypatch, "2xh100-580")  # the newer machine builds the locked combination, not its own best
    code, out, _ = cli(capsys, *DRY)
    assert code == 0 and out.startswith(f"chose {OLD} ")
    code, out, err = cli(capsys, *DRY, "--re-resolve")  # re-resolved here; a dry run still writes nothing
    assert code == 0 and out.startswith(f"chose {NEW} ") and "would write torchyard.lock" in err
    assert read_project_lock(folder / "torchyard.lock") == lock
    assert cli(capsys, "render", "-o", str(folder / "out"), "--re-resolve")[0] == 0
    assert getattr(read_project_lock(folder / "torchyard.lock"), "combination", None) == NEW


# -- a lock that no longer fits ----------------------------------------------------------------------------------


CHANGES = [
    ('[torch]\nversion = ">=2.14"\n', '[torch]\nversion = ">=2.15"\n', 'torch.version ">=2.14" -> ">=2.15"'),
    ('[torch]\nversion = ">=2.14"\n', '[torch]\nversion = ">=2.14"\nflavor = "devel"\n',
     'torch.flavor "runtime" -> "devel"'),
    ('[torch]\nversion = ">=2.14"\n', '[torch]\nversion = ">=2.14"\narchs = ["sm_89"]\n',
     'torch.archs [] -> ["sm_89"]'),
    ("", '[dependencies]\npip = ["einops"]\n', 'dependencies.pip [] -> ["einops"]'),
    ("", '[dependencies]\nrequirements = ["requirements.txt"]\n',
     'dependencies.requirements [] -> ["requirements.txt"]'),
    ("", f'[torch]\nid = "{NEW}"\n', f'torch.id (not set) -> "{NEW}"'),
]  # fmt: skip


@pytest.mark.parametrize(("before", "after", "changed"), CHANGES, ids=[c[2].split()[0] for c in CHANGES])
def test_a_lock_that_no_longer_fits_is_refused_with_what_changed(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], before: str, after: str,
    changed: str
) -> None:  # fmt: skip
    (folder / "requirements.txt").write_text("numpy\n")
    locked(folder, monkeypatch, before)
    (folder / "torchyard.toml").write_text(after)
    for argv in (DRY, ("render", "-o", "out"), ("doctor",), ("run", "--dry-run")):
        code, out, err = cli(capsys, *argv)
        assert (code, out) == (2, ""), argv
        assert err == f"torchyard: error: torchyard.lock no longer fits torchyard.toml: {changed} (torchyard " \
            "build --re-resolve resolves it again)\n"  # fmt: skip
    code, _, err = cli(capsys, *DRY, "--re-resolve", "--any-host")
    assert code == 0, err
    assert cli(capsys, *DRY, "--no-project")[0] == 0


def test_a_changed_requirements_file_is_a_change_too(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "requirements.txt").write_text("numpy\n")
    locked(folder, monkeypatch, '[dependencies]\nrequirements = ["requirements.txt"]\n')
    (folder / "requirements.txt").write_text("numpy\npandas\n")
    code, _, err = cli(capsys, *DRY)
    assert code == 2
    assert err.startswith("torchyard: error: torchyard.lock no longer fits torchyard.toml: requirements.txt changed "
                          "(sha256 ")  # fmt: skip
    assert cli(capsys, *DRY, "--re-resolve")[0] == 0
    locked(folder, monkeypatch, '[dependencies]\nrequirements = ["requirements.txt"]\n')
    assert cli(capsys, *DRY)[0] == 0


def test_a_damaged_lock_is_one_located_line(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    locked(folder, monkeypatch, "")
    lock = folder / "torchyard.lock"
    lock.write_text(lock.read_text().replace('variant = "cu126"', 'variant = "cu130"'))
    assert cli(capsys, *DRY)[1:] == ("", f"torchyard: error: torchyard.lock: its fields disagree with its combination "
                                         f"{OLD} (edited by hand?): torchyard build --re-resolve\n")  # fmt: skip
    lock.write_text(lock.read_text().replace("schema = 1", "schema = 7"))
    code, _, err = cli(capsys, *DRY)
    assert (code, err) == (2, "torchyard: error: torchyard.lock:4: schema: expected 1, found 7: --re-resolve writes "
                              "it again\n")  # fmt: skip
    assert cli(capsys, *DRY, "--re-resolve")[0] == 0


def test_re_resolve_needs_a_project(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, *DRY, "--re-resolve")[1:] == (
        "",
        "torchyard: error: --re-resolve: no torchyard.toml here or "
        "above (torchyard init writes one, --project names one)\n",
    )
    (folder / "torchyard.toml").write_text("")
    assert cli(capsys, *DRY, "--re-resolve", "--no-project")[2] == (
        "torchyard: error: --re-resolve and --no-project: give one of them\n"
    )


def test_a_lock_or_file_linked_out_of_the_project_is_neither_read_nor_written_through(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on(monkeypatch, "rtx4090-535")
    bashrc = folder.parent / "bashrc"
    bashrc.write_text("alias ls='ls -F'\n")
    (folder / "torchyard.toml").write_text("")
    (folder / "torchyard.lock").symlink_to(bashrc)
    refused = f"torchyard: error: torchyard.lock: a symbolic link out of its folder (to {bashrc}): remove it\n"
    for argv in (DRY, ("render", "-o", "out", "--re-resolve"), ("doctor",), ("init", "--force")):
        assert cli(capsys, *argv) == (2, "", refused), argv
    assert bashrc.read_text() == "alias ls='ls -F'\n"
    (folder / "torchyard.lock").unlink()
    (folder / "torchyard.toml").unlink()
    (folder / "torchyard.toml").symlink_to(bashrc)
    assert cli(capsys, *DRY) == (2, "", refused.replace("torchyard.lock", "torchyard.toml"))
    assert bashrc.read_text() == "alias ls='ls -F'\n"


def test_the_lock_replaces_a_link_inside_the_project_instead_of_writing_through_it(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on(monkeypatch, "rtx4090-535")
    (folder / "torchyard.toml").write_text("")
    (folder / "old.lock").write_text("kept\n")
    (folder / "torchyard.lock").symlink_to(folder / "old.lock")
    assert cli(capsys, "render", "-o", "out", "--re-resolve")[0] == 0
    assert (folder / "old.lock").read_text() == "kept\n" and not (folder / "torchyard.lock").is_symlink()
    assert getattr(read_project_lock(folder / "torchyard.lock"), "combination", None) == OLD
