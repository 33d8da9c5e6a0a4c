"""ONNX Runtime under the simulated GPUs, and the inference check's faults. Test-only; armed by torchyard_gpu_sim
(with torch) and patched right after onnxruntime's own import.

- Simulated GPUs (TORCHYARD_GPU_SIM): the CPU onnxruntime claims the CUDA provider, as onnxruntime-gpu does; a
  session asked for it runs on the CPU and reports ["CUDAExecutionProvider", "CPUExecutionProvider"].
- ort_cpu_fallback (TORCHYARD_SMOKE_FAULTS): a session reports the CPU provider only, as onnxruntime-gpu does when it
  cannot load CUDA or cuDNN (it falls back without an error).
- ort_perturbed: every output of InferenceSession.run is off by 1e-2, like a runtime that computes wrong.
- With the simulation's `"record": PATH`, each session's providers as the caller asked for them, and torch's thread
  count when it was made ({"op": "ort_session"}).

Standard library (+ onnxruntime, numpy) only; runs in the images (Python >= 3.8).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Optional

from torchyard_after_import import after_import

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"


Note = Optional[Callable[[Dict[str, Any]], None]]


def arm(sim: bool, faults: list[str], note: Note = None) -> None:
    if sim or {"ort_cpu_fallback", "ort_perturbed"} & set(faults):
        after_import("onnxruntime", lambda ort: patch(ort, sim, faults, note))


def patch(ort: Any, sim: bool, faults: list[str], note: Note = None) -> None:
    real_session, real_available = ort.InferenceSession, ort.get_available_providers
    fallback, perturbed = "ort_cpu_fallback" in faults, "ort_perturbed" in faults

    class InferenceSession(real_session):  # type: ignore[misc, valid-type]
        def __init__(self, path: Any, *args: Any, providers: Any = None, **kwargs: Any) -> None:
            if note is not None:
                torch = sys.modules.get("torch")
                threads = torch.get_num_threads() if torch is not None else None
                note({"op": "ort_session", "providers": providers, "torch_threads": threads})
            asked = list(providers or [CPU])
            self._simulated = sim and CUDA in asked and not fallback
            super().__init__(path, *args, providers=[p for p in asked if p != CUDA] or [CPU], **kwargs)

        def get_providers(self) -> list[str]:
            found = list(super().get_providers())
            return [CUDA, *found] if self._simulated else found

        def run(self, *args: Any, **kwargs: Any) -> Any:
            outputs = super().run(*args, **kwargs)
            return [o + 1e-2 for o in outputs] if perturbed else outputs

    def get_available_providers() -> list[str]:
        found = list(real_available())
        return [CUDA, *found] if sim and CUDA not in found else found

    ort.InferenceSession = InferenceSession
    ort.get_available_providers = get_available_providers
