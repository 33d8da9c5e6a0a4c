"""From the three outcomes of the rules to one answer: RUNS only when every rule passed; WILL NOT RUN when one
failed; RUNS WITH its conditions when only inputs the question left open are missing and each says what it needs;
otherwise CANNOT TELL, with what to give or record to tell. On a machine without a GPU, where the GPU rules do not
apply and every other rule passed: RUNS ON CPU."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from builder.resolve.rules.check import Check, Missing, Status

CANNOT_TELL_EXIT = 6  # README's exit-code table: the verdict commands (explain, inspect) when they cannot tell


class Answer(StrEnum):
    RUNS = "runs"
    RUNS_WITH = "runs-with"  # runs under the stated conditions (inputs the question left open)
    WILL_NOT_RUN = "will-not-run"
    CANNOT_TELL = "cannot-tell"
    RUNS_ON_CPU = "runs-cpu"  # a machine without a GPU: the image's torch runs on its CPU (exit 0)


@dataclass(frozen=True)
class Verdict:
    answer: Answer
    failed: tuple[Check, ...]
    conditions: tuple[str, ...]  # RUNS WITH: what the open inputs must be
    unknown: tuple[str, ...]  # CANNOT TELL: what to give or record, one line per rule

    @property
    def words(self) -> str:
        """'RUNS', 'RUNS WITH driver >= 525.60.13', 'WILL NOT RUN', 'CANNOT TELL'."""
        if self.answer is Answer.RUNS_WITH:
            return "RUNS WITH " + " and ".join(self.conditions)
        if self.answer is Answer.RUNS_ON_CPU:
            return "RUNS ON CPU"
        return self.answer.value.replace("-", " ").upper()

    @property
    def exit_code(self) -> int:
        return {Answer.WILL_NOT_RUN: 1, Answer.CANNOT_TELL: CANNOT_TELL_EXIT}.get(self.answer, 0)


def verdict(checks: Iterable[Check], *, here: bool = False) -> Verdict:
    """`here`: the machine answered the inputs (doctor, --here); what it could not read is not a condition the
    user can choose, so a missing input there means CANNOT TELL."""
    found = tuple(checks)
    failed = tuple(c for c in found if c.status is Status.FAIL)
    if failed:
        return Verdict(Answer.WILL_NOT_RUN, failed, (), ())
    open_ = [c for c in found if c.status is Status.NOT_CHECKED]
    if not open_:
        cpu = any(c.status is Status.NOT_APPLICABLE for c in found)
        return Verdict(Answer.RUNS_ON_CPU if cpu else Answer.RUNS, (), (), ())
    conditional = all(c.missing is Missing.INPUT and c.condition for c in open_) and not here
    if conditional:
        return Verdict(Answer.RUNS_WITH, (), tuple(dict.fromkeys(c.condition or "" for c in open_)), ())
    return Verdict(Answer.CANNOT_TELL, (), (), _to_tell(open_))


def _to_tell(open_: list[Check]) -> tuple[str, ...]:
    """One line per thing to give or record, naming every rule that lacks it (driver-gpu, driver-cuda: ...)."""
    rules: dict[str, list[str]] = {}
    for c in open_:
        rules.setdefault(_what_to_tell(c), []).append(c.rule)
    return tuple(f"{', '.join(dict.fromkeys(names))}: {what}" for what, names in rules.items())


def _what_to_tell(c: Check) -> str:
    if c.missing is Missing.FACT:
        return f"{c.reason} (record it in matrix.toml, with its source)"
    return c.reason + (f" (needs {c.condition})" if c.condition else "")


def status_words(c: Check) -> str:
    """The text column of a check: PASS, FAIL, or NOT CHECKED."""
    words = {Status.PASS: "PASS", Status.FAIL: "FAIL", Status.NOT_CHECKED: "NOT CHECKED"}
    return words.get(c.status, "N/A")


def check_json(c: Check) -> dict[str, object]:
    """A check in JSON (schema 2): `status` says it; `ok` is true only for a pass, null when not checked."""
    data: dict[str, object] = {
        "rule": c.rule,
        "status": c.status.value,
        "ok": None if c.status in (Status.NOT_CHECKED, Status.NOT_APPLICABLE) else c.ok,
        "reason": c.reason,
        "sources": list(c.sources),
    }
    if c.missing is not None:
        data["missing"] = c.missing.value
        data["condition"] = c.condition
    return data
