"""BuildKit's plain progress output (`--progress=plain`), read line by line into its steps.

Each step (a vertex) is numbered: `#12 [venv 3/5] RUN ...` is its header, `#12 0.644 text` a line of its output
(the number is seconds since the step started), `#12 ERROR: ...` its failure, `#12 DONE 1.2s`, `#12 CACHED` and
`#12 CANCELED` its ends. Steps running in parallel interleave; a header is printed again when the output switches
back to its step. Docker 20.10's classic client (DOCKER_BUILDKIT=1) and buildx print the same format, but for
20.10's `#12 sha256:...` line under each header and the summary after the failure (20.10 repeats no output there):
the summary is not read, the steps are. Pure: fed every line of a build, asked once it failed.

Every line is cleaned before it is kept: terminal escapes and control characters go, credentials are redacted
(the whole line, before it is shortened), and it is cut to WIDTH characters.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from builder.core.redact import redact

KEEP = 40  # lines of output kept per step, and outside the steps
WIDTH = 2000  # characters kept of a line
SHORT = 80  # characters of a step's instruction in its short form

_NUMBERED = re.compile(r"#(\d+) (.*)")
_TIMED = re.compile(r"(\d+\.\d+|\d+)(?: (.*)|$)")
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")
_EXIT = re.compile(r"exit code: (\d+)")
_GENERIC = re.compile(r'^process ".*" did not complete successfully|^executor failed running')
_CANCELED = ("context canceled", "canceled")
_CACHE_IMPORT = "importing cache manifest from "
_FLAGS = re.compile(r"^(?:--[\w-]+(?:=\S*)?\s+)+")  # RUN --mount=... --network=...
_SETUP = re.compile(r"(?:set|export|rm|mkdir|cd|umask|if|then|else|elif)\b|(?:fi|true|:)$")
_SEPARATOR = re.compile(r"'[^']*'|\"(?:\\.|[^\"\\])*\"|(?:;|&&)\s*")  # quoted text is skipped whole
_WRONG = re.compile(
    r"(?i)error|^cause:|^caused by:|\bfailed|fatal|^E: |^Err:|refused|denied|not found|unable|cannot|could not|"
    r"no space|unreachable|timed out|because"
)


def clean(line: str) -> str:
    return redact(_CONTROL.sub("", line))[:WIDTH]


@dataclass
class Step:
    number: int
    header: str  # "[venv 3/5] RUN ...", "[internal] load metadata for ..."
    output: deque[str] = field(default_factory=lambda: deque(maxlen=KEEP))
    error: str = ""  # the text of its `#N ERROR: ` line

    @property
    def exit_code(self) -> int | None:
        found = _EXIT.findall(self.error)  # the last: the quoted command before it could hold the words
        return int(found[-1]) if found else None

    @property
    def own_error(self) -> str:
        """The error line's text where it says more than "the process exited non-zero" (a base image not found)."""
        return "" if _GENERIC.search(self.error) else self.error

    @property
    def pulls_image(self) -> bool:
        """A base image's metadata or layers, which the engine fetches itself (not a RUN in a build container)."""
        return self.header.startswith("[internal] load metadata for ") or "] FROM " in self.header

    def last_lines(self, count: int) -> list[str]:
        """The last lines of its output that say something went wrong (its last lines where none does)."""
        lines = [line.strip() for line in (*self.output, self.own_error) if line.strip()]
        wrong = [line for line in lines if _WRONG.search(line)]
        return (wrong or lines)[-count:]

    def short(self) -> str:
        """'[venv 3/5] RUN --mount=... set -eu; export A=1; uv pip install ...' -> '[venv 3/5] RUN ... uv pip ...':
        a RUN without its flags and the setup before its first real command, and cut at SHORT characters."""
        label, _, instruction = " ".join(self.header.split()).partition("] ")
        if not instruction:
            return _shorten(label)
        keyword, _, rest = instruction.partition(" ")
        if keyword == "RUN":
            rest = _FLAGS.sub("", rest)
            start = _first_command(rest)
            rest = ("... " if start else "") + rest[start:]
        return f"{label}] {keyword} {_shorten(rest)}".rstrip()


class BuildkitLog:
    """What a build printed, by step: each step's header, its last KEEP lines and its error."""

    def __init__(self) -> None:
        self.steps: dict[int, Step] = {}
        self.failed: list[Step] = []  # in the order their errors came
        self.other: deque[str] = deque(maxlen=KEEP)  # lines outside the steps: the client's own, the summary

    def feed(self, raw: str) -> None:
        line = clean(raw)
        numbered = _NUMBERED.match(line)
        if numbered is None:
            if line.strip():
                self.other.append(line)
            return
        number, text = int(numbered[1]), numbered[2]
        step = self.steps.get(number)
        if step is None:
            self.steps[number] = Step(number, text)
        elif text.startswith("ERROR: "):
            step.error = text.removeprefix("ERROR: ")
            self.failed.append(step)
        elif timed := _TIMED.fullmatch(text):
            step.output.append(timed[2] or "")

    def failed_step(self) -> Step | None:
        """The step that failed the build: the first error that is not a cancellation (a step stopped because
        another one failed), else the first error. A registry cache that could not be read (none written yet: a
        first `--cache` build) fails no build: BuildKit goes on without it."""
        failed = [s for s in self.failed if not s.header.startswith(_CACHE_IMPORT)]
        real = [s for s in failed if not _canceled(s)]
        return (real or failed)[0] if failed else None

    def others_failed(self) -> int:
        """How many other steps failed on their own (not cancelled), e.g. two stages building in parallel."""
        step = self.failed_step()
        others = (s for s in self.failed if s is not step and not _canceled(s))
        return len({s.number for s in others if not s.header.startswith(_CACHE_IMPORT)})


def _canceled(step: Step) -> bool:
    return step.error.strip().lower() in _CANCELED


def _first_command(shell: str) -> int:
    """Where the first command of a RUN's shell that is not setup (set, export, if ... fi, rm, mkdir) starts."""
    starts = [0, *(found.end() for found in _SEPARATOR.finditer(shell) if found[0][0] in ";&")]
    for start, end in zip(starts, [*starts[1:], len(shell)], strict=True):
        command = shell[start:end].strip().rstrip(";&").strip()
        if command and not _SETUP.match(command):
            return start
    return 0  # all of it is setup: show it from its start


def _shorten(text: str) -> str:
    return text if len(text) <= SHORT else text[:SHORT].rsplit(" ", 1)[0] + " ..."
