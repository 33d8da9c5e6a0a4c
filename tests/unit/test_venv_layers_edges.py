"""builder/image/venv_layers.py where mutation testing found no test holding it (issue 24): which distributions a
group chooses (closure by default, a pins group's owner and its own pins), what each layer's map entry counts,
RECORD lines that name missing files or files outside the venv, a plan whose unowned group is not first or is
absent, and what the layer trees keep (directory modes) and lose (owners, times) of the venv."""

from __future__ import annotations

import csv
import itertools
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from render_kit import combination
from test_venv_layers import CU130, DISTS, SITE, in_process_compile, make_venv

from builder.image import venv_layers as vl
from builder.render.layers import layer_plan


def dists(**requires: list[str]) -> dict[str, vl.Dist]:
    return {name: vl.Dist(name, "1.0", reqs, []) for name, reqs in requires.items()}


# --- choosing ------------------------------------------------------------------------------------------------


def test_a_dist_group_takes_what_its_matches_pin_exactly_unless_told_not_to() -> None:
    found = dists(a=["b==1", "c>=1"], b=["d==2"], c=[], d=[])
    plan: dict[str, Any] = {"groups": [{"name": "g", "select": "dist", "match": "a"}, {"name": "r", "select": "rest"}]}
    assert vl.choose(plan, found) == {"g": ["a", "b", "d"], "r": ["c"]}
    plan["groups"][0]["closure"] = False
    assert vl.choose(plan, found) == {"g": ["a"], "r": ["b", "c", "d"]}


def test_a_pins_group_takes_what_its_owner_pins_and_what_those_pin_but_never_the_owner() -> None:
    found = dists(torch=["torch[opt]==2.0; extra == 'opt'", "triton~=3.0", "x"], triton=["y==1"], x=[], y=[])
    plan = {"groups": [{"name": "p", "select": "pins", "of": "torch"}, {"name": "r", "select": "rest"}]}
    assert vl.choose(plan, found) == {"p": ["triton", "y"], "r": ["torch", "x"]}


def test_a_pins_group_of_a_distribution_not_installed_is_empty() -> None:
    plan = {"groups": [{"name": "p", "select": "pins", "of": "torch"}, {"name": "r", "select": "rest"}]}
    assert vl.choose(plan, dists(x=["y==1"], y=[])) == {"p": [], "r": ["x", "y"]}


def test_a_closure_goes_on_past_a_distribution_reached_twice() -> None:
    """a pins b, which the group matched too: b is reached twice before what b pins is."""
    found = dists(a=["b==1"], b=["x==1"], x=[])
    plan = {"groups": [{"name": "g", "select": "dist", "match": "a|b"}, {"name": "r", "select": "rest"}]}
    assert vl.choose(plan, found) == {"g": ["a", "b", "x"], "r": []}


def test_what_an_earlier_group_took_is_not_taken_again_by_a_later_closure() -> None:
    found = dists(a=["b==1"], b=["d==2"], d=[], e=[])
    plan = {
        "groups": [
            {"name": "first", "select": "dist", "match": "b|e"},
            {"name": "second", "select": "dist", "match": "a|e"},
            {"name": "r", "select": "rest"},
        ]
    }
    assert vl.choose(plan, found) == {"first": ["b", "d", "e"], "second": ["a"], "r": []}


@pytest.mark.parametrize(
    ("requirement", "name"),
    [("numpy==1.0,!=0.9", None), ("numpy===1.0", "numpy"), ("numpy <=2", None), ("numpy (==1.0)", "numpy")],
)
def test_an_exact_pin_is_one_clause_that_starts_with_double_equals(requirement: str, name: str | None) -> None:
    assert vl.pinned_name(requirement, vl.EXACT) == name


def _reference(members: list[tuple[str, int]], slots: int) -> list[list[str]]:
    """layout by brute force: every way to cut into `slots` non-empty runs; the largest run as small as it can be,
    the last cut as early as it can be, the runs before it laid out the same way."""
    names = [name for name, _ in members]
    if slots == 1:
        return [names]
    sizes = [size for _, size in members]

    def best(count: int, parts: int) -> int:
        cuts = itertools.combinations(range(1, count), parts - 1)
        return min(max(sum(sizes[a:b]) for a, b in zip((0, *c), (*c, count), strict=True)) for c in cuts)

    goal = best(len(members), slots)
    for start in range(slots - 1, len(members)):
        if max(best(start, slots - 1), sum(sizes[start:])) == goal:
            return [*_reference(members[:start], slots - 1), names[start:]]
    raise AssertionError("no layout")


