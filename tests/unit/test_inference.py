"""The inference flavor: which ONNX Runtime a combination takes (the rule onnxruntime), its refusals with their
sources, the render's stage and labels, and lookup / explain / render on the command line."""

from __future__ import annotations

from packaging.version import Version
from render_kit import matrix, plan
from test_cli_lookup import Cli, cli

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
    assert p.spec.inference_pip == ("onnx==1.23.2", "onnxscript==0.7.2", "onnxruntime-gpu==1.31.1")
    stage = p.dockerfile.split("FROM venv AS inference\n", 1)[1]
    assert "-c /opt/torchyard/constraints.txt 'onnx==1.23.2' 'onnxscript==0.7.2' 'onnxruntime-gpu==1.31.1'" in stage
    assert "nvidia" not in stage.split("COPY --from=manifests", 1)[0]  # no nvidia-* extras: torch's libraries
    target = p.target(Flavor.INFERENCE)
    assert target.tags.immutable == "2.14.1-cuda13.0-cudnn9-py3.11-debian12-inference"
    assert dict(target.labels)["io.torchyard.inference"] == "onnx==1.23.2 onnxscript==0.7.2 onnxruntime-gpu==1.31.1"
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
