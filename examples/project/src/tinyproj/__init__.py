"""tinyproj: torchyard's example project (examples/project/README.md)."""

__version__ = "0.1.0"
