"""Where a build's time went, per Dockerfile stage, read from BuildKit's plain progress output.

BuildKit numbers its steps and names each one's stage in the header (`#12 [build 2/2] RUN ...`); the step's end
says how long it ran (`#12 DONE 97.3s`) or that the cache had it (`#12 CACHED`). A stage's time is the sum of
its steps' (stages that do not depend on each other run at the same time, so the sum over stages can exceed
the wall time). The build report keeps it: a cold build's split (os, uv, build, venv, ...) is what tells where
to look.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEADER = re.compile(r"^#(\d+) \[([^\]\s]+)\s+\d+/\d+\]")
_DONE = re.compile(r"^#(\d+) DONE (\d+(?:\.\d+)?)s")
_CACHED = re.compile(r"^#(\d+) CACHED")


@dataclass
class StageTimes:
    """Feed it every line of one build; `stages()` is {stage: seconds} in the order the stages first ran."""

    _stage_of: dict[str, str] = field(default_factory=dict)
    _seconds: dict[str, float] = field(default_factory=dict)
    _cached: dict[str, int] = field(default_factory=dict)

    def feed(self, line: str) -> None:
        header = _HEADER.match(line)
        if header:
            step, stage = header[1], header[2]
            self._stage_of.setdefault(step, stage)
            self._seconds.setdefault(stage, 0.0)
            return
        done = _DONE.match(line)
        if done and done[1] in self._stage_of:
            self._seconds[self._stage_of[done[1]]] += float(done[2])
            return
        cached = _CACHED.match(line)
        if cached and cached[1] in self._stage_of:
            stage = self._stage_of[cached[1]]
            self._cached[stage] = self._cached.get(stage, 0) + 1

    def stages(self) -> dict[str, float]:
        return {stage: round(seconds, 1) for stage, seconds in self._seconds.items()}

    def cached_steps(self) -> dict[str, int]:
        return dict(self._cached)


def describe(stages: dict[str, float]) -> str:
    """`os 22s, uv 6s, build 95s, ...` (stages under half a second left out)."""
    return ", ".join(f"{name} {seconds:.0f}s" for name, seconds in stages.items() if seconds >= 0.5)
