"""`matrix ci`'s runners: build runner labels, GPU runner classes (each CUDA image's GPU smoke on every class whose
GPUs its torch has code for, by matrix.toml's code lists), the registry, from flags or publish.toml's [ci] table;
what the registry already holds gets no job; the GPU runners' driver floor in docs/publish.md is the matrix's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from publish_kit import matrix_with

from builder.cli.main import main
from builder.core.errors import UsageError
from builder.matrix import load_matrix
from builder.publish.ci_shape import ci_shape, driver_floor, gpu_class
from builder.publish.items import expand

ROOT = Path(__file__).resolve().parents[2]
SET = (
    '[[publish]]\nname = "pair"\ntorch = "==2.14.1"\nvariants = ["cu126", "cu130", "cpu"]\nos = ["debian12"]\n'
    'flavors = ["runtime"]\n'
)
CLASSES = ["--gpu-runner", "ampere=self-hosted,gpu,a100", "--gpu-runner", "h100=self-hosted,gpu,h100",
           "--gpu-runner", "sm_120=self-hosted,gpu,rtx"]  # fmt: skip


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    matrix_with(SET, tmp_path)
    return tmp_path


def ci(folder: Path, *argv: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", str(folder / "matrix.toml"), "matrix", "ci", "--gpus", "all", *argv])
    out, err = capsys.readouterr()
    assert exit_.value.code == 0, err
    found: dict[str, Any] = json.loads(out)
    return found


def _variant(leg: dict[str, Any]) -> str:
    return str(leg["id"]).split("-")[1]


def test_each_cuda_image_gets_a_gpu_leg_on_every_class_its_torch_runs_on(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    legs = ci(folder, "--format", "github-gpu", *CLASSES, capsys=capsys)["include"]
    assert [(_variant(leg), leg["class"]) for leg in legs] == [
        ("cu126", "ampere"), ("cu126", "h100"),  # torch 2.14.1 cu126 carries no code sm_120 runs
        ("cu130", "ampere"), ("cu130", "h100"), ("cu130", "sm_120"),
    ]  # fmt: skip
    assert legs[1]["runs-on"] == ["self-hosted", "gpu", "h100"]
    # each leg's floor is its own image's CUDA major's (matrix.toml [[cuda_major]] mvc_min_driver)
    assert [leg["driver-floor"] for leg in legs] == ["525.60.13"] * 2 + ["580.65.06"] * 3
    assert legs[0]["smoke"] == f"docker pull {legs[0]['candidate']} && torchyard smoke {legs[0]['candidate']} " + (
        "--gpus all --require-gpu"
    )
    jobs = ci(folder, "--format", "github", *CLASSES, capsys=capsys)["include"]
    assert [j["gpu-classes"] for j in jobs] == ["ampere h100", "ampere h100 sm_120", ""]
    assert ci(folder, "--format", "github-gpu", *CLASSES, capsys=capsys)["include"] == legs  # deterministic


def test_without_classes_every_cuda_image_goes_to_the_one_gpu_label(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    legs = ci(folder, "--format", "github-gpu", capsys=capsys)["include"]
    assert [(_variant(leg), leg["class"], leg["runs-on"]) for leg in legs] == [
        ("cu126", "gpu", ["self-hosted", "gpu"]),
        ("cu130", "gpu", ["self-hosted", "gpu"]),
    ]


def test_runner_labels_and_registry_come_from_flags_else_the_ci_table(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "publish.toml").write_text(
        '[ci]\nrunner = "self-hosted,linux,big"\nregistry = "ghcr.io/acme"\n'
        'gpu_runners = { hopper = ["self-hosted", "gpu", "h100"] }\n\n' + SET
    )
    jobs = ci(folder, "--format", "github", capsys=capsys)["include"]
    assert {(str(j["runs-on"]), j["hosted"]) for j in jobs} == {("['self-hosted', 'linux', 'big']", False)}
    assert (
        jobs[0]["image"].startswith("ghcr.io/acme/torchyard:")
        and "ghcr.io/acme/torchyard-candidates:" in jobs[0]["push"]
    )
    assert [j["gpu-classes"] for j in jobs] == ["hopper", "hopper", ""]
    argv = ["--runner", "ubuntu-24.04", "--registry", "registry.example.com/ml", "--gpu-runner", "sm_80=gpu,a100"]
    flagged = ci(folder, "--format", "github", *argv, capsys=capsys)["include"]
    assert {(j["runs-on"], j["hosted"]) for j in flagged} == {("ubuntu-24.04", True)}
    assert flagged[0]["image"].startswith("registry.example.com/ml/torchyard:")
    assert [j["gpu-classes"] for j in flagged] == ["sm_80", "sm_80", ""]
    named = ci(folder, "--format", "github", "--repo", "ghcr.io/x/y", capsys=capsys)["include"]
    assert named[0]["image"].startswith("ghcr.io/x/y:") and "ghcr.io/x/y-candidates:" in named[0]["push"]


def test_what_the_registry_holds_already_gets_no_job(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    every = ci(folder, "--format", "github", "--repo", "ghcr.io/acme/t", capsys=capsys)["include"]
    done = every[1]["id"]
    report = {"schema": 1, "repo": "ghcr.io/acme/t", "items": [{"id": done, "action": "skip"},
              {"id": every[0]["id"], "action": "build"}]}  # fmt: skip
    (folder / "plan.json").write_text(json.dumps(report))
    argv = ["--repo", "ghcr.io/acme/t", "--plan-report", str(folder / "plan.json")]
    assert ci(folder, "--format", "github", *argv, capsys=capsys)["include"] == [every[0], every[2]]
    assert [leg["id"] for leg in ci(folder, "--format", "github-gpu", *argv, capsys=capsys)["include"]] == [
        every[0]["id"]
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gpu-runner", "hoper=a"], "--gpu-runner hoper: not an architecture (sm_90), a data-center GPU (h100) or a "
         "GPU family (hopper) matrix.toml records (did you mean 'hopper'?)"),
        (["--gpu-runner", "hopper"], "--gpu-runner: 'hopper': expected CLASS=LABEL[,LABEL]"),
        (["--gpu-runner", "sm_100=gpu"], "torch2.14.1-cu126-py3.11-debian12-runtime: no GPU runner class runs it"),
        (["--runner", "a,,b"], "--runner: 'a,,b': expected runner labels"),
        (["--gpu-runner", "a100=x", "--gpu-runner", "a100=y"], "--gpu-runner: a class is named twice"),
        (["--plan-report", "plan.json", "--repo", "ghcr.io/other/t"], "--plan-report: a plan of 'ghcr.io/acme/t'"),
    ],
)  # fmt: skip
def test_bad_runner_flags_are_one_line_and_exit_2(
    folder: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    (folder / "plan.json").write_text(json.dumps({"schema": 1, "repo": "ghcr.io/acme/t", "items": []}))
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", str(folder / "matrix.toml"), "matrix", "ci", "--format", "github", "--gpus", "all", *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and err.count("\n") == 1, err


def test_a_class_is_an_architecture_a_gpu_or_a_family(folder: Path) -> None:
    m = load_matrix(folder / "matrix.toml")
    assert [a.name for a in gpu_class(m, "ampere", ("x",)).archs or ()] == ["sm_80", "sm_86"]
    assert [a.name for a in gpu_class(m, "Ada-Lovelace", ("x",)).archs or ()] == ["sm_89"]
    assert [a.name for a in gpu_class(m, "H200", ("x",)).archs or ()] == ["sm_90"]
    assert [a.name for a in gpu_class(m, "sm_86", ("x",)).archs or ()] == ["sm_86"]
    with pytest.raises(UsageError):
        gpu_class(m, "sm_99", ("x",))
    arm = ci_shape(m, gpu_runners=(("gh200", ("self-hosted", "gpu", "arm64")),)).gpu_classes[0]
    assert arm.platform.value == "linux/arm64"


def test_the_driver_floor_docs_publish_md_names_is_the_matrix_s() -> None:
    """The newest CUDA major of this repository's own set, and its minor-version-compatibility floor."""
    m = load_matrix()
    found = driver_floor(m, expand(m)[0])
    assert found is not None
    major, floor = found
    text = (ROOT / "docs" / "publish.md").read_text()
    assert f"driver floor is **{floor}**" in text and f"CUDA {major}" in text
