"""TensorRT in the inference image: why it is not there, in one line, and the refusal when it is asked for.

TensorRT's PyPI packages (tensorrt, tensorrt-cu13, tensorrt-cu13-libs) are source stubs of 15-18 kB whose install
downloads the libraries from NVIDIA's own index (matrix.toml: pypi-tensorrt-stubs); torch-tensorrt 2.14.0 pins
torch>=2.14.0,<2.15.0 and tensorrt>=11.1.0,<11.2.0 (pypi-torch-tensorrt). A build that reached NVIDIA's index
without saying so would not be reproducible from PyPI, so TensorRT needs --nvidia-index-url; installing it (and
building an engine in the GPU checks) is not implemented yet: --tensorrt is refused either way (exit 2), with
the reason. No TensorRT engine is ever baked into an image: an engine is tied to one GPU and one TensorRT.
"""

from __future__ import annotations

from builder.core.errors import UsageError
from builder.core.kinds import Flavor
from builder.matrix.model import Matrix

STUBS, TORCH_TENSORRT = "pypi-tensorrt-stubs", "pypi-torch-tensorrt"
SOURCES = (STUBS, TORCH_TENSORRT)


def _url(m: Matrix, ident: str) -> str:
    source = m.sources.get(ident)
    return f" ({source.url})" if source else ""


def check_tensorrt(m: Matrix, asked: bool, index_given: bool, flavors: tuple[Flavor, ...]) -> str | None:
    """The one line render and build print for an inference image without TensorRT (None: nothing to say);
    a UsageError when TensorRT was asked for. The index URL itself is never repeated (it may hold credentials)."""
    if asked and Flavor.INFERENCE not in flavors:
        raise UsageError("--tensorrt: TensorRT goes into the inference image only: add --target inference (or all)")
    if asked and not index_given:
        raise UsageError(
            "--tensorrt: TensorRT's PyPI packages are stubs that download the libraries from NVIDIA's index"
            f"{_url(m, STUBS)}: give --nvidia-index-url"
        )
    if asked:
        raise UsageError(
            "--tensorrt: installing TensorRT (torch-tensorrt, which pins one torch minor and one TensorRT minor"
            f"{_url(m, TORCH_TENSORRT)}) into the inference image is not implemented in this torchyard yet "
            "(docs/render.md, The inference image); the image has ONNX Runtime without it"
        )
    if index_given:
        raise UsageError("--nvidia-index-url: only --tensorrt uses NVIDIA's index")
    if Flavor.INFERENCE in flavors:
        return (
            "inference: no TensorRT in the image: its PyPI packages are stubs that download from NVIDIA's index"
            f"{_url(m, STUBS)} (--tensorrt with --nvidia-index-url asks for it)"
        )
    return None
