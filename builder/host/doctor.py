"""`torchyard doctor`: which image runs on this machine, the one `docker run` line that starts it, and every
problem on the way with its fix. It always answers (a CPU image where no GPU can be used)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace

from builder.core.kinds import Flavor, Strategy
from builder.core.versions import minor_str
from builder.host.probe import Host, fill_from_host
from builder.host.runtime import DEFAULT_SHM_MIB, RuntimeReading
from builder.matrix.model import Matrix
from builder.render.tags import image_tags
from builder.resolve.facts import Facts
from builder.resolve.query import Query, RawQuery, parse_query
from builder.resolve.report import index_url, min_driver
from builder.resolve.resolver import Result, explain, lookup

NVIDIA_TOOLKIT_URL = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"


@dataclass(frozen=True)
class Problem:
    check: str
    message: str
    fix: str


@dataclass(frozen=True)
class Recommendation:
    result: Result
    image: str
    run: str
    build: str
    pip: str


@dataclass
class Diagnosis:
    host: Host
    runtime: RuntimeReading | None
    query: Query
    recommended: Recommendation | None = None
    problems: list[Problem] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)


def diagnose(m: Matrix, host: Host, runtime: RuntimeReading | None, wish: RawQuery, repo: str) -> Diagnosis:
    """`wish` narrows the choice (--torch, --python, --os); the machine fills in the rest."""
    raw, notes = fill_from_host(wish, host, m)
    q = parse_query(m, raw)
    fix = "update torchyard (pip install -U torchyard), whose matrix may know it"
    d = Diagnosis(host, runtime, q, problems=[Problem("gpu", f"{n}: no image can be vouched for", fix) for n in notes])
    if host.all_gpus and not raw.archs and not raw.gpus:  # every GPU here is newer than the matrix knows
        d.problems += _why_nothing(m, q)
        d.recommended = _cpu_fallback(m, q, runtime, repo, d.problems)
        d.problems += _runtime_problems(host, runtime, d.unchecked)
        return d
    if host.all_gpus:
        d.problems += [Problem("driver", p, _driver_fix(host)) for p in host.reading.problems]
    else:
        d.unchecked.append("GPU checks: " + "; ".join(host.reading.problems or ["no NVIDIA GPU found"]))
        q = d.query = replace(q, variant="cpu")
    found = lookup(m, q)
    if found.valid:
        d.recommended = _recommend(m, found.valid[0], runtime, repo, gpu=bool(host.all_gpus))
        d.problems += _newer_out_of_reach(m, q, found.valid[0])
    else:
        d.problems += _why_nothing(m, q)
        d.recommended = _cpu_fallback(m, q, runtime, repo, d.problems)
    d.problems += _runtime_problems(host, runtime, d.unchecked)
    return d


def _cpu_fallback(
    m: Matrix, q: Query, runtime: RuntimeReading | None, repo: str, problems: list[Problem]
) -> Recommendation | None:
    """No GPU image runs here: the CPU image still does (it needs no driver), said as a problem of its own."""
    cpu = lookup(m, replace(q, variant="cpu", archs=(), gpus=(), driver=None, forward_compat=False))
    if not cpu.valid:
        return None
    problems.append(
        Problem("gpu-image", "no GPU image runs on this machine: recommending the CPU image", "fix the problems above")
    )
    return _recommend(m, cpu.valid[0], runtime, repo, gpu=False)


def _driver_fix(host: Host) -> str:
    if any(p.startswith("nvidia-smi failed") for p in host.reading.problems):
        return "the NVIDIA kernel module is not running: reboot after installing or updating the driver (see dmesg)"
    if host.reading.source is None:
        return "install the NVIDIA driver (https://www.nvidia.com/en-us/drivers/) and reboot"
    return "check that the NVIDIA kernel module is loaded: nvidia-smi must list the GPUs (reboot after a driver update)"


def _recommend(m: Matrix, r: Result, runtime: RuntimeReading | None, repo: str, *, gpu: bool) -> Recommendation:
    c = r.combo
    tag = image_tags(m, c, Flavor.RUNTIME, Strategy.WHEELS, ()).immutable
    image = f"{repo}:{tag}"
    gpu_flags = (runtime.gpu_flags if runtime else ["--gpus", "all"]) if gpu else []
    # "$PWD" stays for the user's shell to expand; everything else is quoted for pasting.
    mount = ['-v "$PWD":/workspace', "-w", "/workspace"]
    run = " ".join(["docker", "run", "--rm", "-it", *gpu_flags, "--ipc=host", *mount, shlex.quote(image), "python"])
    flags = ["--torch", str(c.torch.version), "--variant", c.variant.name, "--python", c.python, "--os", c.os.name]
    build = shlex.join(["torchyard", "build", *flags, "--platform", c.platform.value, "--repo", repo])
    index = index_url(c)
    pip = "pip install " + shlex.join(
        [f"torch=={c.torch.version}", f"torchvision=={c.torch.torchvision}", f"torchaudio=={c.torch.torchaudio}"]
        + (["--index-url", index] if index else [])
    )
    return Recommendation(r, image, run, build, pip)


def _newer_out_of_reach(m: Matrix, q: Query, best: Result) -> list[Problem]:
    """The newest torch for these GPUs if the driver were no obstacle, when this driver cannot run it."""
    if q.driver is None or not q.archs:
        return []
    unbound = lookup(m, replace(q, driver=None))
    if not unbound.valid:
        return []
    top = unbound.valid[0].combo
    if top.torch.version == best.combo.torch.version and top.variant.cuda == best.combo.variant.cuda:
        return []
    floor = explain(m, replace(q, torch=None, variant=top.variant.name))
    failed = next((c for c in floor.checks if not c.ok), None)
    cuda = minor_str(top.variant.cuda) if top.variant.cuda else "cpu"
    return [
        Problem(
            "driver-cuda",
            f"driver {q.driver} cannot run torch {top.local_version} (CUDA {cuda})"
            + (f": {failed.reason}" if failed else "")
            + f"; chose torch {best.combo.local_version}, the newest it runs",
            f"update the driver (to >= {min_driver(Facts(m), top)}) for the newest builds, or keep the choice above",
        )
    ]


_FIXES = {
    "driver-cuda": "update the NVIDIA driver, or pick an older CUDA variant (torchyard lookup --driver ... lists them)",
    "driver-gpu": "install a driver branch that supports this GPU (the message names the range)",
    "arch-torch": "use a torch release with code for this GPU (torchyard lookup --gpu ... lists them)",
    "platform": "see the message: this GPU or platform is served elsewhere",
}


def _why_nothing(m: Matrix, q: Query) -> list[Problem]:
    """Every rule the nearest candidate fails, each reason once."""
    if not q.archs and not q.gpus:
        return []
    failed = {c.reason: c.rule for c in explain(m, q).checks if not c.ok}
    return [Problem(rule, reason, _FIXES.get(rule, "see docs/troubleshooting.md")) for reason, rule in failed.items()]


def _runtime_problems(host: Host, runtime: RuntimeReading | None, unchecked: list[str]) -> list[Problem]:
    if runtime is None:
        unchecked.append("the container runtime (not asked)")
        return []
    if runtime.engine is None:
        unchecked.append("the container runtime: " + "; ".join(runtime.problems or ["no Docker engine answered"]))
        return [Problem("docker", "no Docker engine answers", "install Docker Engine, or start it (dockerd)")]
    found = []
    if host.gpus and not runtime.gpus_flag and not (runtime.cdi_specs and runtime.cdi_enabled):
        found.append(
            Problem(
                "nvidia-runtime",
                "the engine has no NVIDIA runtime, toolkit hook or CDI spec: `docker run --gpus all` fails "
                '(could not select device driver "" with capabilities: [[gpu]])',
                f"install the NVIDIA Container Toolkit and run `nvidia-ctk runtime configure --runtime=docker`, "
                f"then restart Docker ({NVIDIA_TOOLKIT_URL})",
            )
        )
    if runtime.shm_mib <= DEFAULT_SHM_MIB:
        found.append(
            Problem(
                "shm",
                f"containers get a {runtime.shm_mib} MB /dev/shm by default: DataLoader workers and NCCL fail "
                "with 'Bus error' or 'unable to write to file </torch_...>'",
                "start containers with --ipc=host (the run line does) or --shm-size=16g",
            )
        )
    for gpu in host.gpus:
        if gpu.seen.mig:
            found.append(
                Problem(
                    "mig",
                    f"MIG is enabled on GPU {gpu.seen.index} ({gpu.seen.name}): containers get MIG instances, "
                    "and NCCL cannot span them",
                    f"give a container one instance (--gpus '\"device={gpu.seen.index}:0\"'; nvidia-smi -L names "
                    f"them), or turn MIG off: nvidia-smi -i {gpu.seen.index} -mig 0",
                )
            )
    return found
