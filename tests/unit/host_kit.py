"""Recorded machines for the host probe and doctor: what nvidia-smi, lspci, /proc and `docker info` printed.

Each output is written the way the tool prints it (formats from NVIDIA's docs and public logs, collected in
docs/troubleshooting.md's sources): `nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version,
mig.mode.current --format=csv,noheader,nounits`, `lspci -nn -d 10de:`, /proc/driver/nvidia/version.
RunEngine is the engine as `torchyard run` sees it (the images here, the team's registry, the containers started).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from builder.core.errors import PushError, TorchyardError
from builder.engine.interactive import ContainerSpec, Exited
from builder.engine.types import ImageInfo, RegistryAuth
from builder.host.gpus import QUERY
from builder.host.system import NOT_FOUND, Ran

SMI = ("nvidia-smi", f"--query-gpu={','.join(QUERY)}", "--format=csv,noheader,nounits")
SMI_NO_CC = (
    "nvidia-smi",
    f"--query-gpu={','.join(q for q in QUERY if q != 'compute_cap')}",
    "--format=csv,noheader,nounits",
)
LSPCI = ("lspci", "-nn", "-d", "10de:")
HOOK = ("sh", "-c", "command -v nvidia-container-runtime-hook")


def proc_version(driver: str, arch: str = "x86_64") -> str:
    return (
        f"NVRM version: NVIDIA UNIX Open Kernel Module for {arch}  {driver}  Release Build  "
        "(dvs-builder@U16-I3-B03-4-3)  Fri Aug 16 21:42:42 UTC 2024\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )


DOCKER_WITH_TOOLKIT: dict[str, Any] = {
    "ServerVersion": "24.0.7",
    "Runtimes": {"io.containerd.runc.v2": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"}},
    "DefaultRuntime": "runc",
}
DOCKER_PLAIN: dict[str, Any] = {
    "ServerVersion": "20.10.24+dfsg1",
    "Runtimes": {"io.containerd.runc.v2": {"path": "runc"}, "runc": {"path": "runc"}},
    "DefaultRuntime": "runc",
}


@dataclass
class FakeSystem:
    """Commands answer from `commands` (argv -> Ran; anything else: not installed), files from `files`."""

    machine_name: str = "x86_64"
    commands: Mapping[tuple[str, ...], Ran] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    ran: list[tuple[str, ...]] = field(default_factory=list)

    def run(self, argv: list[str], timeout: float = 10.0) -> Ran:
        self.ran.append(tuple(argv))
        return self.commands.get(tuple(argv), Ran(NOT_FOUND, "", f"{argv[0]}: command not found"))

    def read(self, path: str, limit: int = 1 << 20) -> str | None:
        return self.files.get(path)

    def glob(self, pattern: str) -> list[str]:
        folder, _, suffix = pattern.partition("*")
        return sorted(p for p in self.files if p.startswith(folder) and p.endswith(suffix))

    def machine(self) -> str:
        return self.machine_name


def machine(
    smi: str | None = None,
    *,
    smi_code: int = 0,
    arch: str = "x86_64",
    driver: str | None = None,
    lspci: str = "",
    toolkit: bool = True,
    files: Mapping[str, str] | None = None,
) -> FakeSystem:
    commands: dict[tuple[str, ...], Ran] = {}
    if smi is not None:
        commands[SMI] = Ran(smi_code, smi if smi_code == 0 else "", "" if smi_code == 0 else smi)
    if lspci:
        commands[LSPCI] = Ran(0, lspci)
    if toolkit:
        commands[HOOK] = Ran(0, "/usr/bin/nvidia-container-runtime-hook\n")
    found = dict(files or {})
    if driver:
        found["/proc/driver/nvidia/version"] = proc_version(driver, arch)
    return FakeSystem(arch, commands, found)


# -- the machines -------------------------------------------------------------------------------------------

# A consumer card on an old driver: RTX 4090 with the 535 LTS driver.
RTX4090_535 = "0, NVIDIA GeForce RTX 4090, 8.9, 24564, 535.104.05, [N/A]\n"
# The same card on CUDA 11.8's driver: no CUDA 12 build runs (>= 525.60.13), and the newest cu118 wheels
# (torch 2.6, 2.7) have no recorded compiled architectures.
RTX4090_520 = RTX4090_535.replace("535.104.05", "520.61.05")
# Two data-center GPUs (H100 SXM5) on 550 and on 580.
H100 = "{i}, NVIDIA H100 80GB HBM3, 9.0, 81559, 550.54.15, Disabled\n"
H100X2_550 = H100.format(i=0) + H100.format(i=1)
H100X2_580 = H100X2_550.replace("550.54.15", "580.65.06")
# MIG enabled on an A100 SXM4 80GB.
A100_MIG = "0, NVIDIA A100-SXM4-80GB, 8.0, 81920, 535.216.01, Enabled\n"
# DGX Spark: GB10 reports no framebuffer size ([N/A]).
GB10 = "0, NVIDIA GB10, 12.1, [N/A], 580.126.09, [N/A]\n"
# A GPU newer than every architecture in the matrix.
FUTURE = "0, NVIDIA Future GPU, 13.0, 98304, 620.10.01, [N/A]\n"
# A V100 under a 590 driver, which dropped Volta: nvidia-smi sees nothing, the PCI bus still has it.
NO_DEVICES = "No devices were found\n"
V100_PCI = "00:1e.0 3D controller [0302]: NVIDIA Corporation GV100GL [Tesla V100 SXM2 16GB] [10de:1db1] (rev a1)\n"
SMI_BROKEN = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
    "NVIDIA driver is installed and running.\n"
)
RTX3090_PCI = (
    "01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA102 [GeForce RTX 3090] [10de:2204] (rev a1)\n"
    "01:00.1 Audio device [0403]: NVIDIA Corporation GA102 High Definition Audio Controller [10de:1aef] (rev a1)\n"
)
# A 470 driver's nvidia-smi has no compute_cap field (exit 2), then answers without it.
T4_470_NO_CC = 'Field "compute_cap" is not a valid field to query.\n'
T4_470 = "0, Tesla T4, 15360, 470.82.01, [N/A]\n"

# The recorded hosts every surface must agree on (issue 18): nvidia-smi's query output on each.
H100X2_570 = H100X2_550.replace("550.54.15", "570.124.06")
RTX5090_575 = "0, NVIDIA GeForce RTX 5090, 12.0, 32607, 575.57.08, [N/A]\n"
# A 470 driver's nvidia-smi has no compute_cap field: the architecture comes from the name.
P100_470 = "0, Tesla P100-PCIE-16GB, 16280, 470.82.01, Disabled\n"
A10_580 = "0, NVIDIA A10, 8.6, 23028, 580.65.06, Disabled\n"


# -- the engine as `torchyard run` sees it -------------------------------------------------------------------

# A torchyard CUDA 13 image as its labels say it (what `torchyard inspect` reads without a manifest).
CUDA13_LABELS = {
    "io.torchyard.version": "0.1.0",
    "io.torchyard.combination": "torch2.14.1-cu130-py3.11-debian12",
    "io.torchyard.torch": "2.14.1+cu130",
    "io.torchyard.cuda": "13.0",
    "io.torchyard.cudnn": "9.13.0",
    "io.torchyard.nccl": "2.27.7",
    "io.torchyard.python": "3.11",
    "io.torchyard.os": "debian12",
}


def image(labels: dict[str, str] | None = None, platform: str = "linux/amd64") -> ImageInfo:
    return ImageInfo("sha256:" + "ab" * 32, dict(labels or {}), (), (), 1, platform=platform)


@dataclass
class RunEngine:
    """The engine as run sees it (host.launch.Images, and the manifest `inspect --here` reads): images by
    reference, pulls recorded (and served from `registry`), started containers recorded (each exits 7)."""

    images: dict[str, ImageInfo] = field(default_factory=dict)
    registry: dict[str, ImageInfo] = field(default_factory=dict)
    pulled: list[str] = field(default_factory=list)
    started: list[ContainerSpec] = field(default_factory=list)
    read_error: TorchyardError | None = None  # read_file raises it (the engine could not open the image)
    files: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (image, path) -> what read_file answers

    def inspect(self, ref: str) -> ImageInfo | None:
        return self.images.get(ref)

    def pull(self, ref: str, auth: RegistryAuth | None = None) -> ImageInfo:
        self.pulled.append(ref)
        if ref not in self.registry:
            raise PushError(f"pull {ref}: manifest unknown")
        self.images[ref] = self.registry[ref]
        return self.images[ref]

    def read_file(self, image: str, path: str, limit: int = 1 << 20) -> bytes | None:
        if self.read_error is not None:
            raise self.read_error
        return self.files.get((image, path))

    def labelled(self, label: str) -> list[ImageInfo]:
        """The local images with `label`, each under the reference it is kept by here."""
        return [replace(info, tags=(ref,)) for ref, info in self.images.items() if label in info.labels]

    def run(self, spec: ContainerSpec, **_: Any) -> Exited:
        self.started.append(spec)
        return Exited(7)


def holding(
    ref: str,
    combination: str,
    *,
    platform: str = "linux/amd64",
    flavor: str = "runtime",
    arch_list: str = "none",
    extensions: str = "none",
    created: str = "2026-12-01T10:00:00Z",
) -> ImageInfo:
    """A torchyard image as the locator sees it in the engine: its labels say the combination it holds (of the
    real matrix), as render writes them."""
    from matrix_kit import real

    from builder.lock.resolve_id import find_combination

    c = find_combination(real(), combination)
    assert c is not None, combination
    v = c.variant
    labels = {
        "io.torchyard.version": "0.1.0",
        "io.torchyard.combination": combination,
        "io.torchyard.torch": c.local_version,
        "io.torchyard.cuda": f"{v.cuda.major}.{v.cuda.minor}" if v.cuda else "none",
        "io.torchyard.cudnn": str(v.cudnn) if v.cudnn else "none",
        "io.torchyard.nccl": str(v.nccl) if v.nccl else "none",
        "io.torchyard.python": c.python,
        "io.torchyard.os": c.os.name,
        "io.torchyard.flavor": flavor,
        "io.torchyard.arch-list": arch_list,
        "io.torchyard.extensions": extensions,
    }
    return ImageInfo("sha256:" + "cd" * 32, labels, (ref,), (), 1, platform=platform, created=created)


def _no_compute_cap(smi: str, driver: str) -> FakeSystem:
    """A 470 driver: nvidia-smi refuses compute_cap (exit 2), then answers without it."""
    system = machine(smi, driver=driver)
    system.commands = {**system.commands, SMI: Ran(2, T4_470_NO_CC), SMI_NO_CC: Ran(0, smi)}
    return system


def stand_ins() -> dict[str, FakeSystem]:
    """Every recorded machine, fresh, by name: what a host-dependent command must answer on (init, doctor, build)."""
    return {
        "rtx4090-535": machine(RTX4090_535, driver="535.104.05"),
        "rtx4090-520": machine(RTX4090_520, driver="520.61.05"),
        "2xh100-550": machine(H100X2_550, driver="550.54.15"),
        "2xh100-570": machine(H100X2_570, driver="570.124.06"),
        "2xh100-580": machine(H100X2_580, driver="580.65.06"),
        "a100-mig-535": machine(A100_MIG, driver="535.216.01"),
        "gb10-580-arm64": machine(GB10, arch="aarch64", driver="580.126.09"),
        "future-gpu-620": machine(FUTURE, driver="620.10.01"),
        "rtx5090-575": machine(RTX5090_575, driver="575.57.08"),
        "p100-470": _no_compute_cap(P100_470, "470.82.01"),
        "a10-580": machine(A10_580, driver="580.65.06"),
        "v100-dropped-590": machine(NO_DEVICES, smi_code=6, driver="590.48.01", lspci=V100_PCI),
        "no-gpu": machine(None, toolkit=False),
        "driver-failing": machine(SMI_BROKEN, smi_code=9, driver="535.104.05"),
    }
