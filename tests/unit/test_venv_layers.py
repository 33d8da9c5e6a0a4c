"""The venv's layers: the plan (builder/render/layers.py) and the build stage's splitter (builder/image/venv_layers.py),
run here on venvs made of files (no process: the bytecode step is compileall in this interpreter)."""

from __future__ import annotations

import compileall
import hashlib
import json
import os
import py_compile
import shutil
import stat
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from render_kit import combination, matrix, plan

from builder.image import venv_layers as vl
from builder.render.layers import CUDA_RUNTIME_SLOTS, PINNED_SLOTS, layer_plan
from builder.smoke.manifest import Manifest

CU130 = "torch2.14.1-cu130-py3.11-debian12"

# --- the plan ----------------------------------------------------------------------------------------------


def test_the_plan_orders_the_groups_from_the_most_shared_to_the_least() -> None:
    p = layer_plan(combination(CU130))
    assert [g.name for g in p.groups] == ["venv", "cuda-runtime", "pinned", "cudnn", "nccl", "torch", "packages"]
    assert [name for name, _ in p.slots()][:6] == ["venv", "cuda-runtime.1", "cuda-runtime.2", "cuda-runtime.3",
                                                   "cuda-runtime.4", "pinned.1"]  # fmt: skip
    assert len(p.slots()) == 1 + CUDA_RUNTIME_SLOTS + PINNED_SLOTS + 4
    # the pins come from matrix.toml's variant (the wheel's Requires-Dist, recorded with their sources)
    label = p.label().split()
    assert label[1] == "cuda-runtime.1=cuda-toolkit==13.0.3"
    assert "cudnn=9.24.0.43" in label and "nccl=2.30.7" in label and "torch=2.14.1" in label
    assert label[-1] == "packages"


def test_a_cuda12_wheel_pins_its_runtime_by_the_cu12_name_and_the_cpu_variant_has_no_cuda_groups() -> None:
    cu124 = layer_plan(combination("torch2.5.1-cu124-py3.11-debian12"))
    runtime = next(g for g in cu124.groups if g.name == "cuda-runtime")
    assert runtime.match == "nvidia\\-cuda\\-runtime\\-cu12" and runtime.pin == "nvidia-cuda-runtime-cu12==12.4.127"
    cpu = layer_plan(combination("torch2.14.1-cpu-py3.11-debian12"))
    assert [(g.name, g.slots) for g in cpu.groups] == [("venv", 1), ("pinned", 1), ("torch", 1), ("packages", 1)]


def test_the_order_agrees_with_the_matrix_the_cuda_runtime_pin_moves_least() -> None:
    """Per CUDA variant, across the torch releases matrix.toml records: the CUDA runtime pin takes no more
    distinct values than cuDNN's or NCCL's, which is why its layers come first."""
    values: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for release in matrix().torch:
        for v in release.variants:
            for key in ("cuda_runtime", "cudnn", "nccl"):
                if v.cuda is not None and getattr(v, key) is not None:
                    values[v.name][key].add(str(getattr(v, key)))
    checked = 0
    for variant, found in values.items():
        if {"cuda_runtime", "cudnn", "nccl"} <= set(found):
            assert len(found["cuda_runtime"]) <= min(len(found["cudnn"]), len(found["nccl"])), variant
            checked += 1
    assert checked >= 5


def test_the_plan_reaches_the_image_as_a_context_file_a_label_and_the_manifest() -> None:
    p = plan(CU130)
    files = dict(p.context_files)
    sent = json.loads(files["venv-layers.json"])
    assert [g["name"] for g in sent["groups"]] == [g.name for g in layer_plan(p.combination).groups]
    assert files["venv_layers.py"] == Path(vl.__file__).read_bytes()
    target = p.targets[0]
    assert dict(target.labels)["io.torchyard.layers"] == layer_plan(p.combination).label()
    layers = target.manifest.layers
    assert [layer.name for layer in layers] == [name for name, _ in layer_plan(p.combination).slots()]
    assert all(layer.packages == () for layer in layers)  # the build fills them in
    copies = [line for line in p.dockerfile.splitlines() if line.startswith("COPY --from=build /layers/")]
    assert copies == [f"COPY --from=build /layers/{i:02d}/ /" for i in range(len(layers))]


