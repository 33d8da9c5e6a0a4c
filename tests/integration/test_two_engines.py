"""Issue 43 item 4 in the docker tier: one family published over two engines, as the exported GitHub workflow does.

The family is one multi-platform image (the README's runtime image, linux/amd64 and linux/arm64). `matrix ci`
exports its legs' commands; this module runs them verbatim, each on the engine its runner would be:

- the first engine (the shared one) builds the amd64 combination with `--cache`, writing BuildKit's cache of every
  stage to the local registry: a pipeline that ran before (another branch, yesterday's run). In a whole run its steps
  are in the shared engine's build cache (the e2e and tour builds), so the cache export is its new work;
- a second engine (engine_kit: its own dockerd, data root, exec root, pidfile, socket, containerd and containerd
  namespaces, with the containerd image store) starts with no image and no build cache and runs the amd64 leg's
  exported `build` command: every RUN and COPY step of its log is CACHED (pulled from the first engine's registry
  cache, never run), its smoke suite passes, the candidate is pushed and the leg's `push` command promotes it;
- the arm64 leg's candidate is a stand-in pushed under the content hash the export names (building torch under QEMU
  takes 14 of CI's minutes: test_arm64.py), and its `push` command promotes it the same way;
- the `aliases` job's command, `publish --aliases-only`, holds the index while a leg is missing and then writes it:
  an OCI index over both platforms' promoted digests, with the alias beside it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RUN_ID
from engine_kit import SecondEngine
from kit import REGISTRY, ROOT, Run, torchyard
from oci_kit import local_client, push_image

from builder.oci.refs import parse_repo
from builder.pipeline.plan import CONTENT_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.engines]  # engines: out of scripts/test's default run (CI's time)

BASE = f"{REGISTRY}/torchyard-two-{RUN_ID}"
CACHE, CANDIDATES, PUBLIC = f"{BASE}/cache", f"{BASE}/candidates", f"{BASE}/torch"
# Both engines reach the same Debian base, by digest, in the local registry (the exported workflow's runners: Docker
# Hub). The exported commands carry no mirror: the workflow's environment does, as here.
MIRROR = {"TORCHYARD_REGISTRY_MIRROR": f"{REGISTRY}/torchyard-base"}
FAMILY = """
[[publish]]
name = "family"
torch = "==2.15.0"
os = ["debian13"]
python = ["3.13"]
archs = ["sm_89"]
flavors = ["runtime"]
platforms = ["linux/amd64", "linux/arm64"]
"""


def _argv(command: str, matrix: Path) -> list[str]:
    """An exported command's arguments after `torchyard` (kit.torchyard runs this checkout's builder), with the
    family's matrix: the workflow's jobs run in its checkout, and an image's content hash covers the matrix."""
    argv = shlex.split(command)
    assert argv[0] == "torchyard", command
    return ["--matrix", str(matrix), *argv[1:]]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = (ROOT / "matrix.toml").read_text()
    path = tmp_path_factory.mktemp("family") / "matrix.toml"
    path.write_text(text[: text.index("[[publish]]")] + FAMILY)
    return path


@pytest.fixture(scope="module")
def legs(matrix: Path) -> dict[str, dict[str, Any]]:
    """The exported GitHub matrix's jobs, by platform."""
    run = torchyard("--matrix", str(matrix), "matrix", "ci", "--format", "github", "--repo", PUBLIC, "--candidates",
                    CANDIDATES, "--cache-repo", CACHE, env=MIRROR)  # fmt: skip
    assert run.code == 0, run.text[-2000:]
    jobs = json.loads(run.out)["include"]
    by_platform = {("arm64" if "--platform linux/arm64" in j["build"] else "amd64"): j for j in jobs}
    assert len(jobs) == 2 and set(by_platform) == {"amd64", "arm64"}, jobs
    return by_platform


@pytest.fixture(scope="module")
def second() -> Iterator[SecondEngine]:
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.fail("needs root and dockerd to start an engine of its own: run the docker tier as scripts/test does")
    engine = SecondEngine(Path(tempfile.mkdtemp(prefix="ty-two-", dir="/tmp")))
    try:
        engine.start()
        yield engine
    finally:
        engine.close()


