"""The publish set in its own file (publish.toml beside matrix.toml, or --publish-set FILE): it replaces the
matrix's own [[publish]] entries (one note says so), its [ci] table gives `matrix ci` its defaults, and its
errors name its own file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from publish_kit import matrix_with

from builder.cli.main import main
from builder.core.errors import MatrixError
from builder.matrix import load_matrix

OWN = '\n[[publish]]\nname = "own"\ntorch = "==2.14.1"\nos = ["debian12"]\nflavors = ["runtime"]\n'
TEAM = '[[publish]]\nname = "team"\ntorch = "==2.15.0"\nos = ["debian12"]\nflavors = ["devel"]\n'

ARM64_CU126 = (
    '[[publish]]\nname = "team"\ntorch = "==2.14.1"\nos = ["debian12"]\nplatforms = ["linux/arm64"]\n'
    'variants = ["cu126"]\n'
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    matrix_with(OWN, tmp_path)
    return tmp_path


def test_a_publish_file_beside_the_matrix_is_the_publish_set(folder: Path) -> None:
    assert [e.name for e in load_matrix(folder / "matrix.toml").publish] == ["own"]
    (folder / "publish.toml").write_text(TEAM)
    m = load_matrix(folder / "matrix.toml")
    assert [e.name for e in m.publish] == ["team"] and m.publish_file == str(folder / "publish.toml")
    assert (
        m.publish_note == f"publish set: {folder}/publish.toml; matrix.toml's own [[publish]] entries (1) are ignored"
    )


def test_publish_set_names_the_file_and_the_commands_say_what_they_set_aside(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = folder / "team" / "set.toml"
    named.parent.mkdir()
    named.write_text(TEAM)
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", str(folder / "matrix.toml"), "matrix", "publish", "--publish-set", str(named)])
    out, err = capsys.readouterr()
    assert exit_.value.code == 0 and "torch2.15.0-cu132-py3.11-debian12-devel" in out and "own" not in out
    assert err == f"note: publish set: {named}; matrix.toml's own [[publish]] entries (1) are ignored\n"


def test_a_matrix_without_entries_of_its_own_takes_the_file_without_a_note(tmp_path: Path) -> None:
    matrix_with("", tmp_path)
    (tmp_path / "publish.toml").write_text(TEAM)
    m = load_matrix(tmp_path / "matrix.toml")
    assert [e.name for e in m.publish] == ["team"] and m.publish_note == ""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TEAM.replace("debian12", "debian99"), "publish.toml:4: publish[team].os: unknown OS 'debian99'"),
        (TEAM + "colour = 1\n", "publish.toml:6: publish[team].colour: unknown key 'colour'"),
        ("[ci]\nrunner = 3\n" + TEAM, "publish.toml:2: ci.runner: expected a list, found 3"),
        ('[ci]\nregistry = "Bad Name"\n', "publish.toml:2: ci.registry: registry: 'Bad Name' is not an image"),
        ("[ci]\ngpu_runners = 1\n", "publish.toml:2: ci.gpu_runners: expected a table of class = runner labels"),
        ("schema = 2\n" + TEAM, "publish.toml:1: publish set.schema: schema 2 is not supported"),
        ("[[publish]\n", "publish.toml:1:10: TOML syntax error"),
        (ARM64_CU126,
         "publish.toml:5: publish[team].platforms: torch 2.14.1 has no linux/arm64 cu126 wheels"),
    ],
)  # fmt: skip
def test_errors_in_the_publish_file_name_it_and_the_line(folder: Path, text: str, message: str) -> None:
    (folder / "publish.toml").write_text(text)
    with pytest.raises(MatrixError) as error:
        load_matrix(folder / "matrix.toml")
    assert str(error.value).startswith(f"{folder}/{message}"), str(error.value)


def test_a_publish_set_that_is_not_there_is_one_line(folder: Path) -> None:
    with pytest.raises(MatrixError, match=r"nowhere.toml: no such publish set file \(--publish-set\)"):
        load_matrix(folder / "matrix.toml", folder / "nowhere.toml")


def test_a_broken_publish_file_stops_only_the_commands_that_plan_the_set(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "publish.toml").write_text("[[publish]\n")
    assert load_matrix(folder / "matrix.toml", facts_only=True).publish[0].name == "own"
    matrix = ["--matrix", str(folder / "matrix.toml")]
    with pytest.raises(SystemExit) as exit_:
        main([*matrix, "lookup", "--driver", "580.65.06", "--gpu", "RTX 4090"])
    assert exit_.value.code == 0, capsys.readouterr().err
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main([*matrix, "matrix", "publish"])
    assert exit_.value.code == 2 and "publish.toml:1:10: TOML syntax error" in capsys.readouterr().err
