"""torchyard: PyTorch + CUDA container images whose compatibility is a checked fact."""

__version__ = "0.1.0"
