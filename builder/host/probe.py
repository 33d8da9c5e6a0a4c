"""The machine as the resolver sees it: driver, GPUs (with their architectures), platform; and the one line that
says what was read, for the commands that choose for this machine (doctor, build, render, lookup --here)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from builder.core.archs import Arch, arch_from
from builder.core.errors import UsageError
from builder.core.kinds import Platform
from builder.host.gpus import GpuReading, SeenGpu, read_gpus
from builder.host.system import RealSystem, System
from builder.matrix.model import Matrix
from builder.resolve.gpus import Gpu, find_gpu
from builder.resolve.query import RawQuery


@dataclass(frozen=True)
class HostGpu:
    """A GPU of this machine: what nvidia-smi said, its architecture, and the matrix's GPU where it knows it."""

    seen: SeenGpu
    arch: Arch | None
    known: Gpu | None


@dataclass(frozen=True)
class Host:
    machine: str
    platform: Platform | None  # None: a CPU torch publishes no Linux wheels for
    reading: GpuReading
    gpus: tuple[HostGpu, ...]
    undriven: tuple[HostGpu, ...] = ()  # on the PCI bus, but the driver lists none of them (too old or too new)

    @property
    def all_gpus(self) -> tuple[HostGpu, ...]:
        return self.gpus + self.undriven

    @property
    def driver(self) -> str | None:
        return self.reading.driver

    def describe(self) -> str:
        """'driver 535.104.05, 1x NVIDIA GeForce RTX 4090 (sm_89) on this machine (linux/amd64)'."""
        where = f"on this machine ({self.platform.value if self.platform else self.machine})"
        if not self.gpus:
            driver = f"driver {self.driver}, " if self.driver else ""
            idle = f" (the PCI bus has {', '.join(g.seen.name for g in self.undriven)})" if self.undriven else ""
            return f"{driver}no NVIDIA GPU the driver runs{idle} {where}"
        counts = Counter(f"{g.seen.name} ({g.arch.name if g.arch else 'unknown architecture'})" for g in self.gpus)
        listed = ", ".join(f"{n}x {name}" for name, n in counts.items())
        return f"driver {self.driver or 'unknown'}, {listed} {where}"


def probe(m: Matrix, system: System | None = None) -> Host:
    system = system or RealSystem()
    machine = system.machine()
    reading = read_gpus(system)
    gpus = tuple(_identify(m, seen) for seen in reading.gpus)
    undriven = tuple(_identify(m, SeenGpu(-1, name, None, None, mig=False)) for name in reading.undriven)
    return Host(machine, Platform.of_machine(machine), reading, gpus, undriven)


def _identify(m: Matrix, seen: SeenGpu) -> HostGpu:
    """The architecture from the compute capability the driver reports (else from the name); the matrix's GPU
    when the name is one it knows and agrees with that capability."""
    arch = arch_from(seen.compute_cap) if seen.compute_cap else None
    try:
        known: Gpu | None = find_gpu(m, seen.name)
    except UsageError:
        known = None
    if known is not None and arch is not None and known.arch != arch:
        known = None  # a name the matrix maps elsewhere: the capability the driver reports wins
    return HostGpu(seen, arch or (known.arch if known else None), known)


def fill_from_host(raw: RawQuery, host: Host, m: Matrix) -> tuple[RawQuery, list[str]]:
    """What the flags leave open, from this machine: the driver, the GPUs, the platform. Flags win. GPUs of an
    architecture the matrix does not know leave the query, each with a note."""
    archs, gpus, notes = raw.archs, raw.gpus, []
    if not archs and not gpus:
        known = {a.name for a in m.archs}
        seen = [g for g in host.all_gpus if g.arch is not None]
        for g in seen:
            if g.arch is not None and g.arch.name not in known:
                notes.append(f"{g.seen.name} is {g.arch.name}, newer than every architecture torchyard knows")
        archs = tuple(dict.fromkeys(g.arch.name for g in seen if g.known is None and g.arch and g.arch.name in known))
        gpus = tuple(dict.fromkeys(g.known.name for g in seen if g.known is not None))
    filled = replace(
        raw,
        driver=raw.driver if raw.driver is not None else host.driver,
        archs=archs,
        gpus=gpus,
        platform=raw.platform if raw.platform is not None else (host.platform.value if host.platform else None),
    )
    return filled, notes
