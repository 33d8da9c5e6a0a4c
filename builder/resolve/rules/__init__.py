"""The compatibility rules, each a named function of (facts, query, combination) -> Check.

Sources for the rules are ids in matrix.toml's [sources]; docs/rules.md explains each rule.
"""

from builder.resolve.rules.arch import arch_support, rule_arch_cuda, rule_arch_torch, worst_support
from builder.resolve.rules.check import ArchSupport, Check, DriverMode, Rule
from builder.resolve.rules.combo import rule_companions, rule_glibc_os, rule_python_os, rule_python_torch
from builder.resolve.rules.cudnn import rule_cudnn_arch, rule_cudnn_cuda
from builder.resolve.rules.driver import driver_mode, rule_driver_cuda, rule_ptx_driver
from builder.resolve.rules.host import rule_driver_gpu, rule_platform
from builder.resolve.rules.inference import rule_onnxruntime, rule_onnxruntime_arch

# Rules that depend only on the torch release, the wheel variant and the platform (evaluated once per
# variant), then rules that also look at the Python and the OS base.
VARIANT_RULES: tuple[Rule, ...] = (
    rule_platform,
    rule_driver_gpu,
    rule_driver_cuda,
    rule_arch_torch,
    rule_ptx_driver,
    rule_arch_cuda,
    rule_cudnn_cuda,
    rule_cudnn_arch,
)
COMBO_RULES: tuple[Rule, ...] = (rule_python_torch, rule_python_os, rule_glibc_os, rule_companions)
# Rules of the inference image, asked when the question is about it (Query.inference).
INFERENCE_RULES: tuple[Rule, ...] = (rule_onnxruntime, rule_onnxruntime_arch)
RULES: tuple[Rule, ...] = VARIANT_RULES + COMBO_RULES + INFERENCE_RULES

__all__ = [
    "COMBO_RULES",
    "INFERENCE_RULES",
    "RULES",
    "VARIANT_RULES",
    "ArchSupport",
    "Check",
    "DriverMode",
    "Rule",
    "arch_support",
    "driver_mode",
    "rule_arch_cuda",
    "rule_arch_torch",
    "rule_companions",
    "rule_cudnn_arch",
    "rule_cudnn_cuda",
    "rule_driver_cuda",
    "rule_driver_gpu",
    "rule_glibc_os",
    "rule_onnxruntime",
    "rule_onnxruntime_arch",
    "rule_platform",
    "rule_ptx_driver",
    "rule_python_os",
    "rule_python_torch",
    "worst_support",
]
