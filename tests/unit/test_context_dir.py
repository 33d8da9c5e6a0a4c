"""The output folder is torchyard's: it writes only there, removes only what it wrote, refuses folders it did
not write, copies extension folders without following links out of them, and renders into one folder at once
are safe."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from render_kit import EXAMPLE_EXTENSION, addone, arch, plan

from builder.core.errors import RenderError, UsageError
from builder.pipeline.context_dir import RECORD, write_context
from builder.pipeline.extension_dir import walk_extension
from builder.pipeline.plan import Plan

CU130 = "torch2.14.1-cu130-py3.11-debian12"


@pytest.fixture
def simple() -> Plan:
    return plan(CU130)


def test_a_record_line_outside_the_folder_is_never_followed(simple: Plan, tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_context(simple, out)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("precious")
    absolute = tmp_path / "absolute.txt"
    absolute.write_text("precious")
    (out / RECORD).write_text(f"../victim\n{absolute}\n..\n.\n/etc/passwd\nsmoke/../../victim\n")
    write_context(simple, out)
    assert (victim / "keep").read_text() == "precious"
    assert absolute.read_text() == "precious"
    assert (out / "Dockerfile").is_file()


def test_a_folder_torchyard_did_not_write_is_refused_unless_forced(simple: Plan, tmp_path: Path) -> None:
    theirs = tmp_path / "project"
    theirs.mkdir()
    (theirs / "Dockerfile").write_text("FROM their-own\n")
    with pytest.raises(UsageError, match=r"a folder torchyard did not write, and not empty \(Dockerfile\)"):
        write_context(simple, theirs)
    assert (theirs / "Dockerfile").read_text() == "FROM their-own\n"
    write_context(simple, theirs, force=True)
    assert (theirs / "Dockerfile").read_text() == simple.dockerfile


def test_a_rerender_removes_what_it_wrote_and_keeps_logs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with_requirements = plan(CU130, requirements="numpy<2\n")
    write_context(with_requirements, out)
    (out / "build-runtime.log").write_text("log")
    assert (out / "requirements.txt").exists()
    write_context(plan(CU130), out)
    assert not (out / "requirements.txt").exists()
    assert (out / "build-runtime.log").read_text() == "log"


def test_renders_into_one_folder_at_the_same_time_all_succeed(simple: Plan, tmp_path: Path) -> None:
    out = tmp_path / "out"
    errors: list[BaseException] = []

    def render() -> None:
        try:
            write_context(simple, out)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=render) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert (out / "Dockerfile").read_text() == simple.dockerfile
    assert not [p for p in out.iterdir() if p.name.startswith(".torchyard-staging-")]


def _extension(tmp_path: Path) -> Path:
    folder = tmp_path / "myext"
    folder.mkdir()
    for path in EXAMPLE_EXTENSION.rglob("*"):
        if path.is_file():
            target = folder / path.relative_to(EXAMPLE_EXTENSION)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return folder


def test_a_link_out_of_an_extension_folder_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    folder = _extension(tmp_path)
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY")
    (folder / "key").symlink_to(secret)
    with pytest.raises(RenderError, match=r"key links to .*id_rsa, outside the folder"):
        walk_extension(folder)
    (folder / "key").unlink()
    (folder / "zero").symlink_to("/dev/zero")
    with pytest.raises(RenderError, match=r"zero links to /dev/zero, outside the folder"):
        walk_extension(folder)


def test_special_files_are_refused_and_a_failed_copy_leaves_nothing(tmp_path: Path) -> None:
    folder = _extension(tmp_path)
    os.mkfifo(folder / "pipe")
    options_plan = None
    with pytest.raises(RenderError, match=r"pipe is a named pipe, not a file to copy"):
        options_plan = plan(CU130, archs=(arch("sm_89"),), extensions=(addone(folder),))
    assert options_plan is None


def test_links_inside_the_folder_are_kept_as_links_and_loops_do_not_recurse(tmp_path: Path) -> None:
    folder = _extension(tmp_path)
    (folder / "csrc" / "again").symlink_to("..")  # a loop, if links were followed
    (folder / "readme").symlink_to("setup.py")
    nodes = {n.rel: n for n in walk_extension(folder)}
    assert (nodes["csrc/again"].kind, nodes["csrc/again"].target) == ("link", "..")
    assert (nodes["readme"].kind, nodes["readme"].target) == ("link", "setup.py")
    p = plan(CU130, archs=(arch("sm_89"),), extensions=(addone(folder),))
    out = tmp_path / "out"
    write_context(p, out)
    assert os.readlink(out / "ext" / "myext" / "readme") == "setup.py"


def test_the_content_hash_covers_the_extension_files(tmp_path: Path) -> None:
    folder = _extension(tmp_path)
    before = plan(CU130, archs=(arch("sm_89"),), extensions=(addone(folder),)).content_hash
    (folder / "setup.py").write_text((folder / "setup.py").read_text() + "\n# changed\n")
    after = plan(CU130, archs=(arch("sm_89"),), extensions=(addone(folder),)).content_hash
    assert before != after
