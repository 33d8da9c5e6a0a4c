"""Read the NVIDIA driver and GPUs: nvidia-smi's query interface, else NVML (nvidia-ml-py), else /proc."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from typing import Any

from builder.host.system import NOT_FOUND, System

QUERY = ("index", "name", "compute_cap", "memory.total", "driver_version", "mig.mode.current")
PROC_VERSION = "/proc/driver/nvidia/version"


@dataclass(frozen=True)
class SeenGpu:
    index: int
    name: str
    compute_cap: str | None  # "8.9" as nvidia-smi prints it; None: this driver cannot tell
    memory_mib: int | None
    mig: bool


@dataclass
class GpuReading:
    """What the machine says about its NVIDIA driver and GPUs, where it was read, and what went wrong."""

    driver: str | None = None
    gpus: list[SeenGpu] = field(default_factory=list)
    source: str | None = None  # nvidia-smi | nvml | /proc/driver/nvidia/version
    problems: list[str] = field(default_factory=list)  # what could not be read, and why
    undriven: list[str] = field(default_factory=list)  # NVIDIA GPUs on the PCI bus that no driver lists (lspci)


def read_gpus(system: System) -> GpuReading:
    reading = GpuReading()
    if _from_smi(system, reading) or _from_nvml(reading):
        if not reading.gpus:
            reading.undriven = _from_pci(system)
        return reading
    reading.undriven = _from_pci(system)
    found = _proc_driver(system)
    if found:
        reading.driver, reading.source = found, PROC_VERSION
        reading.problems.append(
            f"the NVIDIA kernel module {found} is loaded, but neither nvidia-smi nor NVML could list the GPUs"
        )
    elif not reading.problems:
        reading.problems.append("no NVIDIA driver: nvidia-smi is not installed and no kernel module is loaded")
    return reading


def _from_smi(system: System, reading: GpuReading) -> bool:
    fields = list(QUERY)
    ran = system.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"])
    if ran.code != 0 and "compute_cap" in ran.out + ran.err:  # drivers before ~510 lack the field
        fields.remove("compute_cap")
        ran = system.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"])
    if ran.code == NOT_FOUND:
        return False
    text = (ran.out + "\n" + ran.err).strip()
    if "No devices were found" in text:
        reading.source = "nvidia-smi"
        reading.driver = _proc_driver(system)
        reading.problems.append("nvidia-smi found no GPUs (No devices were found)")
        return True
    if ran.code != 0:
        reading.problems.append(f"nvidia-smi failed (exit {ran.code}): {_first_line(text)}")
        return False
    reading.source = "nvidia-smi"
    for row in csv.reader(io.StringIO(ran.out)):
        values = dict(zip(fields, (v.strip() for v in row), strict=False))
        if values.get("name"):
            reading.gpus.append(_gpu(values))
            reading.driver = reading.driver or values.get("driver_version") or None
    return True


_PCI_GPU = re.compile(r"(?:VGA compatible controller|3D controller) \[03\d\d\]: NVIDIA Corporation (.+?) \[10de:")


def _from_pci(system: System) -> list[str]:
    """NVIDIA display controllers on the PCI bus, by the names pci.ids gives them ("GV100GL [Tesla V100 SXM2
    16GB]"): a GPU the installed driver no longer (or not yet) supports shows up here and nowhere else."""
    ran = system.run(["lspci", "-nn", "-d", "10de:"])
    names = []
    for line in ran.out.splitlines() if ran.code == 0 else []:
        found = _PCI_GPU.search(line)
        if found:
            inner = re.search(r"\[([^\]]+)\]\s*$", found[1])
            names.append(inner[1] if inner else found[1])
    return names


def _proc_driver(system: System) -> str | None:
    """The loaded kernel module's version (a Jetson's L4T release there is not a driver version: skipped)."""
    text = system.read(PROC_VERSION) or ""
    found = re.search(r"Kernel Module(?: for \S+)?\s+(\d{3}\.\d{1,3}(?:\.\d{1,3})?)\s", text)
    return found[1] if found else None


def _gpu(values: dict[str, str]) -> SeenGpu:
    cc = values.get("compute_cap")
    memory = values.get("memory.total", "")
    return SeenGpu(
        index=int(values["index"]) if values.get("index", "").isdigit() else 0,
        name=values["name"],
        compute_cap=cc if cc and re.fullmatch(r"\d+\.\d+", cc) else None,
        memory_mib=int(memory) if memory.isdigit() else None,
        mig=values.get("mig.mode.current", "").lower() == "enabled",
    )


def _from_nvml(reading: GpuReading) -> bool:
    """NVML through nvidia-ml-py (import name pynvml), when it is installed."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return False
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        reading.problems.append(f"NVML could not start: {exc}")
        return False
    try:
        reading.driver = _text(pynvml.nvmlSystemGetDriverVersion())
        reading.gpus = [_nvml_gpu(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount())]
        reading.source = "nvml"
    finally:
        pynvml.nvmlShutdown()
    return True


def _nvml_gpu(pynvml: Any, index: int) -> SeenGpu:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
    try:
        mig = pynvml.nvmlDeviceGetMigMode(handle)[0] == 1
    except Exception:  # GPUs without MIG raise NVMLError_NotSupported
        mig = False
    return SeenGpu(
        index=index,
        name=_text(pynvml.nvmlDeviceGetName(handle)),
        compute_cap=f"{major}.{minor}",
        memory_mib=int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // (1 << 20),
        mig=mig,
    )


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no output")[:200]
