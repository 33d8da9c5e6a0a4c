"""Lifecycles (builder/resolve/lifecycle.py): where driver branches and OS bases stand on a day, as the real
matrix.toml records them, and what doctor, lookup and the page say of it (issue 39)."""

from __future__ import annotations

import datetime
import json
from dataclasses import replace

import pytest
from host_kit import DOCKER_WITH_TOOLKIT, H100X2_570, H100X2_580, machine
from matrix_kit import real

from builder.cli.main import main
from builder.host.doctor import diagnose
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.matrix.model import OSBase
from builder.resolve import lifecycle
from builder.resolve.lifecycle import OsPhase
from builder.resolve.query import RawQuery
from builder.site.data import lifecycle_notes

M = real()
DAY = datetime.date(2026, 12, 4)  # tests/unit/unit_walls.py's day
V100 = "0, Tesla V100-SXM2-16GB, 7.0, 16384, 570.124.06, Disabled\n"


def os_named(name: str) -> OSBase:
    return next(o for o in M.os if o.name == name)


@pytest.mark.parametrize(
    ("name", "day", "phase"),
    [
        ("debian12", datetime.date(2026, 6, 30), OsPhase.REGULAR),  # through the month its regular support ends
        ("debian12", datetime.date(2026, 7, 1), OsPhase.LONG_TERM),
        ("debian12", DAY, OsPhase.LONG_TERM),
        ("debian12", datetime.date(2028, 7, 1), OsPhase.ENDED),
        ("ubuntu20.04", DAY, OsPhase.LONG_TERM),
        ("ubuntu24.04", DAY, OsPhase.REGULAR),
    ],
)
def test_an_os_is_in_regular_then_long_term_support_then_past_it(name: str, day: datetime.date, phase: OsPhase) -> None:
    assert lifecycle.os_phase(os_named(name), day) is phase


def test_an_os_without_recorded_ends_is_not_recorded_not_supported() -> None:
    bare = replace(os_named("debian12"), regular_end=None, lts_end=None)
    assert lifecycle.os_phase(bare, DAY) is OsPhase.NOT_RECORDED
    assert lifecycle.os_note(bare, DAY) is None


def test_the_os_note_names_both_ends() -> None:
    assert lifecycle.os_note(os_named("debian12"), DAY) == (
        "debian12 is past its regular security support (ended June 2026): long-term support only, until June 2028"
    )
    assert lifecycle.os_note(os_named("debian12"), datetime.date(2028, 7, 1)) == (
        "debian12 is past the end of its long-term support (June 2028): no security updates"
    )
    assert lifecycle.os_note(os_named("ubuntu24.04"), DAY) is None


@pytest.mark.parametrize(
    ("branch", "ended"),
    [(570, True), (550, True), (535, True), (610, True), (580, False), (595, False), (470, True), (616, False)],
)
def test_which_branches_nvidia_no_longer_supports_on_the_day(branch: int, ended: bool) -> None:
    found = lifecycle.branch_of(M, branch)
    assert found is not None
    assert lifecycle.branch_ended(found, DAY) is ended
    assert (lifecycle.branch_note(found, DAY) is not None) is ended


def test_a_stated_end_is_supported_through_its_month() -> None:
    r535 = lifecycle.branch_of(M, 535)
    assert r535 is not None and r535.kind == "long-term" and r535.ends == (2026, 6)
    assert not lifecycle.branch_ended(r535, datetime.date(2026, 6, 30))
    assert lifecycle.branch_note(r535, datetime.date(2026, 7, 1)) == (
        "driver branch R535 (long-term branch) reached its end of life in June 2026"
    )


def test_the_branch_to_move_to_is_the_newest_long_term_one_that_runs_the_gpus() -> None:
    target = lifecycle.move_to(M, (), DAY)
    assert target is not None and target.branch == 580
    assert lifecycle.move_line(target) == "install a driver of branch R580 (long-term support, until June 2028)"
    assert lifecycle.move_to(M, (), datetime.date(2028, 7, 1)) is None  # none recorded past June 2028 yet


def doctor(smi: str, driver: str) -> list[tuple[str, str, str]]:
    system = machine(smi, driver=driver)
    d = diagnose(M, probe(M, system), read_runtime(system, lambda: DOCKER_WITH_TOOLKIT), RawQuery(), "torchyard")
    return [(p.check, p.message, p.fix) for p in d.problems if p.check == "driver-lifecycle"]


def test_doctor_on_570_says_the_branch_ended_and_names_the_branch_to_move_to_and_on_580_nothing() -> None:
    assert doctor(H100X2_570, "570.124.06") == [
        (
            "driver-lifecycle",
            "driver branch R570 (production branch) is no longer supported by NVIDIA: its list of supported data "
            "center branches of September 2026 does not name it",
            "install a driver of branch R580 (long-term support, until June 2028)",
        )
    ]
    assert doctor(H100X2_580, "580.65.06") == []
    assert doctor(V100, "570.124.06")[0][2] == "install a driver of branch R580 (long-term support, until June 2028)"


def test_lookup_says_it_under_the_first_row_and_in_its_json(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["lookup", "--driver", "570", "--gpu", "H100"])
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  note:")]
    assert notes[0] == (
        "  note:   driver branch R570 (production branch) is no longer supported by NVIDIA: its list of supported "
        "data center branches of September 2026 does not name it; install a driver of branch R580 (long-term "
        "support, until June 2028)"
    )
    with pytest.raises(SystemExit):
        main(["lookup", "--driver", "580", "--gpu", "H100", "--json"])
    assert not any("R580" in note for note in json.loads(capsys.readouterr().out)["lifecycle"])


def test_the_page_carries_the_notes_of_the_day_it_was_written() -> None:
    notes = lifecycle_notes(M)
    assert notes["day"] == "2026-12-04"
    assert notes["branches"]["570"].endswith("; install a driver of branch R580 (long-term support, until June 2028)")
    assert "580" not in notes["branches"] and "595" not in notes["branches"]
    assert notes["os"]["debian12"].startswith("debian12 is past its regular security support")
    assert "ubuntu24.04" not in notes["os"]


def test_the_day_comes_from_torchyard_today_else_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHYARD_TODAY", "2030-01-31")
    assert lifecycle.today() == datetime.date(2030, 1, 31)
    monkeypatch.setenv("TORCHYARD_TODAY", "not a day")
    assert lifecycle.today() == datetime.date.today()
