"""builder/core/stage_times.py: BuildKit's plain progress -> seconds per Dockerfile stage."""

from __future__ import annotations

from builder.core.stage_times import StageTimes, describe

LOG = """#1 [internal] load build definition from Dockerfile
#1 DONE 0.1s
#4 [os 1/3] FROM docker.io/library/debian:bookworm-slim
#5 [os 2/3] RUN --mount=type=cache,id=apt-cache-debian12 apt-get install g++
#9 [uv 1/2] RUN --mount=type=cache,id=apt-cache-debian12-python apt-get install python3
#9 DONE 8.5s
#5 22.4 Setting up g++ (4:12.2.0-3) ...
#5 DONE 31.2s
#10 [uv 2/2] RUN python3 -m venv /opt/uv
#10 CACHED
#11 [build 2/2] RUN uv pip install torch
#11 DONE 97.3s
#12 [venv  1/17] COPY --from=build /layers/00/ /
#12 DONE 0.2s
#13 [venv  2/17] COPY --from=build /layers/01/ /
#13 DONE 1.0s
#33 exporting to image
#33 DONE 20.3s"""


def test_each_stage_gets_the_time_of_its_steps_in_the_order_the_stages_ran() -> None:
    times = StageTimes()
    for line in LOG.splitlines():
        times.feed(line)
    assert times.stages() == {"os": 31.2, "uv": 8.5, "build": 97.3, "venv": 1.2}
    assert times.cached_steps() == {"uv": 1}
    assert describe(times.stages() | {"runtime": 0.1, "smoke": 41.0}) == "os 31s, uv 8s, build 97s, venv 1s, smoke 41s"
