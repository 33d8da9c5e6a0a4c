"""Issue 24's faults at the unit level, one line each with the README's exit code: a matrix file cut before its
first [[torch]] table (every command, doctor included), a full disk under -o (a fake write raising ENOSPC, as
a failed write() does: with no file name), and the daemon's words for a registry's refusal of a push.
The docker tier (tests/integration/test_engine_faults.py) has the real engine, registry and disk."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from matrix_kit import BASE

from builder.cli.main import main
from builder.core.errors import MatrixError, UsageError
from builder.core.files import write_file
from builder.engine.images import push_refusal
from builder.matrix.loader import load_matrix

ROOT = Path(__file__).resolve().parents[2]


def cut_matrix(tmp_path: Path) -> tuple[Path, int]:
    """The real matrix.toml cut just before its first [[torch]] table; and the line it ends at."""
    text = (ROOT / "matrix.toml").read_text()
    cut = text[: text.index("\n[[torch]]\n") + 1]
    path = tmp_path / "cut.toml"
    path.write_text(cut)
    return path, cut.count("\n")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("torchyard: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return int(exit_.value.code or 0), lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["lookup", "--driver", "550", "--arch", "sm_89"],
        ["doctor"],  # it answers for any machine, but not from a matrix it cannot read: the flag is wrong
        ["matrix", "show", "torch", "2.5.1"],
    ],
    ids=["lookup", "doctor", "matrix-show"],
)
def test_a_matrix_cut_before_its_first_torch_table_is_exit_2_with_file_and_line(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TORCHYARD_DEBUG", raising=False)
    path, end = cut_matrix(tmp_path)
    code, line = run(["--matrix", str(path), *argv], capsys)
    assert (code, line) == (
        2,
        f"torchyard: error: {path}:{end}: no [[torch]] table: the file ends here without one (cut short?)",
    )


@pytest.mark.parametrize("table", ["torch", "os", "cuda", "arch", "driver_branch"])
def test_each_table_every_answer_reads_is_required(table: str, tmp_path: Path) -> None:
    start = BASE.index(f"[[{table}]]")
    end = BASE.find("\n[", start + 2)
    while end != -1 and BASE.startswith(f"\n[[{table}", end):  # every table of that kind
        end = BASE.find("\n[", end + 2)
    if table == "torch":  # its variants go with it
        end = -1
    text = BASE[:start] + (BASE[end + 1 :] if end != -1 else "")
    path = tmp_path / "m.toml"
    path.write_text(text)
    with pytest.raises(MatrixError, match=rf"^{path}:\d+: no \[\[{table}\]\] table: "):
        load_matrix(path)


def test_an_empty_matrix_names_line_1(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text("schema = 1")
    with pytest.raises(MatrixError, match=rf"^{path}:1: no \[\[torch\]\] table"):
        load_matrix(path)


def _full_disk(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")  # as write() raises it: no file name


def test_a_full_disk_under_render_o_names_the_file_and_leaves_no_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TORCHYARD_DEBUG", raising=False)
    monkeypatch.setattr(Path, "write_text", _full_disk)
    out = tmp_path / "out"
    flags = ["--torch", "2.5.1", "--variant", "cpu", "--python", "3.11", "--os", "debian12", "--any-host"]
    code, line = run(["render", *flags, "-o", str(out)], capsys)
    assert (code, line) == (2, f"torchyard: error: {out}/Dockerfile: cannot write: No space left on device")
    assert sorted(p.name for p in out.iterdir()) == [".torchyard.lock"]


def test_write_file_names_the_file_the_user_knows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Path, "write_bytes", _full_disk)
    with pytest.raises(UsageError, match=r"^/out/torch.whl: cannot write: No space left on device$"):
        write_file(tmp_path / "staging" / "torch.whl", b"x", shown=Path("/out/torch.whl"))
    monkeypatch.undo()
    write_file(tmp_path / "ok.txt", "fine")
    assert (tmp_path / "ok.txt").read_text() == "fine"


@pytest.mark.parametrize(
    ("daemon", "line"),
    [
        (
            "error parsing HTTP 405 response body: invalid character 'M' looking for beginning of value: \"Method"
            ' not allowed\\n"',
            "the registry refused it: HTTP 405, method not allowed: the registry is read-only (or takes no pushes "
            "here)",
        ),
        (
            "error parsing HTTP 413 response body: unexpected end of JSON input",
            "the registry refused it: HTTP 413, "
            "too large: the registry (or a proxy before it) refuses a layer this size",
        ),
        ("error parsing HTTP 418 response body: x", "the registry refused it: HTTP 418, refused"),
        ("denied: requested access to the resource is denied\n", "denied: requested access to the resource is denied"),
    ],
)
def test_a_registry_s_refusal_is_one_line_without_the_daemon_s_parse_error(daemon: str, line: str) -> None:
    assert push_refusal(daemon) == line
