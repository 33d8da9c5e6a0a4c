"""Your project in the image (issue 40), typed as a user types it: examples/project, copied, built by the plain
`torchyard build` (no flags: torchyard.toml and its lock decide), started by `torchyard run`, changed, rebuilt.

The example pins the docker tier's shared e2e combination with archs sm_89, so its base is the image the README's
main job builds (tests/unit/test_example_project.py holds the two plans together) and comes from the e2e build's
cache. Then: the project's import check passed, and build-report.json and plan.json describe the project
image; `torchyard run -- python -m tinyproj` starts the project's image
(found by its labels, its code from the image, not the mounted folder); one changed source file rebuilds the code
layers only (every layer below them, the base's and the dependencies', is the same), and the rebuild's seconds and
bytes are printed. The images it tagged are removed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import E2E
from kit import E2E_ID, ROOT, docker

pytestmark = pytest.mark.docker

EXAMPLE = ROOT / "examples" / "project"
DEPENDENCY_LAYERS = 2  # over the base: COPY requirements.txt, RUN pip install (docs/project.md, "Layer order")
CODE_LAYERS = 3  # at most: one COPY per [image].copy entry (two here), and a WORKDIR that may add one
PINS = "torchyard-lock-constraints.txt"  # the lock's python_set as the install's constraints (docs/project.md)


@dataclass(frozen=True)
class Typed:
    code: int
    out: str
    err: str
    seconds: float


@dataclass(frozen=True)
class Project:
    command: str  # the `torchyard` on PATH
    folder: Path  # the copy of examples/project, where the user types
    built: str  # the first build's output

    def type(self, *args: str, timeout: float = 1800) -> Typed:
        start = time.monotonic()
        done = subprocess.run([self.command, *args], cwd=self.folder, env=dict(os.environ), capture_output=True,
                              text=True, timeout=timeout, check=False)  # fmt: skip
        return Typed(done.returncode, done.stdout, done.stderr, time.monotonic() - start)


def summary(out: str) -> list[str]:
    """The build summary's project line, in words (`project  built  torchyard/tinyproj:...-p... 12s`)."""
    line = next((line for line in out.splitlines() if line.startswith("project ")), None)
    assert line is not None, out[-3000:]
    return line.split()


def project_ref(out: str) -> str:
    return summary(out)[2]


def base_ref(out: str) -> str:
    found = re.search(r"^\[project\] building tinyproj on (\S+) ", out, re.M)
    assert found is not None, out[-3000:]
    return found[1]


def layers(ref: str) -> list[str]:
    return list(json.loads(docker("image", "inspect", ref).stdout)[0]["RootFS"]["Layers"])


def tags_of(ref: str) -> list[str]:
    inspected = docker("image", "inspect", ref)
    return list(json.loads(inspected.stdout)[0]["RepoTags"]) if inspected.returncode == 0 else []


def newest_sizes(ref: str, count: int) -> int:
    """The bytes of the image's `count` newest layers (docker history, newest first; the 0-byte rows of ENV, CMD
    and WORKDIR carry no layer)."""
    rows = docker("history", "--no-trunc", "--human=false", "--format", "{{.Size}}", ref).stdout.split()
    return sum([size for size in map(int, rows) if size > 0][:count])


@pytest.fixture(scope="module")
def project(e2e: E2E, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    """The example built once by the plain command; every image it tagged is removed afterwards (the base's tags
    only where this build made them: the tour's main job must build its own)."""
    command = shutil.which("torchyard")
    assert command, "no `torchyard` on PATH: scripts/setup links scripts/torchyard there (the README's set-up)"
    folder = tmp_path_factory.mktemp("example") / "project"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("build", "__pycache__"))
    base = "torchyard:2.15.0-cuda13.2-cudnn9-py3.13-debian13-runtime-sm89"
    before = set(tags_of(base))
    typed = Project(command, folder, "").type("build")
    made: list[str] = []
    try:
        assert typed.code == 0, (typed.out + typed.err)[-4000:]
        made.append(project_ref(typed.out))
        yield Project(command, folder, typed.out)
    finally:
        made += [ref for ref in docker("images", "--format", "{{.Repository}}:{{.Tag}}", "torchyard/tinyproj")
                 .stdout.split() if not ref.endswith(":<none>")]  # fmt: skip
        for ref in dict.fromkeys(made):
            docker("rmi", ref)
        mine = [t for t in tags_of(base) if t not in before]
        if mine:
            docker("rmi", *mine)


def test_the_plain_build_builds_the_e2e_base_then_the_project_and_its_checks_pass(project: Project) -> None:
    assert base_ref(project.built) == "torchyard:2.15.0-cuda13.2-cudnn9-py3.13-debian13-runtime-sm89"
    assert "[project] import tinyproj: passed" in project.built.splitlines()
    assert "[project] python -m tinyproj --help: passed" in project.built.splitlines()
    ref = project_ref(project.built)
    assert ref.startswith("torchyard/tinyproj:2.15.0-cuda13.2-cudnn9-py3.13-debian13-runtime-sm89-p"), ref
    labels = json.loads(docker("image", "inspect", ref).stdout)[0]["Config"]["Labels"]
    assert (labels["io.torchyard.project"], labels["io.torchyard.combination"]) == ("tinyproj", E2E_ID)


