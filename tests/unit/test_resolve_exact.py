"""resolve's combination stack, python rules and ONNX Runtime choice checked whole, rule name and sources included
(written for the survivors of `bench/mutation.py resolve`, docs/mutation.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from matrix_kit import combo, fake_os, real
from packaging.version import Version

from builder.resolve import onnx, rules
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.rules.check import Check, Missing

M = real()
PY_SOURCES = ("distro-packages", "python-images")
SLIM_312 = "python:3.12-slim-bookworm"


def test_the_stack_of_a_cuda_and_a_cpu_combination() -> None:
    assert combo(M, "2.14.1", "cu130").stack() == {
        "torch": "2.14.1+cu130",
        "torchvision": "0.29.1",
        "torchaudio": "2.11.1",
        "cuda": "13.0",
        "cudnn": "9.24.0.43",
        "nccl": "2.30.7",
        "python": "3.11",
        "os": "debian12",
    }
    cpu = combo(M, "2.14.1", "cpu", python="3.12").stack()
    assert (cpu["torch"], cpu["cuda"], cpu["cudnn"], cpu["nccl"], cpu["python"]) == (
        "2.14.1+cpu",
        None,
        None,
        None,
        "3.12",
    )


def torch_check(ok: bool, reason: str) -> Check:
    return Check("python-torch", ok, f"torch 2.14.1 has {reason}", ("pypi-torch",))


@pytest.mark.parametrize(
    ("platform", "python", "check"),
    [
        ("linux/amd64", "3.11", torch_check(True, "cp311 wheels")),
        ("linux/arm64", "3.12", torch_check(True, "cp312 wheels for linux/arm64")),
        ("linux/arm64", "3.9", torch_check(False, "no wheels for Python 3.9 for linux/arm64 (wheels: 3.10-3.14)")),
    ],
)
def test_python_torch_says_which_wheels(platform: str, python: str, check: Check) -> None:
    found = combo(M, "2.14.1", "cu130", python=python, platform=platform)
    assert rules.rule_python_torch(Facts(M), Query(), found) == check


def test_python_torch_without_wheels_for_the_platform() -> None:
    found = combo(M, "2.14.1", "cu130")
    release = replace(found.torch, wheels=tuple(w for w in found.torch.wheels if w.platform.value != "linux/amd64"))
    check = rules.rule_python_torch(Facts(M), Query(), replace(found, torch=release))
    assert check == Check("python-torch", False, "torch 2.14.1 has no linux/amd64 wheels", ("pypi-torch",))


@pytest.mark.parametrize(
    ("python", "os", "check"),
    [
        ("3.11", "debian12", Check("python-os", True, "debian12 ships Python 3.11", PY_SOURCES)),
        ("3.12", "debian12", Check("python-os", True, f"Python 3.12 from the official {SLIM_312} image", PY_SOURCES)),
        ("3.12", "ubuntu22.04", Check("python-os", False, "ubuntu22.04 offers Python 3.10, not 3.12", PY_SOURCES)),
    ],
)
def test_python_os_says_where_python_comes_from(python: str, os: str, check: Check) -> None:
    assert rules.rule_python_os(Facts(M), Query(), combo(M, "2.14.1", "cu130", python=python, os=os)) == check


def ort(ident: str) -> object:
    return next(r for r in M.onnxruntime if r.id == ident)


def test_an_onnx_runtime_of_the_other_kind_is_refused_naming_both() -> None:
    cuda, cpu = combo(M, "2.14.1", "cu130"), combo(M, "2.14.1", "cpu")
    assert onnx.problem(ort("onnxruntime==1.32.0"), cuda) == (  # type: ignore[arg-type]
        "onnxruntime==1.32.0 is for a CPU torch; torch 2.14.1+cu130 takes onnxruntime-gpu"
    )
    assert onnx.problem(ort("onnxruntime-gpu==1.31.1"), cpu) == (  # type: ignore[arg-type]
        "onnxruntime-gpu==1.31.1 is for a CUDA torch; torch 2.14.1+cpu takes onnxruntime"
    )


def test_the_chosen_onnx_runtime_says_why_it_fits() -> None:
    cuda = onnx.choose(M, combo(M, "2.14.1", "cu130", python="3.12"))
    assert cuda.release is not None and cuda.sources == onnx.SOURCES and not cuda.unrecorded
    assert cuda.reason == (
        f"{cuda.release.id} is built for CUDA 13 / cuDNN 9, the majors torch 2.14.1+cu130 loads; cp312 wheels for "
        "linux/amd64"
    )
    cpu = onnx.choose(M, combo(M, "2.14.1", "cpu", python="3.12"))
    assert cpu.release is not None and cpu.sources == onnx.CPU_SOURCES
    assert cpu.reason == "onnxruntime==1.32.0 (CPU) has cp312 wheels for linux/amd64"


def test_a_pin_the_matrix_does_not_record_is_unrecorded_with_its_sources() -> None:
    found = onnx.choose(M, combo(M, "2.14.1", "cu130"), Version("0.1"))
    assert found == onnx.OrtChoice(
        None, "matrix.toml does not record onnxruntime-gpu==0.1", onnx.SOURCES, unrecorded=True
    )


def test_a_cuda_torch_without_a_recorded_cudnn_is_unrecorded_with_its_sources() -> None:
    found = combo(M, "2.14.1", "cu130")
    found = replace(found, variant=replace(found.variant, cudnn=None))
    choice = onnx.choose(M, found)
    assert (choice.release, choice.sources, choice.unrecorded) == (None, onnx.SOURCES, True)


def test_no_release_fitting_names_the_nearest_of_torchs_cuda_major() -> None:
    old = combo(M, "2.14.1", "cu130", python="3.9")
    choice = onnx.choose(M, replace(old, python="3.99"))
    assert choice.release is None and choice.sources == onnx.SOURCES and not choice.unrecorded
    assert choice.reason.startswith("no recorded onnxruntime-gpu release fits: onnxruntime-gpu==1.31.1 has no cp399")


def test_the_inference_packages_are_the_exporters_then_the_runtime() -> None:
    found = combo(M, "2.14.1", "cu130")
    pins = onnx.packages(M, found)
    # the runtime: libcurand (ORT's CUDA provider links it) from the cuda-toolkit release torch pins, then ORT
    assert found.variant.cuda_runtime == "cuda-toolkit==13.0.3"
    assert pins[-2:] == ("cuda-toolkit[curand]==13.0.3", "onnxruntime-gpu==1.31.1")
    assert [p.split("==")[0] for p in pins[:-2]] == [t.name for t in onnx.tools(M, found)] != []
    none = onnx.OrtChoice(None, "none fits", onnx.SOURCES)
    assert onnx.packages(M, found, none) == pins[:-2]


def test_exporter_packages_need_the_torch_the_python_and_the_platform() -> None:
    found = combo(M, "2.14.1", "cu130")
    assert onnx.tools(M, found)
    assert onnx.tools(M, replace(found, python="3.8")) == ()
    old = next(t for t in M.torch if str(t.version) == "2.1.0")
    assert onnx.tools(M, replace(found, torch=old)) == ()


GLIBC_SOURCES = ("manylinux", "pypi-torch")
_NVIDIA = "torch manylinux_2_28_x86_64; highest NVIDIA wheel: nvidia-cudnn-cu13==9.24.0.43 manylinux_2_27_x86_64"
_WITH_NVIDIA = (*GLIBC_SOURCES, "pypi-nvidia-wheels")


@pytest.mark.parametrize(
    ("glibc", "check"),
    [
        ("2.28", Check("glibc-os", True, f"eq glibc 2.28 >= 2.28 ({_NVIDIA})", _WITH_NVIDIA)),
        ("2.27", Check("glibc-os", False, f"eq glibc 2.27 < 2.28 ({_NVIDIA})", _WITH_NVIDIA)),
    ],
)
def test_glibc_os_at_the_wheels_floor(glibc: str, check: Check) -> None:
    """torch 2.14.1 cu130's cuDNN, NCCL and cuda-toolkit wheels are recorded ([[nvidia_wheel]]): torch's tag is the
    highest floor, and the reason names the highest NVIDIA one beside it."""
    found = replace(combo(M, "2.14.1", "cu130"), os=fake_os("eq", glibc))
    assert rules.rule_glibc_os(Facts(M), Query(), found) == check


def test_glibc_os_without_wheels_or_with_a_tag_of_no_recorded_glibc() -> None:
    found = combo(M, "2.14.1", "cu130")
    arm_only = replace(found.torch, wheels=tuple(w for w in found.torch.wheels if w.platform.value != "linux/amd64"))
    assert rules.rule_glibc_os(Facts(M), Query(), replace(found, torch=arm_only)) == Check(
        "glibc-os", False, "torch 2.14.1 has no linux/amd64 wheels", GLIBC_SOURCES
    )
    odd = replace(found.torch, wheels=tuple(replace(w, platform_tag="linux_x86_64") for w in found.torch.wheels))
    check = rules.rule_glibc_os(Facts(M), Query(), replace(found, torch=odd))
    assert (check.rule, check.ok, check.sources, check.missing) == ("glibc-os", True, GLIBC_SOURCES, Missing.FACT)
    assert check.reason == "the glibc of platform tag linux_x86_64 is not recorded"


def test_companions_say_which_refuses_or_that_both_accept() -> None:
    sources = ("pypi-torchvision", "pypi-torchaudio")
    found = combo(M, "2.14.1", "cu130")
    assert rules.rule_companions(Facts(M), Query(), found) == Check(
        "companions", True, "torchvision 0.29.1 and torchaudio 2.11.1 accept torch 2.14.1 on Python 3.11", sources
    )
    assert rules.rule_companions(Facts(M), Query(), replace(found, python="3.9")) == Check(
        "companions", False, "torchvision 0.29.1 requires Python!=3.14.1,>=3.10", sources
    )


def test_a_matrix_without_any_release_of_the_package_says_so() -> None:
    found = onnx.choose(replace(M, onnxruntime=()), combo(M, "2.14.1", "cu130"))
    assert found == onnx.OrtChoice(
        None, "matrix.toml does not record any onnxruntime-gpu release", onnx.SOURCES, unrecorded=True
    )


def test_the_nearest_release_named_is_one_of_torchs_cuda_major_not_the_newest() -> None:
    choice = onnx.choose(M, replace(combo(M, "2.14.1", "cu126"), python="3.99"))
    assert choice.reason.startswith("no recorded onnxruntime-gpu release fits: onnxruntime-gpu==1.26.0 has no cp399")