def test_the_manifest_keeps_the_layers_through_json() -> None:
    manifest = plan(CU130).targets[0].manifest
    data = manifest.to_dict()
    data["layers"][3]["packages"] = ["nvidia-cublas==13.1.1.3"]
    read = Manifest.from_dict(data)
    assert read.layers[3].packages == ("nvidia-cublas==13.1.1.3",) and read.layers[3].name == "cuda-runtime.3"
    assert Manifest.from_dict({"layers": [{"rule": "no name"}, "junk"]}).layers == ()


# --- requirements, layout --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requirement", "operators", "name"),
    [
        ('nvidia-cudnn-cu13==9.24.0.43; platform_system == "Linux"', vl.EXACT, "nvidia-cudnn-cu13"),
        ("cuda-toolkit[cublas,cudart]==13.0.3", vl.EXACT, "cuda-toolkit"),
        ("nvidia_cublas==13.1.1.3.*; extra == 'cublas'", vl.EXACT, "nvidia-cublas"),
        ("torch (>=2.14.0)", vl.EXACT, None),
        ("triton~=3.8.0; python_version < '3.15'", vl.EXACT, None),
        ("triton~=3.8.0; python_version < '3.15'", vl.PINNED, "triton"),
        ("nvidia-nvjitlink<14,>=13.0.88", vl.PINNED, None),
        ("filelock", vl.PINNED, None),
        ("numpy!=1.0", vl.PINNED, None),
    ],
)
def test_a_pin_is_one_exact_clause(requirement: str, operators: tuple[str, ...], name: str | None) -> None:
    assert vl.pinned_name(requirement, operators) == name


def test_members_take_a_slot_each_while_they_fit_then_contiguous_runs_with_the_smallest_largest() -> None:
    assert vl.layout([("a", 5), ("b", 1)], 4) == [["a"], ["b"], [], []]
    assert vl.layout([("a", 5), ("b", 1), ("c", 1), ("d", 5)], 2) == [["a", "b"], ["c", "d"]]
    assert vl.layout([("a", 9), ("b", 1), ("c", 1), ("d", 1)], 2) == [["a"], ["b", "c", "d"]]
    assert vl.layout([("a", 1)] * 7, 3) == [["a"] * 2, ["a"] * 2, ["a"] * 3]  # ties: the earliest cuts


# --- the splitter on a venv made of files -----------------------------------------------------------------

SITE = "lib/python3.11/site-packages"
TORCH_REQUIRES = (
    'cuda-toolkit[cublas]==13.0.3; platform_system == "Linux"',
    "nvidia-cudnn-cu13==9.24.0.43",
    "nvidia-nccl-cu13==2.30.7",
    "nvidia-cusparselt-cu13==0.8.1",
    "triton~=3.8.0",
    "filelock",
)
DISTS = {
    "torch": ("2.14.1", TORCH_REQUIRES),
    "cuda_toolkit": ("13.0.3", ("nvidia-cublas==13.1.1.3.*; extra == 'cublas'", "nvidia-nvjitlink<14,>=13.0.88")),
    "nvidia_cublas": ("13.1.1.3", ()),
    "nvidia_nvjitlink": ("13.0.88", ()),
    "nvidia_cudnn_cu13": ("9.24.0.43", ("nvidia-cublas",)),
    "nvidia_nccl_cu13": ("2.30.7", ()),
    "nvidia_cusparselt_cu13": ("0.8.1", ()),
    "triton": ("3.8.0", ()),
    "filelock": ("3.20.0", ()),
    "torchvision": ("0.29.1", ("torch>=2.14.0",)),
}


