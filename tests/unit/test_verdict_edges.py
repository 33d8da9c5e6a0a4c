"""verdict() whole for each of its four answers: the failed checks only for WILL NOT RUN, the conditions only for
RUNS WITH (the default question is not --here), what to tell only for CANNOT TELL (written for the survivors of
mutmut on builder/resolve/verdict.py)."""

from __future__ import annotations

from builder.resolve.rules.check import Check, Missing, not_checked
from builder.resolve.verdict import CANNOT_TELL_EXIT, Answer, Verdict, verdict

PASS = Check("driver-cuda", True, "driver 550 runs CUDA 12.4 at full level", ("s",))
FAIL = Check("arch-torch", False, "sm_37 has no runnable code", ("s",))
OPEN = not_checked("driver-cuda", "no driver given", ("s",), Missing.INPUT, "driver >= 525.60.13")
FACT = not_checked("cudnn-cuda", "no cuDNN range recorded", ("s",), Missing.FACT)


def test_every_rule_passed_runs() -> None:
    assert verdict([PASS]) == Verdict(Answer.RUNS, (), (), ())
    assert verdict([]) == Verdict(Answer.RUNS, (), (), ())


def test_a_failed_rule_will_not_run_naming_only_the_failed() -> None:
    assert verdict([PASS, FAIL, OPEN]) == Verdict(Answer.WILL_NOT_RUN, (FAIL,), (), ())


def test_an_open_input_runs_with_its_condition_unless_asked_here() -> None:
    assert verdict([PASS, OPEN, OPEN]) == Verdict(Answer.RUNS_WITH, (), ("driver >= 525.60.13",), ())
    assert verdict([PASS, OPEN], here=True) == Verdict(
        Answer.CANNOT_TELL, (), (), ("driver-cuda: no driver given (needs driver >= 525.60.13)",)
    )


def test_an_unrecorded_fact_cannot_tell() -> None:
    assert verdict([OPEN, FACT]) == Verdict(
        Answer.CANNOT_TELL,
        (),
        (),
        (
            "driver-cuda: no driver given (needs driver >= 525.60.13)",
            "cudnn-cuda: no cuDNN range recorded (record it in matrix.toml, with its source)",
        ),
    )


def test_each_answer_in_words_and_as_the_readme_s_exit_code() -> None:
    other = not_checked("driver-gpu", "no GPU given", ("s",), Missing.INPUT, "a GPU of sm_80 or newer")
    runs_with = verdict([OPEN, other])
    assert runs_with.words == "RUNS WITH driver >= 525.60.13 and a GPU of sm_80 or newer"
    assert [(v.words, v.exit_code) for v in (verdict([PASS]), runs_with, verdict([FAIL]), verdict([FACT]))] == [
        ("RUNS", 0),
        ("RUNS WITH driver >= 525.60.13 and a GPU of sm_80 or newer", 0),
        ("WILL NOT RUN", 1),
        ("CANNOT TELL", CANNOT_TELL_EXIT),
    ]
    assert all(type(v.exit_code) is int for v in (verdict([PASS]), runs_with))
