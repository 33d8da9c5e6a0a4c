"""An image's inventory (builder/image/inventory.py) read in this process, as `python inventory.py` reads it inside
an image: every distribution on a sys.path of folders laid out here (the first of a name winning), torch's own
answers from a stand-in torch module, the dpkg status file the module is pointed at, and the names made canonical."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from builder.image import inventory

EXECUTABLE = "/opt/venv/bin/python"
COPYRIGHT = Path(__file__).resolve().parent / "data" / "copyright"
SHA = "ab" * 32


def _dist(site: Path, folder: str, metadata: str, direct_url: dict[str, Any] | None = None) -> None:
    info = site / f"{folder}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\n{metadata}", encoding="utf-8")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url), encoding="utf-8")


def _sys_path(tmp_path: Path) -> list[str]:
    """Three sys.path entries: the first has Torch; the second a torch of another version (shadowed, as pip's
    freeze shadows it) and a distribution without a name; the third Six and Zope.Interface."""
    first, second, third = (tmp_path / name for name in ("first", "second", "third"))
    _dist(
        first,
        "Torch-2.14.1",
        "Name: Torch\nVersion: 2.14.1\nLicense-Expression: BSD-3-Clause\n",
        {"url": "file:///wheels/torch.whl", "archive_info": {"hashes": {"sha256": SHA}}},
    )
    _dist(second, "torch-1.0", "Name: torch\nVersion: 1.0\nLicense: MIT\n")
    _dist(second, "nameless-0.1", "Version: 0.1\n")
    _dist(third, "Six-1.17.0", "Name: Six\nVersion: 1.17.0\nClassifier: License :: OSI Approved :: MIT License\n")
    _dist(third, "zope.interface-7.2", "Name: Zope.Interface\nVersion: 7.2\n")
    return [str(first), str(second), str(third)]


# Sorted by canonical name ("zope-interface" after "torch", though "Z" sorts before "s"), each name as written.
NO_WHEEL: dict[str, Any] = {"tags": [], "local": None}  # no WHEEL file, no direct_url.json
DISTRIBUTIONS = [
    {"name": "Six", "version": "1.17.0", "license": "MIT License", "sha256": None, **NO_WHEEL},
    {
        "name": "Torch",
        "version": "2.14.1",
        "license": "BSD-3-Clause",
        "sha256": SHA,
        "tags": [],
        "local": "file:///wheels/torch.whl",
    },
    {"name": "Zope.Interface", "version": "7.2", "license": None, "sha256": None, **NO_WHEEL},
]


def _torch(*, cuda: bool = True) -> types.ModuleType:
    """A stand-in for torch: a CUDA build's answers, or a CPU build's (no CUDA, cuDNN None, no NCCL, no archs)."""
    torch = types.ModuleType("torch")
    if cuda:
        backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(version=lambda: 91300))
        nccl = types.SimpleNamespace(version=lambda: (2, 27, 3))
        c_module = types.SimpleNamespace(_cuda_getArchFlags=lambda: "sm_80 sm_90 sm_100")
    else:
        backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(version=lambda: None))
        nccl = types.SimpleNamespace()  # torch.cuda.nccl.version() fails: torch._C has no _nccl_version
        c_module = types.SimpleNamespace()  # torch._C._cuda_getArchFlags is missing from a CPU build
    vars(torch).update(
        __version__="2.14.1+cu130" if cuda else "2.14.1+cpu",
        version=types.SimpleNamespace(cuda="13.0" if cuda else None),
        backends=backends,
        cuda=types.SimpleNamespace(nccl=nccl),
        _C=c_module,
    )
    return torch


STACK = {"torch": "2.14.1+cu130", "cuda": "13.0", "cudnn": 91300, "nccl": "2.27.3", "archs": "sm_80 sm_90 sm_100"}


@pytest.fixture
def image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An image as the inventory sees it: its sys.path, a CUDA torch, its python; the dpkg status file to write."""
    monkeypatch.setattr(sys, "path", _sys_path(tmp_path))
    monkeypatch.setitem(sys.modules, "torch", _torch())
    monkeypatch.setattr(sys, "executable", EXECUTABLE)
    status = tmp_path / "var" / "lib" / "dpkg" / "status"
    monkeypatch.setattr(inventory, "DPKG_STATUS", str(status))
    doc = tmp_path / "usr" / "share" / "doc"  # zlib1g's copyright file (Debian 12's), none for libcafé
    (doc / "zlib1g").mkdir(parents=True)
    (doc / "zlib1g" / "copyright").write_bytes((COPYRIGHT / "zlib1g").read_bytes())
    monkeypatch.setattr(inventory, "DOC", str(doc))
    return status