def make_venv(root: Path, order: list[str], skew: int) -> Path:
    """A venv as an installer leaves it: links, pyvenv.cfg, an empty include/, and each distribution's package
    (a module and a payload), dist-info (METADATA, RECORD) and, for torch, a console script. `order` and `skew`
    change what a real install changes from one run to the next: creation order and times."""
    venv = root / "opt" / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "include" / "python3.11").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to("/usr/bin/python3")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "lib64").symlink_to("lib")
    site = venv / SITE
    site.mkdir(parents=True)
    for n, module in enumerate(order):
        version, requires = DISTS[module]
        files = {f"{module}/__init__.py": f"V = '{version}'\nS = {{'x', 'y'}}\n", f"{module}/lib.so": module * 99}
        if module == "torch":
            files["../../../bin/torchrun"] = "#!/opt/venv/bin/python\n"
        info = f"{module}-{version}.dist-info"
        files[f"{info}/METADATA"] = f"Name: {module}\nVersion: {version}\n" + "".join(
            f"Requires-Dist: {r}\n" for r in requires
        )
        for rel, text in files.items():
            path = Path(os.path.normpath(site / rel))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            os.utime(path, (1_700_000_000 + skew * 1000 + n, 1_700_000_000 + skew * 1000 + n))
        (site / info / "RECORD").write_text("".join(f"{rel},,\n" for rel in files) + f"{info}/RECORD,,\n")
    return venv


def in_process_compile(site: str) -> None:
    for root, _, names in os.walk(site):
        for name in names:
            if name.endswith(".py"):
                os.utime(os.path.join(root, name), (0, 0))
    compileall.compile_dir(site, quiet=2, force=True, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)


def split(tmp: Path, order: list[str], skew: int) -> tuple[dict[str, Any], Path]:
    """The splitter's map, and the folder holding each layer's venv (OUT/NN/<venv path>/... -> OUT/NN/...)."""
    venv = make_venv(tmp / "root", order, skew)
    groups = json.loads(layer_plan(combination(CU130)).to_json())["groups"]
    out = tmp / "layers"
    made = vl.split({"venv": str(venv), "groups": groups}, str(out), compile_step=in_process_compile)
    for layer in [p for p in out.iterdir() if p.is_dir()]:  # the trees mirror the venv's path: look below it
        inside = layer / str(venv)[1:]
        if inside.exists():
            assert {p.stat().st_mtime for p in inside.parents if layer in p.parents or p == layer} == {0}
        else:  # an empty slot: its folder made here as the layer would hold it (mtime 0, not the clock's now,
            assert list(layer.iterdir()) == []  # which differed between the two splits across a second's edge)
            inside.mkdir(parents=True)
            os.utime(inside, (0, 0))
        inside.rename(out / f"{layer.name}.venv")
    return made, out


