"""The inference flavor: which ONNX Runtime a combination takes (the rule onnxruntime), its refusals with their
sources, the render's stage and labels, and lookup / explain / render on the command line."""

from __future__ import annotations

import shlex
from pathlib import Path

from packaging.version import Version
from render_kit import matrix, plan
from test_cli_lookup import Cli, Run, cli

from builder.core.kinds import Flavor
from builder.resolve import onnx
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.rules import rule_onnxruntime
from builder.resolve.rules.check import Status

M = matrix()
__all__ = ["cli"]  # the fixture, used by name
F = Facts(M)
# ORT's CUDA provider links libcurand, which torch's CUDA 13 cuda-toolkit pin leaves out: the same release with it
CURAND = "cuda-toolkit[curand]==13.0.3"


def _combo(torch: str, variant: str, python: str = "3.11", os_name: str = "debian12") -> Combination:
    release = next(t for t in M.torch if str(t.version) == torch)
    found = release.variant(variant)
    assert found is not None
    return Combination(release, found, python, next(o for o in M.os if o.name == os_name))


def test_a_cuda_13_torch_takes_the_newest_onnxruntime_gpu_built_for_cuda_13() -> None:
    found = onnx.choose(M, _combo("2.14.1", "cu130"))
    assert found.release is not None and found.release.id == "onnxruntime-gpu==1.31.1"
    assert found.reason.startswith("onnxruntime-gpu==1.31.1 is built for CUDA 13 / cuDNN 9, the majors torch")


def test_a_cuda_12_torch_takes_the_last_cuda_12_release_and_a_cpu_torch_the_cpu_package() -> None:
    assert onnx.choose(M, _combo("2.14.1", "cu126")).release.id == "onnxruntime-gpu==1.26.0"  # type: ignore[union-attr]
    assert onnx.choose(M, _combo("2.14.1", "cpu")).release.id == "onnxruntime==1.32.0"  # type: ignore[union-attr]
    py310 = onnx.choose(M, _combo("2.14.1", "cu126", "3.10"))
    assert py310.release is not None and py310.release.id == "onnxruntime-gpu==1.23.2"


def test_an_ort_that_needs_cuda_13_is_refused_for_a_cuda_12_torch_with_its_sources() -> None:
    q = Query(inference=True, onnxruntime=Version("1.31.1"))
    found = rule_onnxruntime(F, q, _combo("2.14.1", "cu126"))
    assert found.status is Status.FAIL
    assert found.reason == (
        "onnxruntime-gpu==1.31.1 is built for CUDA 13 (its cuda extra: CUDA 13 wheels); torch 2.14.1+cu126 loads "
        "CUDA 12: a second CUDA major in the venv"
    )
    assert set(found.sources) <= set(M.sources) and "pypi-onnxruntime-gpu" in found.sources


def test_no_release_for_the_python_is_a_failure_and_an_unrecorded_pin_is_not_checked() -> None:
    none = rule_onnxruntime(F, Query(inference=True), _combo("2.14.1", "cu130", "3.10"))
    assert none.status is Status.FAIL
    assert none.reason == (
        "no recorded onnxruntime-gpu release fits: onnxruntime-gpu==1.31.1 has no cp310 wheels (Python 3.11-3.14)"
    )
    unknown = rule_onnxruntime(F, Query(inference=True, onnxruntime=Version("1.30.0")), _combo("2.14.1", "cu130"))
    assert unknown.status is Status.NOT_CHECKED
    assert unknown.reason == "matrix.toml does not record onnxruntime-gpu==1.30.0"


def test_a_variant_whose_cudnn_is_not_recorded_is_not_checked() -> None:
    c = _combo("2.15.0", "cu130")
    assert c.variant.cudnn is None
    found = rule_onnxruntime(F, Query(inference=True), c)
    assert found.status is Status.NOT_CHECKED
    assert "cuDNN is not recorded" in found.reason


def test_the_inference_stage_pins_the_exporter_and_ort_on_the_shared_venv() -> None:
    p = plan("torch2.14.1-cu130-py3.11-debian12")
    assert _combo("2.14.1", "cu130").variant.cuda_runtime == "cuda-toolkit==13.0.3"  # torch's pin, CURAND's release
    assert p.spec.inference_pip == ("onnx==1.23.2", "onnxscript==0.7.2", CURAND, "onnxruntime-gpu==1.31.1")
    stage = p.dockerfile.split("FROM venv AS inference\n", 1)[1]
    assert (
        f"-c /opt/torchyard/constraints.txt 'onnx==1.23.2' 'onnxscript==0.7.2' '{CURAND}' 'onnxruntime-gpu==1.31.1'"
        in stage
    )
    assert "nvidia" not in stage.split("COPY --from=manifests", 1)[0]  # no nvidia-* extras: torch's libraries
    target = p.target(Flavor.INFERENCE)
    assert target.tags.immutable == "2.14.1-cuda13.0-cudnn9-py3.11-debian12-inference"
    assert (
        dict(target.labels)["io.torchyard.inference"]
        == f"onnx==1.23.2 onnxscript==0.7.2 {CURAND} onnxruntime-gpu==1.31.1"
    )
    assert "io.torchyard.inference" not in dict(p.target(Flavor.RUNTIME).labels)


