"""builder/image/venv_layers.py as the build stage runs it (issue 24: mutation testing found its command line and
its bytecode step without a unit test): each command, its usage line, the bytecode step's compileall run (at the
process seam: compileall runs here, in this interpreter), and which files are manifests."""

from __future__ import annotations

import compileall
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from render_kit import combination, plan
from test_venv_layers import CU130, DISTS, SITE, make_venv

from builder.image import venv_layers as vl
from builder.render.layers import layer_plan
from builder.smoke.manifest import Manifest


class CompileallHere:
    """subprocess.run as the bytecode step calls it: `python -m compileall ARGS` run in this interpreter (one
    worker: -j 0 would start processes), the argv and environment kept."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict[str, str], bool]] = []

    def __call__(self, argv: list[str], *, env: dict[str, str], check: bool) -> None:
        self.calls.append((argv, env, check))
        assert argv[:3] == [sys.executable, "-m", "compileall"]
        args = list(argv[3:])
        if "-j" in args:
            assert int(args[args.index("-j") + 1]) >= 0  # as compileall's own parser would read it
            args[args.index("-j") + 1] = "1"
        saved = sys.argv
        sys.argv = ["compileall", *args]
        try:
            compileall.main()  # type: ignore[attr-defined]  # (typeshed lists no main)
        finally:
            sys.argv = saved


@pytest.fixture
def compile_here(monkeypatch: pytest.MonkeyPatch) -> CompileallHere:
    fake = CompileallHere()
    monkeypatch.setattr(subprocess, "run", fake)  # the module venv_layers calls
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # the build's, if it sets one: not for compileall
    monkeypatch.setenv("PYTHONHASHSEED", "random")  # the caller's: the step sets its own
    return fake


def test_the_bytecode_step_makes_timestamp_pycs_of_mtime_0_sources_with_a_fixed_hash_seed(
    tmp_path: Path, compile_here: CompileallHere
) -> None:
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "m.py").write_text("S = {'a', 'b'}\n")
    (site / "pkg" / "data.txt").write_text("x")
    os.utime(site / "pkg" / "data.txt", (5, 5))
    outside = tmp_path / "elsewhere.py"  # a link to a source outside the venv: the link changes, not its target
    outside.write_text("X = 1\n")
    os.utime(outside, (7, 7))
    (site / "pkg" / "linked.py").symlink_to(outside)
    vl.compile_bytecode(str(site))
    assert (site / "pkg" / "m.py").stat().st_mtime == 0 and (site / "pkg" / "data.txt").stat().st_mtime == 5
    assert outside.stat().st_mtime == 7 and (site / "pkg" / "linked.py").lstat().st_mtime == 0
    pyc = next((site / "pkg" / "__pycache__").glob("m.*.pyc")).read_bytes()
    assert int.from_bytes(pyc[4:8], "little") == 0 and int.from_bytes(pyc[8:12], "little") == 0
    ((argv, env, check),) = compile_here.calls
    assert argv[-1] == str(site) and check is False  # a module that does not compile stays source only
    assert env["PYTHONHASHSEED"] == "0" and "SOURCE_DATE_EPOCH" not in env and env["PATH"] == os.environ["PATH"]


def _plan_file(tmp_path: Path) -> tuple[Path, Path]:
    venv = make_venv(tmp_path / "root", list(DISTS), 0)
    groups = json.loads(layer_plan(combination(CU130)).to_json())["groups"]
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps({"venv": str(venv), "groups": groups}))
    return plan_path, venv


def test_split_writes_the_map_and_prints_a_line_per_layer(
    tmp_path: Path, compile_here: CompileallHere, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_path, venv = _plan_file(tmp_path)
    out = tmp_path / "out"
    assert vl.main(["split", str(plan_path), str(out)]) == 0
    layer_map: dict[str, Any] = json.loads((out / "layers.json").read_text())
    assert layer_map["venv"] == str(venv) and layer_map["schema"] == vl.SCHEMA
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == len(layer_map["layers"])
    by_name = {layer["name"]: layer for layer in layer_map["layers"]}
    assert f"layer torch: {by_name['torch']['bytes'] / 1e6:.1f} MB, torch==2.14.1" in printed
    assert "layer pinned.3: 0.0 MB, -" in printed
    rest = ", ".join(by_name["packages"]["packages"])
    assert rest.count(", ") == 2 and f"layer packages: {by_name['packages']['bytes'] / 1e6:.1f} MB, {rest}" in printed
    assert (out / "layers.json").read_text().endswith("}\n")
    assert [c[0][-1] for c in compile_here.calls] == [str(venv / SITE)]


def test_manifest_fills_only_the_manifests_of_the_folder(tmp_path: Path, compile_here: CompileallHere) -> None:
    plan_path, _ = _plan_file(tmp_path)
    assert vl.main(["split", str(plan_path), str(tmp_path / "out")]) == 0
    folder = tmp_path / "context"
    folder.mkdir()
    manifest = plan(CU130).targets[0].manifest
    (folder / "manifest-runtime.json").write_text(manifest.to_json())
    others = {"layers.json": '{"not": "a manifest"}', "manifest-notes.txt": "notes", "notes.json": "[1]"}
    for name, text in others.items():
        (folder / name).write_text(text)
    assert vl.main(["manifest", str(tmp_path / "out" / "layers.json"), str(folder)]) == 0
    filled = Manifest.from_json((folder / "manifest-runtime.json").read_text())
    assert {layer.name: layer.packages for layer in filled.layers}["torch"] == ("torch==2.14.1",)
    assert {name: (folder / name).read_text() for name in others} == others
    assert (folder / "manifest-runtime.json").read_text().endswith("}\n")


def test_uv_env_prints_the_exports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://pypi.corp/simple\n")
    assert vl.main(["uv-env", str(conf)]) == 0
    assert capsys.readouterr().out == "export UV_DEFAULT_INDEX=https://pypi.corp/simple\n"


@pytest.mark.parametrize("argv", [[], ["split", "plan"], ["manifest", "a", "b", "c"], ["uv-env"], ["other", "a"]])
def test_anything_else_is_the_usage_line_and_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert vl.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "usage: venv_layers.py split PLAN OUT | manifest MAP DIR | uv-env PIP_CONF\n"


def test_a_venv_without_exactly_one_site_packages_stops_the_split(tmp_path: Path) -> None:
    lib = tmp_path / "venv" / "lib"
    (lib / "python3.11").mkdir(parents=True)
    with pytest.raises(SystemExit) as none:
        vl.site_packages(str(tmp_path / "venv"))
    assert (
        str(none.value)
        == f"venv_layers: expected one {lib}/python*/site-packages, found ['{lib}/python3.11/site-packages']"
    )
    (lib / "python3.11" / "site-packages").mkdir()
    (lib / "python3.12" / "site-packages").mkdir(parents=True)
    with pytest.raises(SystemExit, match=r"expected one .*/python\*/site-packages, found \[.*python3\.11.*python3\.12"):
        vl.site_packages(str(tmp_path / "venv"))


def test_metadata_with_a_byte_that_is_not_utf8_is_still_read(tmp_path: Path) -> None:
    info = tmp_path / "odd-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: odd\nVersion: 1.0\nSummary: caf\xe9\n")
    assert [(d.name, d.version) for d in vl.read_dists(str(tmp_path)).values()] == [("odd", "1.0")]
