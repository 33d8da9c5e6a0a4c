"""The rule of the inference flavor: an ONNX Runtime release fits the combination's venv (builder/resolve/onnx.py).

Asked only when the question is about the inference image (lookup / explain --flavor inference, or --onnxruntime).
"""

from __future__ import annotations

from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.onnx import choose
from builder.resolve.query import Query
from builder.resolve.rules.check import Check, Missing, not_checked


def rule_onnxruntime(f: Facts, q: Query, c: Combination) -> Check:
    found = choose(f.matrix, c, q.onnxruntime)
    if found.unrecorded:
        return not_checked("onnxruntime", found.reason, found.sources, Missing.FACT)
    return Check("onnxruntime", found.release is not None, found.reason, found.sources)