def test_a_combination_without_a_fitting_ort_has_no_inference_image_and_says_why() -> None:
    p = plan("torch2.14.1-cu130-py3.10-debian12")
    reasons = dict(p.unavailable)
    assert reasons[Flavor.INFERENCE] == (
        "no ONNX Runtime for it: no recorded onnxruntime-gpu release fits: onnxruntime-gpu==1.31.1 has no cp310 "
        "wheels (Python 3.11-3.14)"
    )
    assert "AS inference" not in p.dockerfile


def test_explain_refuses_a_cu12_torch_with_an_ort_for_cuda_13_naming_the_source(cli: Cli) -> None:
    flags = ("--torch", "2.14.1", "--variant", "cu126", "--python", "3.11", "--os", "debian12")
    run = cli("explain", *flags, "--onnxruntime", "1.31.1")
    assert run.code == 1
    lines = run.out.splitlines()
    assert lines[0] == "torch2.14.1-cu126-py3.11-debian12: WILL NOT RUN"
    failed = next(i for i, line in enumerate(lines) if "onnxruntime" in line)
    assert lines[failed].split()[:2] == ["FAIL", "onnxruntime"]
    assert "source: https://pypi.org/project/onnxruntime-gpu/#history" in lines[failed + 1]


def test_lookup_for_the_inference_image_rules_out_what_has_no_ort(cli: Cli) -> None:
    run = cli("lookup", "--torch", "2.14.1", "--python", "3.10", "--variant", "cu130", "--inference")
    assert run.code == 1
    assert "onnxruntime-gpu==1.31.1 has no cp310 wheels (Python 3.11-3.14)" in run.err + run.out


def _render(cli: Cli, tmp_path: Path, *flags: str) -> Run:
    pin = ("--torch", "2.14.1", "--python", "3.11", "--os", "debian12", "--any-host", "--no-host-settings")
    return cli("render", *pin, "-o", str(tmp_path / "out"), *flags)


def test_tensorrt_asked_without_nvidias_index_is_refused_in_one_line_with_the_reason(cli: Cli, tmp_path: Path) -> None:
    run = _render(cli, tmp_path, "--target", "inference", "--tensorrt")
    assert (run.code, run.out) == (2, "")
    assert run.err == (
        "torchyard: error: --tensorrt: TensorRT's PyPI packages are stubs that download the libraries from NVIDIA's "
        "index (https://pypi.org/project/tensorrt/): give --nvidia-index-url\n"
    )
    assert not (tmp_path / "out").exists()


def test_tensorrt_with_an_index_is_refused_as_not_implemented_and_the_url_is_not_echoed(
    cli: Cli, tmp_path: Path
) -> None:
    run = _render(
        cli, tmp_path, "--target", "inference", "--tensorrt", "--nvidia-index-url", "https://u:s3cret@nv.example"
    )
    assert run.code == 2
    assert "not implemented in this torchyard yet" in run.err and "s3cret" not in run.err + run.out
    assert _render(cli, tmp_path, "--target", "runtime", "--tensorrt").code == 2  # runtime never has it


def test_an_inference_render_says_in_one_line_why_tensorrt_is_not_in_it(cli: Cli, tmp_path: Path) -> None:
    run = _render(cli, tmp_path, "--target", "inference")
    assert run.code == 0, run.err
    said = [line for line in run.err.splitlines() if "TensorRT" in line]
    assert said == [
        "torchyard: inference: no TensorRT in the image: its PyPI packages are stubs that download from NVIDIA's "
        "index (https://pypi.org/project/tensorrt/) (--tensorrt with --nvidia-index-url asks for it)"
    ]
    dockerfile = (tmp_path / "out" / "Dockerfile").read_text()
    assert "tensorrt" not in dockerfile.lower()
    assert "TensorRT" not in _render(cli, tmp_path, "--target", "runtime", "--force").err


def test_lookup_for_the_inference_image_offers_that_image_its_build_and_its_packages(cli: Cli) -> None:
    """What lookup --inference names is the inference image `build --target inference` makes, and the pip line
    installs what render puts into it; without --inference, the runtime image."""
    query = ("lookup", "--torch", "2.14.1", "--python", "3.11", "--variant", "cu130", "--os", "debian12")
    run = cli(*query, "--inference")
    assert run.code == 0, run.err
    block = dict(line.strip().split(":", 1) for line in run.out.split("\n\n")[0].splitlines()[1:])
    image, build, pip = block["image"].strip(), block["build"].strip(), block["pip"].strip()
    assert image.endswith("-inference") and build.endswith("--target inference")
    dry = cli(*build.split()[1:], "--dry-run", "--any-host", "--no-host-settings")
    assert dry.code == 0 and f"    {image}\n" in dry.out, dry.out + dry.err
    packages = {t.name: str(t.version) for t in onnx.tools(M, _combo("2.14.1", "cu130"))}
    wanted = [f"{name}=={version}" for name, version in packages.items()] + [CURAND, "onnxruntime-gpu==1.31.1"]
    assert pip.split(" && ")[1] == shlex.join(["pip", "install", *wanted])  # as a shell takes it: CURAND quoted
    listed = cli(*query, "--inference", "--json")
    assert listed.code == 0 and '"image": "' + image + '"' in listed.out
    plain = cli(*query)
    assert "-runtime\n" in plain.out and "--target" not in plain.out.split("\n\n")[0] and "onnx" not in plain.out