def test_layout_agrees_with_a_brute_force_search() -> None:
    chosen = random.Random(24)
    for _ in range(400):
        count, slots = chosen.randint(1, 7), chosen.randint(1, 4)
        members = [(f"m{i}", chosen.choice([0, 1, 2, 3, 5, 8])) for i in range(count)]
        expected = [[n] for n, _ in members] + [[]] * (slots - count) if count <= slots else _reference(members, slots)
        assert vl.layout(members, slots) == expected, (members, slots)


def test_a_record_with_a_blank_line_and_a_dist_info_without_one_are_read(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "a").mkdir(parents=True)
    (site / "a" / "m.py").write_text("")
    for name in ("a-1.0.dist-info", "b-2.0.dist-info"):
        (site / name).mkdir()
        (site / name / "METADATA").write_text(f"Name: {name[0]}\nVersion: {name[2:5]}\n")
    (site / "a-1.0.dist-info" / "RECORD").write_text("a/m.py,,\n\na-1.0.dist-info/METADATA,,\n")
    found = vl.read_dists(str(site))
    assert sorted(found["a"].files) == sorted(
        [str(site / "a" / "m.py"), str(site / "a-1.0.dist-info" / "METADATA"), str(site / "a-1.0.dist-info" / "RECORD")]
    )
    assert found["b"].files == [str(site / "b-2.0.dist-info" / "METADATA")]


def test_a_record_path_with_a_line_break_in_it_is_read_whole(tmp_path: Path) -> None:
    """RECORD is CSV: a quoted path may hold a carriage return and a line feed (read with newline="")."""
    site = tmp_path / "site"
    (site / "a-1.0.dist-info").mkdir(parents=True)
    (site / "a-1.0.dist-info" / "METADATA").write_text("Name: a\nVersion: 1.0\n")
    odd = site / "a" / "odd\r\nname.txt"
    odd.parent.mkdir()
    odd.write_text("")
    with open(site / "a-1.0.dist-info" / "RECORD", "w", newline="") as handle:
        csv.writer(handle).writerow(["a/odd\r\nname.txt", "", ""])
    assert str(odd) in vl.read_dists(str(site))["a"].files


def test_a_module_s_bytecode_is_its_own_not_that_of_a_module_whose_name_it_begins(tmp_path: Path) -> None:
    """Single-module distributions (six.py, sixer.py) share site-packages/__pycache__."""
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    for name in ("six.cpython-311.pyc", "six.cpython-311.opt-1.pyc", "sixer.cpython-311.pyc", "six.cpython-311.txt"):
        (cache / name).write_text("")
    files = [str(tmp_path / "six.pyi"), str(tmp_path / "six.py"), str(tmp_path / "data" / "x.py")]
    assert vl._with_bytecode(files) == [
        *files,
        str(cache / "six.cpython-311.opt-1.pyc"),
        str(cache / "six.cpython-311.pyc"),
    ]


# --- the split of a venv made of files ---------------------------------------------------------------------


def _split(tmp: Path, groups: list[dict[str, Any]] | None = None, **change: Any) -> tuple[dict[str, Any], Path, Path]:
    """The map, the layers folder and the venv (torchyard's plan for CU130 unless `groups`); `change(venv)` runs
    on the venv before the split."""
    venv = make_venv(tmp / "root", list(DISTS), 0)
    for step in change.values():
        step(venv)
    plan_groups = groups or json.loads(layer_plan(combination(CU130)).to_json())["groups"]
    out = tmp / "layers"
    made = vl.split({"venv": str(venv), "groups": plan_groups}, str(out), compile_step=in_process_compile)
    return made, out, venv


def _held(root: Path) -> list[Path]:
    """What a layer holds that is not a directory: files and links (a link to a directory too)."""
    found = []
    for folder, dirs, names in os.walk(root):
        found += [Path(folder, n) for n in names + [d for d in dirs if Path(folder, d).is_symlink()]]
    return found


def _record_line(venv: Path, dist: str, line: str) -> None:
    record = next((venv / SITE).glob(f"{dist}-*.dist-info")) / "RECORD"
    record.write_text(record.read_text() + line + "\n")