# ---- canonical ----


def test_a_canonical_name_is_lower_case_with_each_run_of_separators_one_hyphen() -> None:
    assert inventory.canonical("Zope.Interface") == "zope-interface"
    assert inventory.canonical("Typing__Extensions-._X") == "typing-extensions-x"
    assert inventory.canonical("six") == "six"


# ---- distributions ----


def test_every_distribution_on_sys_path_the_first_of_a_name_winning(image: Path) -> None:
    assert inventory.distributions() == DISTRIBUTIONS


def test_no_distribution_on_sys_path_is_an_empty_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert inventory.distributions() == []


# ---- torch_stack ----


def test_the_stack_is_torchs_own_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _torch())
    assert inventory.torch_stack() == STACK


def test_a_cpu_build_answers_none_for_what_it_cannot_give(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _torch(cuda=False))
    found = inventory.torch_stack()
    assert found == {"torch": "2.14.1+cpu", "cuda": None, "cudnn": None, "nccl": None, "archs": None}


def test_no_torch_is_an_empty_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert inventory.torch_stack() == {}


def test_a_torch_that_fails_to_import_is_an_empty_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "torch.py").write_text("raise OSError('libcudart.so.13: cannot open shared object file')\n")
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert inventory.torch_stack() == {}
    assert "torch" not in sys.modules


# ---- inventory ----

STATUS = (
    "Package: zlib1g\nStatus: install ok installed\nArchitecture: amd64\nSource: zlib\nVersion: 1:1.2.13\n\n"
    "Package: gone\nStatus: deinstall ok not-installed\nArchitecture: amd64\n\n"
    "Package: libcafé\nStatus: install ok installed\nArchitecture: all\nVersion: 1.0\n"
)
INSTALLED = "install ok installed"
DPKG = [
    {"package": "libcafé", "status": INSTALLED, "architecture": "all", "version": "1.0", "licenses": None},
    {"package": "zlib1g", "status": INSTALLED, "architecture": "amd64", "source": "zlib", "version": "1:1.2.13",
     "licenses": ["Zlib"]},
]  # fmt: skip


def test_the_inventory_is_dpkg_python_distributions_and_the_stack(image: Path) -> None:
    image.parent.mkdir(parents=True)
    image.write_text(STATUS, encoding="utf-8")
    expected = {"schema": 1, "dpkg": DPKG, "python": EXECUTABLE, "distributions": DISTRIBUTIONS, "stack": STACK}
    assert inventory.inventory() == expected
    assert inventory.inventory(with_torch=True) == expected


def test_without_torch_the_stack_is_empty_though_torch_is_there(image: Path) -> None:
    image.parent.mkdir(parents=True)
    image.write_text(STATUS, encoding="utf-8")
    expected = {"schema": 1, "dpkg": DPKG, "python": EXECUTABLE, "distributions": DISTRIBUTIONS, "stack": {}}
    assert inventory.inventory(with_torch=False) == expected


def test_an_image_without_a_dpkg_status_file_has_no_dpkg(image: Path) -> None:
    assert inventory.inventory(with_torch=False)["dpkg"] is None


def test_the_status_file_is_read_as_utf8_whatever_the_locale_bad_bytes_replaced(image: Path, c_locale: None) -> None:
    image.parent.mkdir(parents=True)
    image.write_bytes(STATUS.encode("utf-8") + b"\nPackage: mojibake\nVersion: caf\xe9\n")
    found = inventory.inventory(with_torch=False)["dpkg"]
    assert found == [*DPKG[:1], {"package": "mojibake", "version": "caf\ufffd", "licenses": None}, *DPKG[1:]]
