"""The rules of the inference flavor: an ONNX Runtime release fits the combination's venv (builder/resolve/onnx.py),
and that release's CUDA provider has code for every GPU asked.

Asked only when the question is about the inference image (lookup / explain --flavor inference, or --onnxruntime).
"""

from __future__ import annotations

from builder.core.archs import Arch
from builder.matrix.model import OnnxRuntime, WheelCode
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.onnx import choose
from builder.resolve.query import Query
from builder.resolve.rules.arch import arch_support
from builder.resolve.rules.check import ArchSupport, Check, Missing, not_checked

ARCH_RULE = "onnxruntime-arch"
ARCH_SOURCES = ("arch-suffixes", "ort-no-kernel-image")


def rule_onnxruntime(f: Facts, q: Query, c: Combination) -> Check:
    found = choose(f.matrix, c, q.onnxruntime)
    if found.unrecorded:
        return not_checked("onnxruntime", found.reason, found.sources, Missing.FACT)
    return Check("onnxruntime", found.release is not None, found.reason, found.sources)


def rule_onnxruntime_arch(f: Facts, q: Query, c: Combination) -> Check:
    """The release `onnxruntime` takes must carry SASS or PTX every GPU asked can run (arch-torch's binary
    compatibility: arch_support), read from its wheels' libonnxruntime_providers_cuda.so ([onnxruntime.<platform>])."""
    ort = choose(f.matrix, c, q.onnxruntime).release
    if ort is None:
        return Check(ARCH_RULE, True, "no ONNX Runtime release is taken (the rule onnxruntime says why)", ARCH_SOURCES)
    if ort.package != "onnxruntime-gpu":
        return Check(ARCH_RULE, True, f"{ort.id} runs on the CPU: no GPU code needed", ARCH_SOURCES)
    code = ort.code_on(c.platform)
    if code is None:
        reason = f"the GPU code of {ort.id}'s {c.platform.value} wheels is not recorded (read from no wheel)"
        return not_checked(ARCH_RULE, reason, ARCH_SOURCES, Missing.FACT)
    sources = (*ARCH_SOURCES, *code.sources)
    if not q.archs:
        condition = f"a GPU {ort.id} has code for ({code_list(code)})"
        return not_checked(ARCH_RULE, "no GPU given", sources, Missing.INPUT, condition)
    reasons = []
    for arch in q.archs:
        support, used = arch_support(arch, code.sass, code.ptx)
        if support is ArchSupport.NONE:
            return Check(ARCH_RULE, False, _no_code(arch, ort, code), sources)
        reasons.append(_runs(arch, support, used, ort))
    return Check(ARCH_RULE, True, "; ".join(reasons), sources)


def code_list(code: WheelCode) -> str:
    names = " ".join(a.name for a in code.sass)
    ptx = f"PTX {' '.join(a.name for a in code.ptx)}" if code.ptx else "no PTX"
    return f"{names}; {ptx}"


def _no_code(arch: Arch, ort: OnnxRuntime, code: WheelCode) -> str:
    return (
        f"{arch.base.name} has no code in {ort.id}'s CUDA provider ({code.platform.value} wheels: {code_list(code)}): "
        f'it fails with "no kernel image is available for execution on the device"'
    )


def _runs(arch: Arch, support: ArchSupport, used: Arch | None, ort: OnnxRuntime) -> str:
    gpu = arch.base.name
    if support is ArchSupport.NATIVE:
        return f"{gpu}: native SASS ({used}) in {ort.id}"
    if support is ArchSupport.COMPATIBLE:
        return f"{gpu} runs {ort.id}'s {used} SASS (same major, lower minor)"
    return f"{gpu}: only PTX of {used} in {ort.id}, JIT-compiled by the driver at first use"
