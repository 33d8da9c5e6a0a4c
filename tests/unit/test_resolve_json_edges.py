"""builder/resolve's JSON shapes and messages at their edges: lookup's result object field by field (a CUDA
and a CPU combination), explain's verdict with and without --here, a check in JSON, the lines CANNOT TELL prints,
--cuda's wheel spellings, --variant's refusal, the message when nothing is valid, choose with a problem and
an ONNX Runtime release the matrix does not record, min_driver without a minor-version floor. Written for the survivors
of `bench/mutation.py resolve` (docs/mutation.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from matrix_kit import BASE, combo, edit, query, real, small
from packaging.version import Version

from builder.core.archs import parse_arch
from builder.core.errors import NoMatchError, UsageError
from builder.resolve.choose import choose, failure_message
from builder.resolve.facts import Facts
from builder.resolve.report import explanation_json, min_driver, result_json, verdict_json
from builder.resolve.resolver import Explanation, Lookup, lookup
from builder.resolve.rules import arch as arch_rule
from builder.resolve.rules import rule_onnxruntime
from builder.resolve.rules.check import Check, Missing, not_checked
from builder.resolve.verdict import Answer, check_json, status_words, verdict

M = real()
F = Facts(M)


def test_a_cuda_result_field_by_field() -> None:
    found = lookup(M, query(M, torch="2.5.1", cuda="12.4", python="3.11", driver="550", gpu="RTX 4090")).valid
    assert result_json(F, found[0]) == {
        "id": "torch2.5.1-cu124-py3.11-debian13",
        "torch": "2.5.1",
        "torch_local": "2.5.1+cu124",
        "torchvision": "0.20.1",
        "torchaudio": "2.5.1",
        "variant": "cu124",
        "cuda": "12.4",
        "cudnn": "9.1.0.70",
        "nccl": "2.21.5",
        "python": "3.11",
        "os": "debian13",
        "pypi_default": True,
        "index_url": None,
        "min_driver": "525.60.13",
        "driver_mode": "full",
        "sass": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
        "ptx": [],
        "arch_support": "compatible",
        "arch_code": "sm_86",
    }


def test_a_cpu_result_has_nulls_where_cuda_would_be() -> None:
    found = lookup(M, query(M, torch="2.5.1", variant="cpu", python="3.11")).valid
    assert result_json(F, found[0]) == {
        "id": "torch2.5.1-cpu-py3.11-debian13",
        "torch": "2.5.1",
        "torch_local": "2.5.1+cpu",
        "torchvision": "0.20.1",
        "torchaudio": "2.5.1",
        "variant": "cpu",
        "cuda": None,
        "cudnn": None,
        "nccl": None,
        "python": "3.11",
        "os": "debian13",
        "pypi_default": False,
        "index_url": "https://download.pytorch.org/whl/cpu",
        "min_driver": None,
        "driver_mode": None,
        "sass": None,
        "ptx": [],
    }


OPEN_DRIVER = not_checked("driver-cuda", "no driver given", ("s1",), Missing.INPUT, "driver >= 525.60.13")


def test_explanation_json_reads_open_inputs_as_conditions_unless_here() -> None:
    e = Explanation("torch2.5.1-cu124-py3.11-debian12", ("python: newest",), (OPEN_DRIVER,), None)
    assert explanation_json(e) == {
        "id": "torch2.5.1-cu124-py3.11-debian12",
        "valid": True,
        "verdict": "runs-with",
        "conditions": ["driver >= 525.60.13"],
        "to_tell": [],
        "pinned": ["python: newest"],
        "checks": [check_json(OPEN_DRIVER)],
    }
    here = explanation_json(e, here=True)
    assert (here["verdict"], here["conditions"], here["to_tell"]) == (
        "cannot-tell",
        [],
        ["driver-cuda: no driver given (needs driver >= 525.60.13)"],
    )


def test_check_json_of_each_status() -> None:
    assert check_json(Check("arch", True, "built for it", ("a", "b"))) == {
        "rule": "arch",
        "status": "pass",
        "ok": True,
        "reason": "built for it",
        "sources": ["a", "b"],
    }
    assert check_json(Check("arch", False, "no code")) == {
        "rule": "arch",
        "status": "fail",
        "ok": False,
        "reason": "no code",
        "sources": [],
    }
    assert check_json(OPEN_DRIVER) == {
        "rule": "driver-cuda",
        "status": "not-checked",
        "ok": None,
        "reason": "no driver given",
        "sources": ["s1"],
        "missing": "input",
        "condition": "driver >= 525.60.13",
    }
    fact = not_checked("cudnn", "no cuDNN range recorded", (), Missing.FACT)
    assert check_json(fact)["missing"] == "fact" and check_json(fact)["condition"] is None


def test_status_words() -> None:
    assert [status_words(c) for c in (Check("a", True, "x"), Check("a", False, "x"), OPEN_DRIVER)] == [
        "PASS",
        "FAIL",
        "NOT CHECKED",
    ]


def test_cannot_tell_says_what_to_give_or_record() -> None:
    fact = not_checked("cudnn", "no cuDNN range recorded", (), Missing.FACT)
    bare = not_checked("gpu", "no GPU given", (), Missing.INPUT)
    found = verdict((fact, bare, OPEN_DRIVER, bare))
    assert found.answer is Answer.CANNOT_TELL
    assert found.unknown == (
        "cudnn: no cuDNN range recorded (record it in matrix.toml, with its source)",
        "gpu: no GPU given",
        "driver-cuda: no driver given (needs driver >= 525.60.13)",
    )
    assert found.words == "CANNOT TELL" and found.exit_code == 6


@pytest.mark.parametrize(("text", "spec"), [("cu12", "==12.*"), ("cu124", "==12.4.*"), (" cu118 ", "==11.8.*")])
def test_cuda_takes_the_wheel_spellings(text: str, spec: str) -> None:
    assert str(query(M, cuda=text).cuda) == spec


def test_an_unknown_variant_is_refused_with_the_nearest_and_the_known_ones() -> None:
    with pytest.raises(UsageError) as raised:
        query(M, variant="cu1244")
    assert str(raised.value) == (
        "--variant: 'cu1244' is not a wheel variant in the matrix (did you mean 'cu124'?) "
        "(known: cpu, cu116, cu117, cu118, cu121, cu124, cu126, cu128, cu129, cu130, cu132)"
    )


# --- choose: the message of a NoMatchError ---------------------------------------------------------------


def test_failure_message_shows_eight_reasons_then_counts_the_rest() -> None:
    notes = tuple(f"note {n}" for n in range(1, 11))
    assert failure_message(Lookup((), (), notes[:8])) == "\n".join(
        ["no valid combination (0 ruled out)", *(f"  note {n}" for n in range(1, 9))]  # a note has no count
    )
    assert failure_message(Lookup((), (), notes), "nothing") == "\n".join(
        ["nothing (0 ruled out)", *(f"  note {n}" for n in range(1, 9)), "  ... and 2 more reasons"]
    )


def test_choose_names_the_architectures_only_when_several_were_asked() -> None:
    with pytest.raises(NoMatchError) as one:
        choose(M, query(M, driver="418", arch="sm_90"))
    assert str(one.value) == (
        "no valid combination (1001 ruled out)\n  sm_90 (Hopper) needs driver >= 520.56.06; driver 418 (any 418.x, "
        "read as the newest) lacks it  (1001 combinations)"
    )
    with pytest.raises(NoMatchError) as two:
        choose(M, query(M, driver="418", arch=("sm_90", "sm_80")))
    assert str(two.value).startswith("no valid combination runs on all of sm_90, sm_80 (1001 ruled out)\n")


def test_choose_with_a_problem_takes_the_best_without_one_or_names_the_best_ones() -> None:
    q = query(M, torch="2.5.1", python="3.11", os="debian12")
    ranked = [r.combo.id for r in lookup(M, q).valid]
    assert len(ranked) >= 3
    picked = choose(M, q, lambda c: None if c.id != ranked[0] else "no nvidia/cuda image")
    assert (picked.result.combo.id, picked.valid_count) == (ranked[1], len(ranked) - 1)
    assert picked.describe() == f"chose {ranked[1]} (the best of {len(ranked) - 1} valid combinations)"
    with pytest.raises(NoMatchError) as none:
        choose(M, q, lambda c: f"no image for {c.variant.name}")
    best = lookup(M, q).valid[0].combo
    assert str(none.value) == (
        f"none of the {len(ranked)} valid combinations can be built this way; the best, "
        f"{best.id}: no image for {best.variant.name}"
    )


def test_an_onnxruntime_release_the_matrix_does_not_record_is_not_checked() -> None:
    c = lookup(M, query(M, torch="2.14.1", variant="cpu", python="3.11", os="debian12")).valid[0].combo
    found = rule_onnxruntime(F, replace(query(M), inference=True, onnxruntime=Version("0.0.1")), c)
    assert found == Check(
        "onnxruntime",
        True,
        "matrix.toml does not record onnxruntime==0.0.1",
        ("pypi-onnxruntime",),
        Missing.FACT,
    )


def test_verdict_json_reads_open_inputs_as_conditions_by_default() -> None:
    # lookup --json calls it without `here`
    assert verdict_json((OPEN_DRIVER,)) == {
        "verdict": "runs-with",
        "conditions": ["driver >= 525.60.13"],
        "to_tell": [],
    }
    assert verdict_json((OPEN_DRIVER,), here=True)["verdict"] == "cannot-tell"


def test_a_result_without_code_for_the_gpu_says_none_and_no_code() -> None:
    rejected = lookup(M, query(M, torch="2.0.1", arch="sm_120")).rejected
    found = result_json(F, rejected[0])
    assert (found["arch_support"], found["arch_code"]) == ("none", None)


@pytest.mark.parametrize(
    ("gpu", "on"),
    [((), "a data-center GPU (assumed: no --gpu given)"), (("H100",), "NVIDIA H100")],
)
def test_forward_compatibility_names_the_gpu_or_says_it_assumed_one(gpu: tuple[str, ...], on: str) -> None:
    q = query(M, driver="535", forward_compat=True, torch="2.14.1", variant="cu130", python="3.11", gpu=gpu)
    found = lookup(M, q).valid[0]
    assert [c.reason for c in found.checks if c.rule == "driver-cuda"] == [
        f"driver branch 535 runs CUDA 13.0 through forward compatibility on {on}; the image needs the cuda-compat "
        "package (nvidia/cuda 13.0.2 carries it)"
    ]


def test_ptx_of_the_gpus_own_architecture_runs_on_it() -> None:
    assert arch_rule._ptx_runs(parse_arch("sm_90"), parse_arch("sm_90"))
    assert arch_rule._ptx_runs(parse_arch("sm_80"), parse_arch("sm_90"))
    assert not arch_rule._ptx_runs(parse_arch("sm_100"), parse_arch("sm_90"))


def test_a_gpu_whose_first_driver_is_not_recorded_is_not_checked_with_its_sources() -> None:
    found = lookup(M, query(M, driver="580", gpu="GTX 750 Ti")).valid[0]
    assert [c for c in found.checks if c.rule == "driver-gpu"] == [
        Check(
            "driver-gpu",
            True,
            "the first driver of GeForce GTX 750 Ti is not recorded",
            ("nvidia-gpu-tables", "nvidia-arch-matrix"),
            Missing.FACT,
        )
    ]


@pytest.mark.parametrize(
    ("torch", "variant", "codes"),
    [
        ("2.5.1", "cu124", "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90; no PTX"),
        ("2.8.0", "cu129", "sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120; PTX sm_120"),
    ],
)
def test_without_a_gpu_the_condition_lists_the_builds_code(torch: str, variant: str, codes: str) -> None:
    found = lookup(M, query(M, torch=torch, variant=variant, python="3.11", driver="580")).valid[0]
    assert arch_rule.gpu_condition(found.combo) == f"a GPU the build has code for ({codes})"
    assert [c.condition for c in found.checks if c.rule == "arch-torch"] == [f"a GPU the build has code for ({codes})"]


def test_min_driver_without_a_minor_version_floor_is_the_full_level_driver_or_none() -> None:
    no_mvc = small(edit(BASE, 'major = 12\nmvc_min_driver = "525.60.13"\n', "major = 12\n"))
    f = Facts(no_mvc)
    assert min_driver(f, combo(no_mvc, "2.5.1", "cu118")) == "450.80.02"  # CUDA 11's floor is still recorded
    cu124 = combo(no_mvc, "2.5.1", "cu124")
    assert min_driver(f, cu124) == "550.54.15"
    unrecorded = replace(cu124, variant=replace(cu124.variant, cuda=Version("12.6")))  # no [[cuda]] 12.6 entry
    assert min_driver(f, unrecorded) is None
    assert min_driver(f, combo(no_mvc, "2.5.1", "cpu")) is None
