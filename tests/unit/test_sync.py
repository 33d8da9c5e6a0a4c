"""`matrix sync` against recorded upstream documents: the small test matrix with its torch release renamed
2.5.0 gets the entries of 2.5.1 from PyPI's recorded page and wheels (Pythons, platform tags, PyPI
default variant and pins, arm64, companions, sources), the file still passes `matrix check`, and verify
then finds nothing to disagree with on PyPI."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from http_kit import Net
from matrix_kit import BASE, edit
from upstream_kit import Upstream

from builder.core.errors import NoMatchError, UsageError
from builder.core.versions import release
from builder.matrix import load_matrix
from builder.net.http import Policy
from builder.oci.client import Distribution
from builder.upstream.sync import propose
from builder.upstream.sync_toml import check, insert, render
from builder.upstream.verify import VerifyOptions, verify

OLDER = edit(
    edit(
        edit(BASE, 'version = "2.5.1"\nreleased', 'version = "2.5.0"\nreleased'),
        'version = "0.20.1"\nrequires_torch = "==2.5.1"',
        'version = "0.20.1"\nrequires_torch = ">=2.5.0,<2.6"',
    ),
    'version = "2.5.1"\nrequires_torch = "==2.5.1"',
    'version = "2.5.1"\nrequires_torch = ">=2.5.0,<2.6"',
)


def matrix_file(tmp_path: Path, text: str = OLDER) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    return path


def test_sync_sources_the_release_from_pypi_and_the_file_stays_valid(tmp_path: Path) -> None:
    path = matrix_file(tmp_path)
    m = load_matrix(path)
    net = Upstream.recorded().attach(Net())
    proposal = propose(m, net.http(Policy(workers=1)), release("2.5.1"))
    updated = insert(path.read_text(), proposal, set(m.sources))
    check(updated, "matrix.toml")
    doc = tomllib.loads(updated)
    (new,) = [t for t in doc["torch"] if t["version"] == "2.5.1"]
    assert {k: new[k] for k in ("released", "pypi_default", "python", "platform_tag", "torchvision", "torchaudio")} == {
        "released": "2024-10",
        "pypi_default": "cu124",
        "python": ["3.9", "3.10", "3.11", "3.12", "3.13"],
        "platform_tag": "manylinux1_x86_64",
        "torchvision": "0.20.1",
        "torchaudio": "2.5.1",
    }
    cu118, cu124, cpu = new["variants"]
    # the previous release's other variant, as PyTorch's index lists it for 2.5.1 (its wheels pin nothing here)
    assert {k: cu118[k] for k in ("name", "cuda", "source")} == {
        "name": "cu118",
        "cuda": "11.8",
        "source": "pytorch-wheel-index",
    }
    assert "pin no CUDA runtime" in cu118["note"]
    assert {k: cu124[k] for k in ("name", "cuda", "cuda_runtime", "cudnn", "nccl")} == {
        "name": "cu124",
        "cuda": "12.4",
        "cuda_runtime": "nvidia-cuda-runtime-cu12==12.4.127",
        "cudnn": "9.1.0.70",
        "nccl": "2.21.5",
    }
    assert "sass" not in cu124 and "compiled architectures not recorded" in cu124["note"]
    assert cpu == {
        "name": "cpu",
        "source": "pytorch-cpu-index",
        "arm64": {"local": "none", "source": "pypi-torch-aarch64"},
    }
    assert new["arm64"]["pypi_default"] == "cpu" and new["arm64"]["platform_tag"] == "manylinux2014_aarch64"
    assert {"pypi-torch", "pypi-torch-aarch64", "pytorch-cpu-index", "pytorch-wheel-index"} <= set(doc["sources"])
    text = render(proposal, set(m.sources))
    assert "# Not recorded: compiled architectures (sass, ptx)" in text
    assert "torch-2.5.1-cp313-cp313-manylinux1_x86_64.whl METADATA" in text

    # verify agrees with what sync wrote, on PyPI (PyTorch's variant indexes are not served here)
    path.write_text(updated)
    http = Upstream.recorded().attach(Net()).http(Policy(workers=1))
    from packaging.specifiers import SpecifierSet

    report = verify(
        load_matrix(path),
        http,
        Distribution(http),
        VerifyOptions(only=frozenset({"torch"}), torch=SpecifierSet("==2.5.1")),
    )
    assert [f for f in report.drift if "PyPI" in f.subject] == []


def test_sync_refuses_a_release_the_matrix_has_and_one_pypi_does_not(tmp_path: Path) -> None:
    m = load_matrix(matrix_file(tmp_path, BASE))
    http = Upstream.recorded().attach(Net()).http(Policy(workers=1))
    with pytest.raises(UsageError, match=r"^--torch 2.5.1: the matrix has it already"):
        propose(m, http, release("2.5.1"))
    with pytest.raises(NoMatchError, match=r"lists no torch 2.6.0 wheels \(newest: 2.5.1\)$"):
        propose(m, http, release("2.6.0"))


def test_an_unreachable_pytorch_index_leaves_its_variants_not_recorded(tmp_path: Path) -> None:
    import requests

    path = matrix_file(tmp_path)
    m = load_matrix(path)
    refused = requests.ConnectionError("refused")
    net = Upstream.recorded().attach(Net().on(lambda sent: refused if "download.pytorch.org" in sent.url else None))
    proposal = propose(m, net.http(Policy(workers=1)), release("2.5.1"))
    assert [v.name for v in proposal.variants] == ["cu124", "cpu"]
    assert any("whether cu118 exist" in note and "could not be read" in note for note in proposal.not_recorded)
    check(insert(path.read_text(), proposal, set(m.sources)), "matrix.toml")
