"""The one chooser for a machine: what doctor recommends, what `lookup --here` ranks first, what build and
render choose on a GPU host, and what `torchyard run` starts. The machine fills in what the wish leaves open
(driver, GPUs, platform); with no GPU the driver can use (none, or a driver that is installed but failing) the
answer is a CPU image, and the GPU part is said to be unknown, never passed."""

from __future__ import annotations

from dataclasses import dataclass, replace

from builder.host.probe import Host, fill_from_host
from builder.matrix.model import Matrix
from builder.resolve.choose import choose_result
from builder.resolve.query import Query, RawQuery, parse_query, torch_build
from builder.resolve.resolver import Result


@dataclass(frozen=True)
class HostQuery:
    query: Query
    notes: tuple[str, ...]  # GPUs newer than the matrix, each a line
    gpu: bool  # the query is for this machine's GPUs (False: a CPU image, since no GPU can be used)
    failing: str | None  # an installed driver that fails, and how (None: it works, or there is none)


@dataclass(frozen=True)
class HostChoice:
    here: HostQuery
    result: Result | None  # None: nothing runs here, not even a CPU image
    fallback: bool  # no GPU image runs on this machine's GPUs: the result is the CPU image
    gpu_query: Query  # the question for the GPUs (what a fallback could not answer)


def driver_failing(host: Host) -> str | None:
    """Why an installed driver cannot be used (nvidia-smi errors, no devices, a kernel module but no GPU list);
    None when it works, when no driver is installed, or when it lists none of the GPUs on the PCI bus (a driver
    too old or too new for them: the driver-gpu rule says which)."""
    problems = host.reading.problems
    if host.gpus or not problems or all(p.startswith("no NVIDIA driver") for p in problems):
        return None
    if host.undriven and all(p.startswith("nvidia-smi found no GPUs") for p in problems):
        return None
    return "; ".join(problems)


def host_query(m: Matrix, host: Host, wish: RawQuery, *, cpu_without_gpu: bool = True) -> HostQuery:
    """The wish completed from this machine. Without a GPU the driver can run (and no --gpu/--arch/--variant
    in the wish), `cpu_without_gpu` asks for the CPU variant: what runs here (doctor, lookup --here); build
    and render keep their documented choice for any machine (cpu_without_gpu=False)."""
    wish = torch_build(m, wish)  # --torch 2.5.1+cu124 asks for the cu124 variant: not an open wish
    raw, notes = fill_from_host(wish, host, m)
    failing = driver_failing(host)
    if failing is not None:  # a driver that fails answers nothing: its version and GPUs are not facts to check
        raw = replace(raw, driver=wish.driver, archs=wish.archs, gpus=wish.gpus)
    q = parse_query(m, raw)
    gpu = bool(q.archs) and failing is None
    if cpu_without_gpu and not gpu and _open(wish):
        q = cpu_query(q)
    return HostQuery(q, tuple(notes), gpu, failing)


def _open(wish: RawQuery) -> bool:
    return not wish.archs and not wish.gpus and wish.variant is None and wish.cuda is None


def cpu_query(q: Query) -> Query:
    return replace(q, variant="cpu", archs=(), gpus=(), driver=None, forward_compat=False)


def choose_here(m: Matrix, host: Host, wish: RawQuery) -> HostChoice:
    """The combination for this machine: lookup's first row for its GPUs and driver, else (no GPU image runs
    on them, or none can be used) the CPU image, which needs no driver."""
    wish = torch_build(m, wish)  # --torch 2.5.1+cu124 asks for that build: no CPU image instead of it
    hq = host_query(m, host, wish)
    result = choose_result(m, hq.query)
    if result is None and hq.gpu and _open(wish):
        return HostChoice(hq, choose_result(m, cpu_query(hq.query)), True, hq.query)
    return HostChoice(hq, result, False, hq.query)
