"""torchyard.lock's python_set (docs/project.md, "torchyard.lock"): a build of a lock without one resolves afresh
(no image reused) and, after the image's checks passed, records what the project installed over the base (sorted,
each with its sha256 or why not, a direct-URL install unpinned); a build of a lock with one installs exactly that
set (a constraints file beside the base's), which is in the content id while the set's sha256s are not; a lock
written before sets were recorded still reads; a damaged set is one located line; a set made for other
requirement files is refused by the files' hashes."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from fake_engine import Contents, FakeEngine, FakeRegistry, contents_of, wall_off_the_engine
from project_kit import cli
from render_kit import combination, matrix, options, requirements

from builder.core import env
from builder.core.errors import BuildError, ProjectError
from builder.core.kinds import Flavor, Status
from builder.pipeline.pipeline import BuildSettings, build
from builder.pipeline.plan import make_plan
from builder.pipeline.project_build import build_project
from builder.pipeline.project_plan import PROJECT_CONTENT_LABEL, ProjectPlan
from builder.pipeline.project_set import over
from builder.project.config import load_project
from builder.project.image import base_options, project_plan
from builder.project.lockfile import ProjectLock, asked_of, file_hashes, read_project_lock, write_project_lock
from builder.project.python_set import LOCAL_NO_HASH, NO_HASH, PINS_FILE, PythonPackage, installed_over
from builder.project.settle import open_project
from builder.trust.inventory import Distribution, Inventory

IDENT = "torch2.14.1-cu130-py3.11-debian12"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "project"
REPO = "127.0.0.1:5000/team"
SHA = "a" * 64
OLD_STRING = "not recorded: the hashes of the resolved Python set are not locked yet; the files' sha256 are"
TOML = '[project]\nname = "my-model"\n\n[dependencies]\nrequirements = ["requirements.txt"]\n'
SET = (
    PythonPackage(name="numpy", version="2.3.1", sha256=SHA),
    PythonPackage(name="tinylocal", version="0.1.0", sha256=LOCAL_NO_HASH, local="file:///tmp/req/0"),
    PythonPackage(name="zipp", version="3.20.0", sha256=NO_HASH),
)


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "my-model"
    root.mkdir()
    monkeypatch.chdir(root)
    (root / "requirements.txt").write_text("numpy\n")
    (root / "torchyard.toml").write_text(TOML)
    return root


def lock_of(root: Path, python_set: str | tuple[PythonPackage, ...] = OLD_STRING) -> ProjectLock:
    config = load_project(root / "torchyard.toml")
    return ProjectLock(combination=IDENT, torch="2.14.1+cu130", variant="cu130", python="3.11", os="debian12",
                       platform="linux/amd64", archs=(), resolved_for="the RTX 4090", asked=asked_of(config),
                       files=file_hashes(config), python_set=python_set)  # fmt: skip


def planned(root: Path) -> ProjectPlan:
    opts = options(requirements=requirements((root / "requirements.txt").read_text(), root))
    base = make_plan(matrix(), combination(IDENT), base_options(opts))
    return project_plan(load_project(root / "torchyard.toml"), base, Flavor.RUNTIME, opts)


def dist(name: str, version: str, sha256: str | None = None, local: str | None = None) -> Distribution:
    return Distribution(name=name, version=version, license=None, sha256=sha256, local=local)


def inventory(*dists: Distribution) -> Inventory:
    return Inventory(dpkg=None, distributions=dists, stack={}, python="3.11.2")


# -- the lock's text -------------------------------------------------------------------------------------------


def test_a_recorded_set_is_written_one_sorted_line_a_package_and_read_back(folder: Path) -> None:
    path = folder / "torchyard.lock"
    write_project_lock(path, lock_of(folder, SET))
    text = path.read_text()
    start = text.index("python_set = [")
    assert text[start : text.index("]\n", start) + 2].splitlines()[1:] == [
        f'  {{ name = "numpy", version = "2.3.1", sha256 = "{SHA}" }},',
        f'  {{ name = "tinylocal", version = "0.1.0", sha256 = "{LOCAL_NO_HASH}", local = "file:///tmp/req/0" }},',
        f'  {{ name = "zipp", version = "3.20.0", sha256 = "{NO_HASH}" }},',
        "]",
    ]
    assert read_project_lock(path) == lock_of(folder, SET)
    write_project_lock(path, lock_of(folder, ()))  # nothing over the base: recorded, and empty
    assert read_project_lock(path) == lock_of(folder, ())


def test_a_lock_written_before_sets_were_recorded_still_reads(folder: Path) -> None:
    path = folder / "torchyard.lock"
    write_project_lock(path, lock_of(folder))
    assert f"\npython_set = {json.dumps(OLD_STRING)}\n" in path.read_text()
    found = read_project_lock(path)
    assert found is not None and found.python_set == OLD_STRING


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('{ name = "numpy", version = "2.3.1", sha256 = "abc" }', "'abc' is not a sha256 (or 'not recorded: why')"),
        ('{ name = "numpy", version = "2.3.1" }', "expected the keys name, version, sha256 (and local), found "
                                                  "['name', 'version']"),
        ('"numpy==2.3.1"', "expected { name, version, sha256 }, found 'numpy==2.3.1'"),
    ],
)  # fmt: skip
def test_a_damaged_set_is_one_located_line(folder: Path, entry: str, message: str) -> None:
    path = folder / "torchyard.lock"
    write_project_lock(path, lock_of(folder, SET[:1]))
    text = path.read_text()
    start = text.index("  { name")
    path.write_text(text[:start] + f"  {entry},\n" + text[text.index("]\n", start) :])
    with pytest.raises(ProjectError) as caught:
        read_project_lock(path)
    assert str(caught.value) == f"torchyard.lock:13: python_set: {message}"


def test_an_unsorted_set_is_refused(folder: Path) -> None:
    path = folder / "torchyard.lock"
    write_project_lock(path, lock_of(folder, (SET[2], SET[0])))
    with pytest.raises(ProjectError, match=r"torchyard.lock:13: python_set: its packages are not sorted by name"):
        read_project_lock(path)


# -- what is recorded -------------------------------------------------------------------------------------------


def test_the_set_is_what_the_image_holds_over_the_base_sorted_with_its_hashes() -> None:
    base = (dist("torch", "2.14.1+cu130"), dist("numpy", "2.2.0"))
    image = (dist("Zipp", "3.20.0"), dist("torch", "2.14.1+cu130"), dist("numpy", "2.3.1", SHA),
             dist("tinylocal", "0.1.0", local="file:///tmp/req/0"))  # fmt: skip
    assert installed_over(base, image) == SET
    assert over(inventory(*base), inventory(*image)).distributions == image[0:1] + image[2:]


# -- a build of a lock with a set: pinned ------------------------------------------------------------------------


def test_a_recorded_set_pins_the_install_and_is_in_the_content_id(folder: Path) -> None:
    unpinned = planned(folder)  # no lock: nothing pinned, nothing recorded
    assert unpinned.record_set is None and PINS_FILE not in dict(unpinned.context_files)
    write_project_lock(folder / "torchyard.lock", lock_of(folder, SET))
    p = planned(folder)
    assert p.record_set is None
    assert dict(p.context_files)[PINS_FILE].decode().splitlines()[1:] == ["numpy==2.3.1", "zipp==3.20.0"]
    assert f"/opt/venv/bin/pip install -c /opt/torchyard/constraints.txt -c /opt/torchyard/{PINS_FILE} -r " \
        "/opt/torchyard/requirements.txt" in p.dockerfile  # fmt: skip
    assert f"COPY requirements.txt {PINS_FILE} /opt/torchyard/" in p.dockerfile
    assert p.content_id != unpinned.content_id
    described = replace(lock_of(folder, (replace(SET[0], sha256="b" * 64), *SET[1:])), resolved_for="a laptop")
    write_project_lock(folder / "torchyard.lock", described)  # what only describes the set: the same image
    assert planned(folder).content_id == p.content_id
    write_project_lock(folder / "torchyard.lock", lock_of(folder, (replace(SET[0], version="2.3.2"), *SET[1:])))
    assert planned(folder).content_id != p.content_id  # another version: another image
    write_project_lock(folder / "torchyard.lock", lock_of(folder, SET[1:2]))  # only a local install: no pins
    assert planned(folder).content_id == unpinned.content_id


def test_a_set_made_for_other_requirement_files_is_refused(folder: Path) -> None:
    write_project_lock(folder / "torchyard.lock", lock_of(folder, SET))
    (folder / "requirements.txt").write_text("numpy\nzipp\n")
    with pytest.raises(ProjectError, match=r"torchyard.lock no longer fits .*: requirements.txt changed \(sha256 "):
        open_project(matrix(), folder / "torchyard.toml")
    assert planned(folder).record_set is None and PINS_FILE not in dict(planned(folder).context_files)


# -- a build of a lock without a set: resolved afresh, recorded -------------------------------------------------


def engine_for(p: ProjectPlan) -> FakeEngine:
    contents = contents_of(p.base) | {"project": Contents(dict(p.base.target(Flavor.RUNTIME).labels), {})}
    return FakeEngine(contents, registry=FakeRegistry())


def settings(tmp_path: Path) -> BuildSettings:
    return BuildSettings(repo=REPO, flavors=(Flavor.RUNTIME,), out_dir=tmp_path / "ctx")


def contents(monkeypatch: pytest.MonkeyPatch, p: ProjectPlan, image: tuple[Distribution, ...]) -> list[str]:
    """The inventories the recorder reads (the base's, the image's); the images it read them from."""
    read: list[str] = []
    base_ref = p.base_ref(REPO)

    def fake(engine: object, ref: str, stack: object = None) -> Inventory:
        read.append(ref)
        return inventory(dist("torch", "2.14.1+cu130")) if ref == base_ref else inventory(*image)

    monkeypatch.setattr("builder.pipeline.project_set.read_inventory", fake)
    return read


def test_a_lock_without_a_set_is_built_afresh_and_records_it(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = folder / "torchyard.lock"
    write_project_lock(path, lock_of(folder))
    p, log = planned(folder), list[str]()
    assert p.record_set is not None
    read = contents(monkeypatch, p, (dist("torch", "2.14.1+cu130"), dist("numpy", "2.3.1", SHA)))
    engine = engine_for(p)
    build(engine, p.base, settings(tmp_path), log.append, engine.registry)
    engine.tag(engine.tags[p.base_ref(REPO)], p.ref(REPO))  # an image of this content id: not reused
    engine.images[engine.tags[p.ref(REPO)]].labels[PROJECT_CONTENT_LABEL] = p.content_id
    outcome = build_project(engine, p, settings(tmp_path), log.append)
    assert outcome.status is Status.BUILT
    assert read == [p.base_ref(REPO), outcome.image_id]
    assert log[-1] == "[project] recorded 1 package(s) over the base in torchyard.lock's python_set"
    found = read_project_lock(path)
    assert found == lock_of(folder, (PythonPackage(name="numpy", version="2.3.1", sha256=SHA),))
    pinned = planned(folder)
    assert pinned.record_set is None and pinned.content_id != p.content_id  # the next build: pinned, once


def test_a_set_that_cannot_be_read_leaves_the_lock_as_it_was(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = folder / "torchyard.lock"
    write_project_lock(path, lock_of(folder))
    p, log = planned(folder), list[str]()

    def fails(engine: object, ref: str, stack: object = None) -> Inventory:
        raise BuildError(f"reading the contents of {ref} for its SBOM exited 1: boom")

    monkeypatch.setattr("builder.pipeline.project_set.read_inventory", fails)
    engine = engine_for(p)
    build(engine, p.base, settings(tmp_path), log.append, engine.registry)
    assert build_project(engine, p, settings(tmp_path), log.append).status is Status.BUILT
    assert log[-1].startswith("[project] python_set not recorded in torchyard.lock: reading the contents of ")
    assert read_project_lock(path) == lock_of(folder)


def test_a_lock_changed_during_the_build_is_left_alone(folder: Path) -> None:
    path = folder / "torchyard.lock"
    write_project_lock(path, lock_of(folder))
    p = planned(folder)
    assert p.record_set is not None
    write_project_lock(path, replace(lock_of(folder), resolved_for="another machine"))
    said = p.record_set(inventory(), inventory(dist("numpy", "2.3.1")))
    assert said == "python_set not recorded: torchyard.lock changed during the build"
    assert read_project_lock(path) == replace(lock_of(folder), resolved_for="another machine")


def test_the_example_ships_its_recorded_set_and_render_pins_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/project's lock records tabulate (what its docker-tier build records); render installs it pinned."""
    copy = tmp_path / "project"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("build", "__pycache__"))
    monkeypatch.chdir(copy)
    monkeypatch.delenv(env.ANY_HOST, raising=False)
    lock = read_project_lock(copy / "torchyard.lock")
    assert lock is not None and lock.python_set == (PythonPackage(name="tabulate", version="0.10.0", sha256=NO_HASH),)
    code, _, err = cli(capsys, "render", "--no-host-settings", "-o", "out")
    assert code == 0, err
    assert (copy / "out" / "project" / PINS_FILE).read_text().splitlines()[1:] == ["tabulate==0.10.0"]
    assert f"-c /opt/torchyard/{PINS_FILE} -r /opt/torchyard/requirements.txt" in \
        (copy / "out" / "project" / "Dockerfile").read_text()  # fmt: skip
    assert (copy / "torchyard.lock").read_bytes() == (EXAMPLE / "torchyard.lock").read_bytes()