def test_each_layer_s_entry_counts_the_files_it_holds_not_the_ones_its_record_names(tmp_path: Path) -> None:
    outside = tmp_path / "etc" / "outside.conf"  # a RECORD may name a file outside the venv: not the venv's
    outside.parent.mkdir()
    outside.write_text("x")
    made, out, _ = _split(
        tmp_path,
        gone=lambda venv: _record_line(venv, "torch", "torch/gone.so,,"),
        far=lambda venv: _record_line(venv, "filelock", os.path.relpath(outside, venv / SITE) + ",,"),
    )
    by_name = {layer["name"]: layer for layer in made["layers"]}
    assert [layer["group"] for layer in made["layers"]] == [
        group.name for _, group in layer_plan(combination(CU130)).slots()
    ]
    assert by_name["venv"]["files"] == 3  # bin/python, lib64, pyvenv.cfg
    assert by_name["torch"]["files"] == 6  # __init__.py, its pyc, lib.so, bin/torchrun, METADATA, RECORD
    for index, layer in enumerate(made["layers"]):
        held = _held(out / f"{index:02d}")
        assert layer["files"] == len(held), layer["name"]
        assert layer["bytes"] == sum(p.lstat().st_size for p in held if not p.is_dir()), layer["name"]
    assert outside.read_text() == "x"


def test_the_unowned_files_go_to_the_unowned_group_wherever_it_is_or_else_to_the_first_layer(tmp_path: Path) -> None:
    groups: list[dict[str, Any]] = [
        {"name": "torch", "select": "dist", "match": "torch", "closure": False, "slots": 1},
        {"name": "rest", "select": "rest", "slots": 1},
        {"name": "venv", "select": "unowned", "slots": 1},
    ]
    made, out, venv = _split(tmp_path / "last", groups)
    inside = str(venv)[1:]
    assert (out / "02" / inside / "pyvenv.cfg").is_file() and not (out / "00" / inside / "pyvenv.cfg").exists()
    assert [layer["files"] for layer in made["layers"]][2] == 3
    made, out, venv = _split(tmp_path / "none", groups[:2])
    assert (out / "00" / str(venv)[1:] / "pyvenv.cfg").is_file() and made["layers"][0]["files"] == 3 + 6


def test_a_mirrored_directory_keeps_its_mode(tmp_path: Path) -> None:
    made, out, venv = _split(tmp_path, private=lambda venv: os.chmod(venv / SITE / "torch", 0o750))
    index = next(i for i, layer in enumerate(made["layers"]) if layer["name"] == "torch")
    layer = out / f"{index:02d}" / str(venv)[1:]
    assert (layer / SITE / "torch").stat().st_mode & 0o7777 == 0o750
    assert (layer / SITE).stat().st_mode & 0o7777 == 0o755


@pytest.mark.skipif(os.getuid() != 0, reason="the build stage runs as root: only root can give files to uid 0")
def test_every_entry_of_a_layer_belongs_to_root_and_has_mtime_0_a_link_to_a_directory_too(tmp_path: Path) -> None:
    """An unowned file under lib/ (a .pth no RECORD lists) puts lib/ in the venv layer: its lib64 -> lib is then
    a link to a directory there, which os.walk lists with the directories."""

    def install(venv: Path) -> None:
        (venv / SITE / "extra.pth").write_text("/somewhere\n")
        for folder, dirs, names in os.walk(venv):
            for name in [folder, *(os.path.join(folder, n) for n in names + dirs)]:
                os.lchown(name, 1000, 1000)
                os.utime(name, (5, 5), follow_symlinks=False)

    made, out, venv = _split(tmp_path, owners=install)
    assert made["layers"][0]["files"] == 4
    lib64 = out / "00" / str(venv)[1:] / "lib64"
    assert lib64.is_symlink() and lib64.is_dir()
    for index in range(len(made["layers"])):
        for path in (out / f"{index:02d}").rglob("*"):
            info = path.lstat()
            assert (info.st_uid, info.st_gid, int(info.st_mtime)) == (0, 0, 0), path


def test_fill_manifests_returns_the_manifests_it_wrote(tmp_path: Path) -> None:
    (tmp_path / "manifest-a.json").write_text(json.dumps({"layers": [{"name": "torch"}]}))
    (tmp_path / "other.json").write_text("{}")
    layer_map = {"layers": [{"name": "torch", "packages": ["torch==2.14.1"]}]}
    assert vl.fill_manifests(layer_map, str(tmp_path)) == [str(tmp_path / "manifest-a.json")]