def tree(root: Path) -> dict[str, tuple[int, int, int, int, str]]:
    """Every entry under root: (mode, uid, mtime, size, content digest) -- what a layer tar records."""
    found = {}
    for path in sorted([root, *root.rglob("*")]):
        info = path.lstat()
        data = (
            b""
            if stat.S_ISDIR(info.st_mode)
            else (os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
        )
        found[str(path.relative_to(root))] = (
            info.st_mode,
            info.st_uid,
            int(info.st_mtime),
            info.st_size,
            hashlib.sha256(data).hexdigest(),
        )
    return found  # fmt: skip


def test_each_distribution_lands_in_the_layer_of_what_pins_it(tmp_path: Path) -> None:
    made, out = split(tmp_path, list(DISTS), 0)
    packages = {layer["name"]: layer["packages"] for layer in made["layers"]}
    assert packages["cuda-runtime.1"] == ["cuda-toolkit==13.0.3"]
    assert packages["cuda-runtime.2"] == ["nvidia-cublas==13.1.1.3"]  # pinned by cuda-toolkit, == X.*
    assert packages["pinned.1"] == ["nvidia-cusparselt-cu13==0.8.1"] and packages["pinned.2"] == ["triton==3.8.0"]
    assert packages["cudnn"] == ["nvidia-cudnn-cu13==9.24.0.43"] and packages["nccl"] == ["nvidia-nccl-cu13==2.30.7"]
    assert packages["torch"] == ["torch==2.14.1"]
    # a range pin (nvjitlink) and what nothing pins go with the rest
    assert packages["packages"] == ["filelock==3.20.0", "nvidia-nvjitlink==13.0.88", "torchvision==0.29.1"]
    assert packages["venv"] == [] and packages["pinned.3"] == []
    index = {layer["name"]: f"{i:02d}" for i, layer in enumerate(made["layers"])}
    torch = out / f"{index['torch']}.venv"
    assert (torch / "bin/torchrun").is_file()  # RECORD's ../../../bin/torchrun went with torch
    assert (torch / SITE / "torch/__pycache__/__init__.cpython-311.pyc").is_file()  # and its bytecode
    venv = out / f"{index['venv']}.venv"
    assert (venv / "bin/python").is_symlink() and (venv / "lib64").is_symlink() and (venv / "pyvenv.cfg").is_file()
    assert (venv / "include/python3.11").is_dir()  # empty from the start: kept
    assert not (venv / SITE / "torch").exists()  # emptied by the moves: not repeated in the venv layer
    left = [p for p in (tmp_path / "root").rglob("*") if not p.is_dir()]
    assert left == [], "every file of the venv is in a layer"


def test_the_trees_depend_on_the_files_only_not_on_when_or_in_which_order_they_were_installed(tmp_path: Path) -> None:
    _, first = split(tmp_path, list(DISTS), 0)
    first = first.rename(tmp_path / "first")
    shutil.rmtree(tmp_path / "root")  # the same path again (bytecode names its source's path)
    _, second = split(tmp_path, list(reversed(DISTS)), 7)
    names = sorted(p.name for p in first.iterdir() if p.name.endswith(".venv"))
    assert len(names) == len(layer_plan(combination(CU130)).slots())
    for layer in names:
        assert tree(first / layer) == tree(second / layer), layer
    entries = tree(first / "00.venv")
    assert {mtime for _, _, mtime, _, _ in entries.values()} == {0}
    assert {uid for _, uid, _, _, _ in entries.values()} == {os.getuid()} or os.getuid() == 0


def test_the_bytecode_records_mtime_0(tmp_path: Path) -> None:
    _, out = split(tmp_path, list(DISTS), 3)
    pyc = next(out.rglob("torch/__pycache__/*.pyc")).read_bytes()
    assert int.from_bytes(pyc[4:8], "little") == 0  # timestamp pycs (flags 0) ...
    assert int.from_bytes(pyc[8:12], "little") == 0  # ... of a source whose mtime is 0


def test_the_manifests_get_each_layers_packages_and_a_wrong_name_stops_the_build(tmp_path: Path) -> None:
    made, _ = split(tmp_path / "s", list(DISTS), 0)
    manifest = plan(CU130).targets[0].manifest
    (tmp_path / "manifest-runtime.json").write_text(manifest.to_json())
    vl.fill_manifests(made, str(tmp_path))
    filled = Manifest.from_json((tmp_path / "manifest-runtime.json").read_text())
    assert {layer.name: layer.packages for layer in filled.layers}["cudnn"] == ("nvidia-cudnn-cu13==9.24.0.43",)
    assert filled.id == manifest.id and filled.stack() == manifest.stack()
    made["layers"] = made["layers"][:-1]
    with pytest.raises(SystemExit, match="names a layer 'packages' the build did not make"):
        vl.fill_manifests(made, str(tmp_path))


def test_uv_gets_the_indexes_of_pip_conf_quoted_for_eval(tmp_path: Path) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\nindex-url = https://u:p$w'd@pypi.corp/simple\nextra-index-url = https://a/s https://b/s\n"
    )
    assert vl.uv_env(str(conf)) == (
        "export UV_DEFAULT_INDEX='https://u:p$w'\"'\"'d@pypi.corp/simple'\nexport UV_INDEX='https://a/s https://b/s'"
    )
    conf.write_text("[global]\n")
    assert vl.uv_env(str(conf)) == ""
