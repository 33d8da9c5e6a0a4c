"""The common GPUs get answers (issue 38, item 7): lookup and explain, run in-process through the CLI's entry point
on the real matrix.toml, answer RUNS for T4, V100, GTX 1080 Ti and RTX 2080 Ti on the 535 and 580 branches (never
CANNOT TELL for want of their architecture's first driver), refuse the Volta and Pascal cards on 590 naming the
driver, and cite where each first driver comes from; the names nvidia-smi prints for cloud GPUs resolve."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from builder.cli.main import main


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Cli = Callable[..., Run]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.delenv("TORCHYARD_DEBUG", raising=False)
    monkeypatch.delenv("TORCHYARD_MATRIX", raising=False)

    def run(*args: str) -> Run:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        out, err = capsys.readouterr()
        code = exc.value.code
        assert isinstance(code, int)
        return Run(code, out, err)

    return run


# The GPU as typed, its name in the matrix, its family, its first driver (the driver Table 3 of the CUDA release notes
# gives for the architecture's first toolkit) and the source of that driver.
GPUS = {
    "T4": ("NVIDIA T4", "Turing", ">= 410.48", "cuda-relnotes"),
    "V100": ("NVIDIA V100", "Volta", ">= 384.81, up to the 580 branch", "cuda-relnotes-legacy"),
    "GTX 1080 Ti": ("GeForce GTX 1080 Ti", "Pascal", ">= 367.48, up to the 580 branch", "cuda-relnotes-legacy"),
    "RTX 2080 Ti": ("GeForce RTX 2080 Ti", "Turing", ">= 410.48", "cuda-relnotes"),
}
RUNS = [(gpu, driver) for gpu in GPUS for driver in ("535", "580")] + [("T4", "590"), ("RTX 2080 Ti", "590")]


def newest(driver: str) -> str:
    return f"driver {driver} (any {driver}.x, read as the newest)"


@pytest.mark.parametrize(("gpu", "driver"), RUNS)
def test_lookups_first_row_runs(cli: Cli, gpu: str, driver: str) -> None:
    r = cli("lookup", "--driver", driver, "--gpu", gpu, "--limit", "1")
    assert (r.code, r.err) == (0, "")
    assert r.out.splitlines()[4] == "  answer: RUNS"
    first = cli("lookup", "--driver", driver, "--gpu", gpu, "--json", "--limit", "1").json()["results"][0]
    assert (first["verdict"], first["to_tell"]) == ("runs", [])


@pytest.mark.parametrize(("gpu", "driver"), RUNS)
def test_explain_agrees_and_cites_the_first_drivers_source(cli: Cli, gpu: str, driver: str) -> None:
    name, family, span, source = GPUS[gpu]
    r = cli("explain", "--driver", driver, "--gpu", gpu)
    assert (r.code, r.err) == (0, "")
    lookup = cli("lookup", "--driver", driver, "--gpu", gpu, "--json", "--limit", "1").json()["results"][0]
    assert r.out.splitlines()[0] == f"{lookup['id']}: RUNS"
    assert f"  PASS         driver-gpu       {newest(driver)} supports {name} ({family}: {span})" in r.out.splitlines()
    data = cli("explain", "--driver", driver, "--gpu", gpu, "--json").json()
    (check,) = [c for c in data["checks"] if c["rule"] == "driver-gpu"]
    assert (data["verdict"], check["status"]) == ("runs", "pass")
    assert check["sources"] == ["nvidia-gpu-tables", "nvidia-arch-matrix", source]


@pytest.mark.parametrize("gpu", ["V100", "GTX 1080 Ti"])
def test_a_volta_or_pascal_card_will_not_run_on_590(cli: Cli, gpu: str) -> None:
    name, family, _, _ = GPUS[gpu]
    why = (
        f"{name} ({family}) is supported up to the 580 driver branch (legacy); {newest('590')} no longer supports it: "
        "use a 580.x driver"
    )
    r = cli("lookup", "--driver", "590", "--gpu", gpu)
    assert (r.code, r.out) == (1, "")
    assert r.err.splitlines()[1].startswith(f"  {why}  (")
    e = cli("explain", "--driver", "590", "--gpu", gpu)
    assert e.code == 1
    lines = e.out.splitlines()
    assert lines[0].endswith(": WILL NOT RUN")
    at = lines.index(f"  FAIL         driver-gpu       {why}")
    assert [line.strip() for line in lines[at + 1 : at + 3]] == [
        "source: https://github.com/NVIDIA/open-gpu-kernel-modules",
        "source: https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html",
    ]
    assert cli("explain", "--driver", "590", "--gpu", gpu, "--json").json()["verdict"] == "will-not-run"


def test_a_driver_older_than_the_first_toolkits_is_refused_with_that_source(cli: Cli) -> None:
    r = cli("explain", "--driver", "384.59", "--gpu", "V100", "--json")
    (check,) = [c for c in r.json()["checks"] if c["rule"] == "driver-gpu"]
    assert check["reason"] == "NVIDIA V100 (Volta) needs driver >= 384.81; driver 384.59 lacks it"
    assert check["sources"] == ["nvidia-gpu-tables", "nvidia-arch-matrix", "cuda-relnotes-legacy"]


def test_maxwell_is_still_not_recorded(cli: Cli) -> None:
    """Maxwell's first toolkit (CUDA 6.5) has no row in Table 3: its first driver stays unrecorded, and lookup
    says it cannot tell rather than guess."""
    r = cli("lookup", "--driver", "535", "--gpu", "GTX 980", "--limit", "1")
    assert r.out.splitlines()[4] == (
        "  answer: CANNOT TELL: driver-gpu: the first driver of GeForce GTX 980 is not recorded "
        "(record it in matrix.toml, with its source)"
    )


@pytest.mark.parametrize(
    ("typed", "name", "arch"),
    [
        ("A10G", "NVIDIA A10G", "sm_86"),
        ("NVIDIA A10G", "NVIDIA A10G", "sm_86"),
        ("NVIDIA B300 SXM6 AC", "NVIDIA B300", "sm_103"),
        ("Tesla T4", "NVIDIA T4", "sm_75"),
        ("Tesla V100-SXM2-16GB", "NVIDIA V100", "sm_70"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100", "sm_90"),
        ("NVIDIA RTX 4000 SFF Ada Generation", "NVIDIA RTX 4000 SFF Ada", "sm_89"),
        ("NVIDIA RTX 2000 Ada Generation", "NVIDIA RTX 2000 Ada", "sm_89"),
    ],
)
def test_nvidia_smi_names_resolve(cli: Cli, typed: str, name: str, arch: str) -> None:
    data = cli("explain", "--driver", "580", "--gpu", typed, "--json").json()
    (check,) = [c for c in data["checks"] if c["rule"] == "driver-gpu"]
    assert f" supports {name} (" in check["reason"]
    (code,) = [c for c in data["checks"] if c["rule"] == "arch-torch"]
    assert code["reason"].split()[0].rstrip(":") == arch  # "sm_75: native SASS ...", "sm_89 runs the sm_86 SASS ..."
