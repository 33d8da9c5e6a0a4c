"""x + 1 on the GPU (torchyard's example CUDA extension)."""

import torch  # noqa: F401  (loads libtorch before the extension)

from addone._C import add_one

__all__ = ["add_one"]
