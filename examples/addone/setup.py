"""A tiny real CUDA extension: out = x + 1 on the GPU. torchyard's tests build it for --arch lists."""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="addone",
    version="1.0.0",
    packages=["addone"],
    ext_modules=[CUDAExtension("addone._C", ["csrc/addone.cpp", "csrc/addone_kernel.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