def test_the_shipped_lock_pins_the_python_set_and_stays_as_it_is(project: Project) -> None:
    """The lock's python_set (tabulate) is installed as a constraints file beside the base's; nothing rewritten."""
    [dockerfile] = list((project.folder / "build" / "torchyard").glob("*/project/Dockerfile"))
    assert f" -c /opt/torchyard/{PINS} " in dockerfile.read_text()
    assert (dockerfile.parent / PINS).read_text().splitlines()[1:] == ["tabulate==0.10.0"]
    assert (project.folder / "torchyard.lock").read_bytes() == (EXAMPLE / "torchyard.lock").read_bytes()


def test_the_reports_describe_the_project_image(project: Project) -> None:
    """plan.json and build-report.json beside the base's: the image's ref, content id, checks (no --push: no
    digest)."""
    ref = project_ref(project.built)
    [path] = list((project.folder / "build" / "torchyard").glob("*/build-report.json"))
    report = json.loads(path.read_text())["project"]
    planned = json.loads((path.parent / "plan.json").read_text())["project"]
    assert (report["ref"], report["status"], report["digest"], planned["ref"]) == (ref, "built", None, ref)
    assert report["content_id"] == planned["content_id"] and ref.endswith("-p" + report["content_id"][:12])
    assert report["checks"] == [
        {"check": "import tinyproj", "result": "passed"},
        {"check": "python -m tinyproj --help", "result": "passed"},
    ]
    labels = json.loads(docker("image", "inspect", ref).stdout)[0]["Config"]["Labels"]
    assert labels["io.torchyard.project-content"] == report["content_id"]


def test_run_starts_the_project_image_with_its_own_code(project: Project) -> None:
    ref = project_ref(project.built)
    typed = project.type("run", "--", "python", "-m", "tinyproj")
    assert typed.code == 0, typed.err
    assert "torch 2.15.0+cu132" in typed.out.splitlines(), typed.out
    assert f"torchyard: the project's image: {ref} ({E2E_ID})" in typed.err.splitlines()
    assert "building" not in typed.err
    where = project.type("run", "--", "python", "-c", "import tinyproj; print(tinyproj.__file__)")
    assert where.out.strip() == "/app/src/tinyproj/__init__.py", where.out + where.err  # the image's, not /workspace
    train = project.type("run", "--", "python", "/app/train.py")
    assert train.code == 0 and "step 19" in train.out, train.out + train.err
    doctor = project.type("doctor")
    assert f"  where:    in the local engine ({ref})" in doctor.out, doctor.out
    assert "  runs here: yes" in doctor.out, doctor.out  # on this machine's CPU where it has no GPU


def test_one_changed_source_file_rebuilds_the_code_layers_only(project: Project) -> None:
    old = project_ref(project.built)
    init = project.folder / "src" / "tinyproj" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "0.1.0"', '__version__ = "0.1.1"'))
    typed = project.type("build")
    assert typed.code == 0, (typed.out + typed.err)[-4000:]
    new = project_ref(typed.out)
    assert new != old
    assert not any(line.startswith("runtime ") and " built " in line for line in typed.out.splitlines())
    shared = len(layers(base_ref(typed.out))) + DEPENDENCY_LAYERS
    before, after = layers(old), layers(new)
    assert len(before) == len(after) and len(after) - shared <= CODE_LAYERS, (before, after)
    assert after[:shared] == before[:shared]  # the base's layers and the dependencies' layer: the same
    changed = [i for i in range(shared, len(after)) if after[i] != before[i]]
    assert changed, "no layer changed"
    seconds = float(summary(typed.out)[3].rstrip("s"))  # `project  built  REF 12s`
    size = newest_sizes(new, len(after) - changed[0])
    print(f"\nproject rebuild: {typed.seconds:.1f} s for `torchyard build` ({seconds:.0f} s the project build), "
          f"{len(changed)} layer(s) changed, {size} bytes from the first changed layer up")  # fmt: skip
    version = project.type("run", "--", "python", "-c", "import tinyproj; print(tinyproj.__version__)")
    assert version.out.strip() == "0.1.1", version.out + version.err  # run took the newest image of the project
    assert f"torchyard: the project's image: {new} ({E2E_ID})" in version.err.splitlines()


def test_re_resolve_builds_the_set_afresh_and_records_it_as_the_shipped_lock(project: Project) -> None:
    """--re-resolve rewrites the lock without a set; the build then installs unpinned (no image reused) and,
    after the checks passed, records what pip installed over the base: the shipped lock, byte for byte."""
    typed = project.type("build", "--re-resolve")
    assert typed.code == 0, (typed.out + typed.err)[-4000:]
    lines = typed.out.splitlines()
    assert "[project] torchyard.lock records no Python set yet: the build resolves it afresh and records it" in lines
    assert "[project] recorded 1 package(s) over the base in torchyard.lock's python_set; 1 sha256 not recorded" \
        in lines  # fmt: skip
    assert (project.folder / "torchyard.lock").read_text() == (EXAMPLE / "torchyard.lock").read_text()
