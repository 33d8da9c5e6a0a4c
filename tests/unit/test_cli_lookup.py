"""The lookup / explain / matrix commands, run in-process: exit codes, exact output, JSON contracts."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from matrix_kit import real

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


# --- lookup --------------------------------------------------------------------------------------------


def test_lookup_table_ranks_full_level_cuda_first(cli: Cli) -> None:
    # Driver 535 runs CUDA 12.1 (530.30.02) and 11.8 (520.61.05) at full level, CUDA 12.4 (550.54.14)
    # only through minor-version compatibility; the RTX 4090 (sm_89) runs the sm_86 SASS of each.
    flags = ("--driver", "535", "--gpu", "RTX 4090", "--torch", "2.5.1", "--os", "debian12", "--python", "3.11")
    r = cli("lookup", *flags)
    assert (r.code, r.err) == (0, "")
    assert r.out == (
        "best: torch 2.5.1+cu121 (CUDA 12.1, cuDNN 9.1.0.70, NCCL not recorded), Python 3.11, debian12\n"
        "  id:     torch2.5.1-cu121-py3.11-debian12\n"
        "  driver: runs at full level\n"
        "  code:   runs older-minor code (sm_86)\n"
        "  answer: RUNS\n"
        "  image:  torchyard:2.5.1-cuda12.1-cudnn9-py3.11-debian12-runtime\n"
        "  build:  torchyard build --torch 2.5.1 --variant cu121 --python 3.11 --os debian12\n"
        "  pip:    pip install torch==2.5.1 torchvision==0.20.1 torchaudio==2.5.1"
        " --index-url https://download.pytorch.org/whl/cu121\n"
        "  note:   driver branch R535 (long-term branch) reached its end of life in June 2026; install a driver of"
        " branch R580 (long-term support, until June 2028)\n"
        "  note:   debian12 is past its regular security support (ended June 2026): long-term support only, until"
        " June 2028\n"
        "\n"
        "TORCH        CUDA  CUDNN     DRIVER      GPU CODE   PYTHON  OS\n"
        "2.5.1+cu121  12.1  9.1.0.70  full        via sm_86  3.11    debian12\n"
        "2.5.1+cu118  11.8  9.1.0.70  full        via sm_86  3.11    debian12\n"
        "2.5.1+cu124  12.4  9.1.0.70  compatible  via sm_86  3.11    debian12\n"
        "\n"
        "3 valid torch builds (3 combinations); 0 combinations ruled out.\n"
    )
    wide = cli("lookup", *flags, "--wide")
    assert wide.out.splitlines()[11].startswith(
        "ID                                TORCH        VISION  AUDIO  CUDA  CUDNN"
    )
    assert "torch2.5.1-cu124-py3.11-debian12  2.5.1+cu124  0.20.1  2.5.1  12.4  9.1.0.70  2.21.5" in wide.out


def test_lookup_table_fits_100_columns(cli: Cli) -> None:
    r = cli("lookup", "--driver", "580", "--gpu", "RTX 4090", "--limit", "0")
    table = r.out.split("\n\n")[1]
    assert max(len(line) for line in table.splitlines()) <= 100
    # torch 2.4.1 runs on five OSes; the cell names the three that fit and counts the rest.
    row = next(line for line in table.splitlines() if line.startswith("2.4.1+cu124 "))
    assert row.endswith("ubuntu22.04/24.04/20.04 +2")
    wide = cli("lookup", "--driver", "580", "--gpu", "RTX 4090", "--torch", "2.4.1", "--wide", "--limit", "0")
    assert "2.4.1+cu124" in wide.out and "debian12" in wide.out and "debian13" in wide.out


def test_lookup_limit_and_reasons(cli: Cli) -> None:
    r = cli("lookup", "--driver", "470.57.02", "--torch", "2.5.1", "--os", "debian12", "--limit", "1")
    assert r.code == 0
    lines = r.out.split("\n\n")[1].splitlines()
    assert lines[0].startswith("TORCH ") and "DRIVER" in lines[0] and "GPU CODE" not in lines[0]
    assert lines[1].startswith("2.5.1+cu118 ")  # the only CUDA 11 build
    assert "driver 470.57.02: every CUDA 12 build needs >= 525.60.13" in r.out
    assert "1 valid torch builds (2 combinations); 0 combinations ruled out" not in r.out
    assert ", 0 more" not in r.out


def test_lookup_without_a_match_exits_1_with_grouped_reasons(cli: Cli) -> None:
    r = cli("lookup", "--driver", "470.57.02", "--cuda", "12", "--os", "debian12", "--torch", "2.5")
    assert r.code == 1
    assert r.out == ""
    assert r.err.splitlines() == [
        "torchyard: error: no valid combination (20 ruled out)",
        "  driver 470.57.02: every CUDA 12 build needs >= 525.60.13  (20 combinations)",
    ]


def test_lookup_for_cuda_12_wheels_of_torch_2_15(cli: Cli) -> None:
    r = cli("lookup", "--torch", "2.15", "--cuda", "12")
    assert r.code == 1
    assert "torch 2.15.0 publishes cu130, cu132, cpu: none matches the --cuda/--variant asked" in r.err


def test_lookup_json_contract(cli: Cli) -> None:
    r = cli("lookup", "--driver", "535", "--gpu", "RTX 4090", "--torch", "2.5.1", "--variant", "cu124", "--json")
    assert r.code == 0
    data = r.json()
    assert (data["schema"], data["total"], data["shown"]) == (2, len(data["results"]), len(data["results"]))
    assert data["results"][0]["verdict"] == "runs"  # driver, GPU and every fact given: checked
    rows = data["results"]
    first = rows[0]
    assert {
        "torch",
        "torchvision",
        "torchaudio",
        "variant",
        "cuda",
        "cudnn",
        "nccl",
        "python",
        "os",
        "arch_support",
        "driver_mode",
        "id",
    } <= set(first)
    assert first["id"] == "torch2.5.1-cu124-py3.10-ubuntu22.04"
    assert {k: first[k] for k in ("torch", "torchvision", "torchaudio", "variant", "cuda", "cudnn", "nccl")} == {
        "torch": "2.5.1",
        "torchvision": "0.20.1",
        "torchaudio": "2.5.1",
        "variant": "cu124",
        "cuda": "12.4",
        "cudnn": "9.1.0.70",
        "nccl": "2.21.5",
    }
    # torchvision 0.20.1 takes no Python 3.13: the OS inside its regular support with its own Python
    assert (first["python"], first["os"]) == ("3.10", "ubuntu22.04")
    assert (first["arch_support"], first["driver_mode"]) == ("compatible", "minor-version")
    assert all(row["variant"] == "cu124" for row in rows)


def test_lookup_json_without_arch_has_no_arch_support(cli: Cli) -> None:
    rows = cli("lookup", "--torch", "2.15.0", "--json", "--limit", "0").json()["results"]
    assert rows and all("arch_support" not in row for row in rows)
    assert all(row["driver_mode"] is None for row in rows)  # no --driver given
    # 2.15.0+cu130 has no recorded cuDNN: not refused, not passed; it ranks after every checked row
    assert {row["variant"] for row in rows} == {"cu132", "cu130", "cpu"}
    assert rows[0]["variant"] == "cu132"  # the PyPI default first when no driver is given
    assert rows[-1]["variant"] == "cu130" and rows[-1]["verdict"] == "cannot-tell"
    assert any("the cuDNN of torch 2.15.0+cu130 is not recorded" in line for line in rows[-1]["to_tell"])
    assert rows[0]["verdict"] == "runs-with" and "driver >= 580.65.06" in rows[0]["conditions"]


def test_lookup_json_cpu_variant_only_when_asked(cli: Cli) -> None:
    rows = cli("lookup", "--driver", "580", "--torch", "2.15.0", "--json", "--limit", "0").json()["results"]
    assert "cpu" not in {row["variant"] for row in rows}
    cpu = cli("lookup", "--driver", "580", "--torch", "2.15.0", "--variant", "cpu", "--json").json()["results"]
    assert {(row["variant"], row["cuda"], row["driver_mode"]) for row in cpu} == {("cpu", None, None)}


def test_lookup_forward_compat_on_a_data_center_gpu(cli: Cli) -> None:
    argv = ("lookup", "--driver", "570", "--gpu", "H100", "--variant", "cu130", "--os", "ubuntu24.04", "--json")
    refused = cli(*argv)
    assert refused.code == 1
    assert (refused.json()["total"], refused.json()["results"]) == (0, [])  # a JSON answer also when none is valid
    assert refused.json()["reasons"][0]["count"] > 0
    rows = cli(*argv, "--forward-compat").json()["results"]
    assert {row["driver_mode"] for row in rows} == {"forward-compat"}
    assert rows[0]["torch"] == "2.14.1"  # 2.15.0+cu130 has no recorded cuDNN: not claimed


# --- explain -------------------------------------------------------------------------------------------


def test_explain_valid_combination(cli: Cli) -> None:
    r = cli("explain", "--driver", "550.54.15", "--gpu", "RTX 4090", "--torch", "2.5.1", "--os", "ubuntu22.04")
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0] == "torch2.5.1-cu124-py3.10-ubuntu22.04: RUNS"
    assert lines[1] == "  chosen: the best of 3 valid combinations for these flags (lookup's first row)"
    assert sum(line.startswith("  PASS  ") for line in lines) == 12


def test_explain_invalid_combination_exits_1_with_sources(cli: Cli) -> None:
    r = cli("explain", "--driver", "570", "--gpu", "RTX 4090", "--torch", "2.11.0", "--variant", "cu130")
    assert r.code == 1
    assert r.err == ""
    assert (
        "  FAIL         driver-cuda      driver 570 (any 570.x, read as the newest): every CUDA 13 build needs >= "
        "580.65.06" in r.out.splitlines()
    )
    assert "source: https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html" in r.out


def test_explain_json_contract(cli: Cli) -> None:
    r = cli("explain", "--gpu", "V100", "--torch", "2.11.0", "--variant", "cu128", "--json")
    assert r.code == 1
    data = r.json()
    assert data["valid"] is False
    assert all({"rule", "status", "ok", "reason"} <= set(check) for check in data["checks"])
    failed = {c["rule"] for c in data["checks"] if c["status"] == "fail"}
    assert failed == {"arch-torch", "cudnn-arch"}  # no sm_70 SASS; cuDNN 9.17 starts at sm_75
    unchecked = {c["rule"] for c in data["checks"] if c["status"] == "not-checked"}
    assert unchecked == {"driver-gpu", "driver-cuda", "cudnn-cuda"}  # no --driver given: not passed
    assert all(c["ok"] is None for c in data["checks"] if c["status"] == "not-checked")
    assert data["verdict"] == "will-not-run"


@pytest.mark.parametrize("command", ["lookup", "explain"])
def test_a_release_the_matrix_lacks_is_nothing_valid(cli: Cli, command: str) -> None:
    r = cli(command, "--torch", "9.9")
    assert r.code == 1
    assert "no torch release in the matrix matches --torch ==9.9.* (newest: 2.15.0)" in r.out + r.err


def test_explain_json_for_an_unpublished_variant(cli: Cli) -> None:
    data = cli("explain", "--torch", "2.15", "--cuda", "12", "--json").json()
    assert data["valid"] is False
    assert [(c["rule"], c["ok"]) for c in data["checks"]] == [("selection", False)]


# --- matrix show / list / check ------------------------------------------------------------------------


def test_show_cuda_lists_images_with_their_cudnn_and_forward_compat_branches(cli: Cli) -> None:
    data = cli("matrix", "show", "cuda", "13.0", "--json").json()
    first = data["images"][0]
    assert (first["cuda"], first["cudnn"], first["fc_branches"]) == ("13.0.0", "9.12.0.46", [535, 550, 565, 570, 575])
    assert data["reported_by"] == [580]
    assert {"version": "13.0.3", "min_driver": "not recorded"} in data["releases"]


@pytest.mark.parametrize(
    ("driver", "reports", "majors", "supported", "dropped"),
    [
        ("535", "12.2", [11, 12], "sm_89", "sm_120"),
        ("590.48.01", "13.1", [11, 12, 13], "sm_120", "sm_70"),
        ("470", "11.4", [11], "sm_80", "sm_89"),
    ],
)
def test_show_driver(cli: Cli, driver: str, reports: str, majors: list[int], supported: str, dropped: str) -> None:
    data = cli("matrix", "show", "driver", driver, "--json").json()
    assert (data["reports_cuda"], data["cuda_majors"]) == (reports, majors)
    assert supported in data["archs"]
    assert dropped in data["archs_not_supported"]
    assert "sm_87" in data["archs_jetson_l4t"]
    # an architecture without a recorded first driver is neither supported nor refused (sm_110 needs CUDA 13)
    assert "sm_110" not in data["archs"] and "sm_110" not in data["archs_not_supported"]
    assert set(data["archs_not_recorded"]).isdisjoint(data["archs"])


def test_show_torch_has_the_platforms_and_what_is_not_recorded(cli: Cli) -> None:
    data = cli("matrix", "show", "torch", "2.14.1", "--json").json()
    assert data["platforms"]["linux/arm64"]["pypi_default"] == "cu130"
    cu130 = next(v for v in data["variants"] if v["name"] == "cu130")
    assert cu130["builds"]["linux/arm64"]["sass"] == ["sm_80", "sm_90", "sm_100", "sm_110", "sm_120"]
    cu132 = next(v for v in data["variants"] if v["name"] == "cu132")
    assert cu132["unrecorded"] == ["cuda_runtime"]


@pytest.mark.parametrize(
    ("name", "version", "min_driver", "mvc"),
    [
        # A minor's floor is its GA driver (the lowest sourced in the minor): the oldest that reports 12.4.
        ("12.4", "12.4.1", "550.54.14", "525.60.13"),
        ("12.4.1", "12.4.1", "550.54.15", "525.60.13"),
        ("12.4.0", "12.4.0", "550.54.14", "525.60.13"),
        ("13.0", "13.0.3", "580.65.06", "580.65.06"),
        ("13.0.3", "13.0.3", None, "580.65.06"),
        ("13.0.0", "13.0.0", "580.65.06", "580.65.06"),
        ("11.8", "11.8.0", "520.61.05", "450.80.02"),
        ("10.2", "10.2.89", "440.33", None),
    ],
)
def test_show_cuda_json(cli: Cli, name: str, version: str, min_driver: str | None, mvc: str | None) -> None:
    data = cli("matrix", "show", "cuda", name, "--json").json()
    assert (data["version"], data["min_driver"], data["mvc_min_driver"]) == (version, min_driver, mvc)


@pytest.mark.parametrize(
    ("name", "canonical", "cc", "min_cuda", "removed_in"),
    [
        ("sm_70", "sm_70", "7.0", None, "13.0"),
        ("8.9", "sm_89", "8.9", "11.8", None),
        ("120", "sm_120", "12.0", "12.8", None),
        ("sm_37", "sm_37", "3.7", None, "12.0"),
        ("sm_90a", "sm_90a", "9.0a", "12.0", None),
    ],
)
def test_show_arch_json(cli: Cli, name: str, canonical: str, cc: str, min_cuda: str | None, removed_in: str) -> None:
    data = cli("matrix", "show", "arch", name, "--json").json()
    assert (data["name"], data["compute_capability"], data["min_cuda"], data["removed_in"]) == (
        canonical,
        cc,
        min_cuda,
        removed_in,
    )


def test_show_torch_json(cli: Cli) -> None:
    data = cli("matrix", "show", "torch", "2.15.0", "--json").json()
    assert [v["name"] for v in data["variants"]] == ["cu130", "cu132", "cpu"]
    assert data["pypi_default"] == "cu132"
    assert data["python"] == ["3.11", "3.12", "3.13", "3.14", "3.15"]
    assert (data["torchvision"], data["torchaudio"]) == ("0.29.2", "2.11.1")


def test_show_text(cli: Cli) -> None:
    r = cli("matrix", "show", "os", "ubuntu22.04")
    assert r.code == 0
    assert "system_python: 3.10\n" in r.out and "glibc: 2.35\n" in r.out
    cudnn = cli("matrix", "show", "cudnn", "9.1.0.70", "--json").json()
    assert cudnn["label"] == "9.0-9.5" and cudnn["min_driver"] == {"cuda11": "450.80.02", "cuda12": "525.60.13"}


def test_show_unknown_entry(cli: Cli) -> None:
    r = cli("matrix", "show", "torch", "2.15")
    assert (r.code, r.out) == (2, "")
    assert r.err.startswith("torchyard: error: matrix show torch: '2.15' is not in the matrix (did you mean '2.15.0'?)")
    assert r.err.count("\n") == 1


def test_matrix_list_grid(cli: Cli) -> None:
    r = cli("matrix", "list")
    assert r.code == 0
    lines = r.out.splitlines()
    header = lines[0].split()
    assert header[0] == "TORCH" and header[-1] == "PYTHON" and header[-2] == "cpu"
    rows = {line.split()[0]: dict(zip(header, line.split(), strict=True)) for line in lines[1:]}
    assert next(iter(rows)) == str(max(t.version for t in real().torch))  # newest first
    marks = {k: v for k, v in rows["2.15.0"].items() if k.startswith("cu") or k == "cpu"}
    assert {k for k, v in marks.items() if v != "."} == {"cu130", "cu132", "cpu"}
    assert marks["cu132"] == "*" and marks["cu130"] == "+"
    assert rows["2.8.0"]["cu128"] == "*" and rows["2.8.0"]["cu129"] == "+" and rows["2.8.0"]["cu118"] == "."
    assert rows["2.9.0"]["PYTHON"] == "3.10-3.14"


def test_matrix_check_of_the_packaged_matrix(cli: Cli) -> None:
    m = real()
    r = cli("matrix", "check")
    assert (r.code, r.err) == (0, "")
    variants = sum(len(t.variants) for t in m.torch)
    assert r.out.endswith(
        f"matrix.toml: ok ({len(m.cuda)} CUDA releases, {len(m.archs)} architectures, {len(m.torch)} torch releases"
        f" / {variants} variants, {len(m.os)} OS bases, {len(m.sources)} sources)\n"
    )


# --- bad flags: exit 2, one line, a suggestion where one exists ---------------------------------------------

BAD_FLAGS = [
    (
        ["--arch", "sm_999"],
        "--arch: 'sm_999' is not a GPU architecture in the matrix (did you mean 'sm_90'?) (known: sm_35, sm_37, sm_50,"
        " sm_52, sm_53, sm_60, sm_61, sm_62, sm_70, sm_72, sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_101,"
        " sm_103, sm_107, sm_110, sm_120, sm_121)",
    ),
    (["--arch", "ampere"], "--arch: 'ampere' is not a GPU architecture (examples: sm_89, 8.9, sm_90a)"),
    (["--driver", "abc"], "--driver: 'abc' is not an NVIDIA driver version (examples: 535, 550.54.15, 570.124.06)"),
    (["--driver", "5.35"], "--driver: '5.35' is not an NVIDIA driver version (examples: 535, 550.54.15, 570.124.06)"),
    (["--torch", ">>2"], "--torch: '>>2' is not a version or version range (examples: 2.5, 2.5.1, '>=2.4,<2.7')"),
    (["--python", "3.x"], "--python: '3.x' is not a version or version range (examples: 3.11, '>=3.10,<3.13')"),
    (["--cuda", "cu12x"], "--cuda: 'cu12x' is not a version or version range (examples: 12, 12.4, cu124, '>=12.4')"),
    (
        ["--gpu", "RTX 9999"],
        "--gpu: 'RTX 9999' is not a GPU the matrix knows; give its architecture instead"
        " (--arch, e.g. sm_86: `nvidia-smi --query-gpu=compute_cap --format=csv` prints it)",
    ),
    (
        ["--gpu", "RTX 4900"],
        "--gpu: 'RTX 4900' is not a GPU the matrix knows (did you mean 'GeForce RTX 4090'?); give its architecture"
        " instead (--arch, e.g. sm_86: `nvidia-smi --query-gpu=compute_cap --format=csv` prints it)",
    ),
    (
        ["--os", "debian14"],
        "--os: 'debian14' is not an OS base in the matrix (did you mean 'debian13'?)"
        " (known: debian13, debian12, ubuntu20.04, ubuntu22.04, ubuntu24.04)",
    ),
    (
        ["--variant", "cu999"],
        "--variant: 'cu999' is not a wheel variant in the matrix (did you mean 'cu129'?)"
        " (known: cpu, cu116, cu117, cu118, cu121, cu124, cu126, cu128, cu129, cu130, cu132)",
    ),
    (["--arch", "sm_89", "--gpu", "H100"], "--arch sm_89 contradicts --gpu 'H100', which is sm_90"),
]


@pytest.mark.parametrize("command", ["lookup", "explain"])
@pytest.mark.parametrize(("flags", "message"), BAD_FLAGS, ids=[" ".join(f) for f, _ in BAD_FLAGS])
def test_bad_flag(cli: Cli, command: str, flags: list[str], message: str) -> None:
    r = cli(command, *flags)
    assert r.code == 2
    assert r.out == ""
    assert r.err == f"torchyard: error: {message}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lookup", "--limit", "-1"], "--limit: -1 is negative (0 shows every row)"),
        (["lookup", "--limit", "abc"], "torchyard lookup: Invalid value for '--limit': 'abc' is not a valid integer."),
        (
            ["lookup", "--gpus", "x"],
            "torchyard lookup: No such option '--gpus'. (Did you mean one of: '--gpu', '--os'?)",
        ),
    ],
)
def test_other_bad_arguments(cli: Cli, argv: list[str], message: str) -> None:
    r = cli(*argv)
    assert (r.code, r.out) == (2, "")
    assert r.err == f"torchyard: error: {message}\n"
    assert "Traceback" not in r.err