@pytest.fixture(scope="module")
def first(legs: dict[str, dict[str, Any]], matrix: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The shared engine's build of the amd64 combination, writing the registry cache (not pushed: another
    pipeline's build)."""
    argv = _argv(legs["amd64"]["build"], matrix)
    argv = [*argv[: argv.index("--repo")], "--repo", f"{BASE}/earlier"]  # no --push
    assert "--cache" in argv
    return torchyard(*argv, "-o", str(tmp_path_factory.mktemp("first") / "ctx"), env=MIRROR)


@pytest.fixture(scope="module")
def second_leg(
    first: Run,
    second: SecondEngine,
    legs: dict[str, dict[str, Any]],
    matrix: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Run, Path]:
    """The amd64 leg's exported build command on the second engine."""
    assert first.code == 0, first.text[-3000:]
    assert second.docker("images", "-q").stdout.strip() == ""  # nothing of its own to reuse
    out = tmp_path_factory.mktemp("second") / "ctx"
    run = torchyard(*_argv(legs["amd64"]["build"], matrix), "-o", str(out), env={**MIRROR, "DOCKER_HOST": second.host})
    return run, out


def steps_not_cached(log: str) -> dict[str, str]:
    """The RUN and COPY steps of a BuildKit plain log that ran (no `#N CACHED` line), by step number."""
    steps = dict(re.findall(r"^#(\d+) \[[^\]]+\] ((?:RUN|COPY) .{0,80})", log, re.MULTILINE))
    assert steps, log[-2000:]
    cached = set(re.findall(r"^#(\d+) CACHED$", log, re.MULTILINE))
    return {n: step for n, step in steps.items() if n not in cached}


def test_the_first_engine_writes_the_registry_cache(first: Run) -> None:
    assert first.code == 0, first.text[-3000:]
    assert local_client().tags(parse_repo(CACHE)), f"nothing in {CACHE}"


def test_the_second_engine_builds_every_step_from_the_first_engines_cache(
    second_leg: tuple[Run, Path], second: SecondEngine
) -> None:
    run, out = second_leg
    assert run.code == 0, run.text[-3000:]
    assert "io.containerd.snapshotter" in second.image_store()
    assert steps_not_cached((out / "build-runtime.log").read_text()) == {}
    assert "[runtime] smoke: " in run.out  # its smoke suite ran on the second engine (a failure fails the build)
    assert f"pushed {CANDIDATES}:" in run.out, run.out[-3000:]


def test_the_merge_writes_the_index_only_when_every_leg_is_published(
    second_leg: tuple[Run, Path], legs: dict[str, dict[str, Any]], matrix: Path, tmp_path: Path
) -> None:
    assert second_leg[0].code == 0, second_leg[0].text[-3000:]
    client = local_client()
    promoted = torchyard(*_argv(legs["amd64"]["push"], matrix))
    assert promoted.code == 0, promoted.text[-2000:]
    member = legs["amd64"]["image"].rsplit(":", 1)[1]
    index_tag = member.removesuffix("-amd64")
    merge = ("--matrix", str(matrix), "publish", "--aliases-only", "--repo", PUBLIC, "-o", str(tmp_path / "w"))

    arm = legs["arm64"]
    held = torchyard(*merge, env=MIRROR)  # the arm64 leg has not published: nothing joins, no alias moves
    assert held.code != 0, held.text[-2000:]
    assert f"MISS  {arm['image']}: not published with this content" in held.text, held.text[-2000:]
    assert "HOLD  " in held.text and client.manifest(parse_repo(PUBLIC), index_tag) is None, held.text[-2000:]

    push = _argv(arm["push"], matrix)  # --matrix M promote CANDIDATE PUBLIC --content-hash H
    candidate_tag = push[push.index("promote") + 1].rsplit(":", 1)[1]
    content = push[push.index("--content-hash") + 1]
    push_image(client, parse_repo(CANDIDATES), candidate_tag, arch="arm64", labels={CONTENT_LABEL: content})
    promoted_arm = torchyard(*push)
    assert promoted_arm.code == 0, promoted_arm.text[-2000:]

    merged = torchyard(*merge, env=MIRROR)
    assert merged.code == 0, merged.text[-3000:]
    assert f"index {index_tag}: moved" in merged.out, merged.out
    where = parse_repo(PUBLIC)
    amd64, arm64 = client.platforms(where, member), client.platforms(where, arm["image"].rsplit(":", 1)[1])
    assert amd64 is not None and arm64 is not None and len(amd64 | arm64) == 2, (amd64, arm64)
    assert client.platforms(where, index_tag) == amd64 | arm64  # every platform's promoted digest, no other
    assert re.search(r"alias \S+: moved -> " + re.escape(f"{PUBLIC}:{index_tag}"), merged.out), merged.out
