"""`torchyard doctor`: which image runs on this machine, the one `docker run` line that starts it, and every
problem on the way with its fix. It always answers (a CPU image where no GPU can be used)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace

from builder.core.kinds import Flavor, Strategy
from builder.core.versions import minor_str
from builder.host.choose import HostChoice, choose_here, cpu_query
from builder.host.image_inspect import judge, label_facts
from builder.host.locate import (
    Judge,
    Location,
    Shelf,
    Wanted,
    engine_images,
    expected_size,
    locate,
    registry_of,
)
from builder.host.probe import Host, fill_from_host
from builder.host.runtime import DEFAULT_SHM_MIB, RuntimeReading
from builder.matrix.model import Matrix, OSBase
from builder.render.spec import notebook_problem
from builder.render.tags import image_tags
from builder.resolve import lifecycle
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query, RawQuery, parse_query
from builder.resolve.report import index_url, min_driver
from builder.resolve.resolver import Result, evaluate, explain, first_valid, valid_newer
from builder.resolve.verdict import Answer, verdict

DEFAULT_REPO = "torchyard"  # a name without a registry: images built here, never pulled
NVIDIA_TOOLKIT_URL = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"


@dataclass(frozen=True)
class Problem:
    check: str
    message: str
    fix: str


@dataclass(frozen=True)
class Recommendation:
    result: Result
    image: str  # the chosen combination's image, as `torchyard build` names it under the repository
    build: str
    pip: str
    gpu_flags: tuple[str, ...] = ()  # what `docker run` needs here for the GPUs


@dataclass
class Diagnosis:
    host: Host
    runtime: RuntimeReading | None
    query: Query
    recommended: Recommendation | None = None
    problems: list[Problem] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    location: Location | None = None  # where the image to run is (host.locate), when the engine was asked
    repo: str = "torchyard"

    @property
    def image(self) -> str | None:
        """The image to run here: the one the locator found, else the recommended one where it can be pulled (a
        registry repository), else None (nowhere: build it first)."""
        if self.location is not None and self.location.reference:
            return self.location.reference
        r = self.recommended
        return r.image if r is not None and registry_of(self.repo) else None

    @property
    def run(self) -> str | None:
        """The docker run line that starts the image here; None while there is no image to start."""
        image, r = self.image, self.recommended
        if image is None or r is None:
            return None
        # "$PWD" stays for the user's shell to expand; everything else is quoted for pasting.
        mount = ['-v "$PWD":/workspace', "-w", "/workspace"]
        argv = ["docker", "run", "--rm", "-it", *r.gpu_flags, "--ipc=host", *mount, shlex.quote(image), "python"]
        return " ".join(argv)


def diagnose(
    m: Matrix,
    host: Host,
    runtime: RuntimeReading | None,
    wish: RawQuery,
    repo: str,
    engine: Shelf | None = None,
    flavor: Flavor = Flavor.RUNTIME,
) -> Diagnosis:
    """`wish` narrows the choice (--torch, --python, --os); the machine fills in the rest. The combination is
    host.choose.choose_here's, the one lookup --here, build and render name for this machine too. With an engine,
    the image to run is located (host.locate: the local engine, the team's registry repository); `flavor`: which
    of the combination's images (run --notebook and devcontainer ask for the notebook image)."""
    choice = choose_here(m, host, wish)
    if flavor is Flavor.NOTEBOOK and wish.python is None:
        choice = _with_notebook(m, host, wish, choice)
    hq = choice.here
    fix = "update torchyard (pip install -U torchyard), whose matrix may know it"
    d = Diagnosis(
        host,
        runtime,
        hq.query,
        problems=[Problem("gpu", f"{n}: no image can be vouched for", fix) for n in hq.notes],
        repo=repo,
    )
    if hq.failing is not None:
        d.problems.append(Problem("driver", hq.failing, _driver_fix(host)))
        d.unchecked.append(f"GPU checks: the driver is installed but fails ({hq.failing})")
    elif host.all_gpus:
        d.problems += [Problem("driver", p, _driver_fix(host)) for p in host.reading.problems]
    else:
        d.unchecked.append("GPU checks: " + "; ".join(host.reading.problems or ["no NVIDIA GPU found"]))
    gpu = hq.gpu and not choice.fallback
    if choice.fallback or (host.all_gpus and not hq.gpu and hq.failing is None):
        d.problems += _why_nothing(m, choice.gpu_query) if choice.fallback else []
        if choice.result is not None:
            d.problems.append(_NO_GPU_IMAGE)
    chosen = choice.result.combo if choice.result is not None else None
    no_notebook = notebook_problem(m, chosen) if chosen is not None and flavor is Flavor.NOTEBOOK else None
    if chosen is not None and no_notebook is not None:  # not a build line that would fail: what is wrong instead
        fix = "ask for another Python (--python 3.11 or newer) or an OS whose Python is (--os debian13)"
        d.problems.append(Problem("notebook", f"{chosen.id} has no notebook image: {no_notebook}", fix))
    elif choice.result is not None:
        d.recommended = _recommend(m, choice.result, runtime, repo, gpu=gpu, flavor=flavor)
        d.problems += _newer_out_of_reach(m, hq.query, choice.result) if gpu else []
    else:  # after a fallback, the CPU question is the one that found nothing
        d.problems += _why_nothing(m, cpu_query(hq.query) if choice.fallback else hq.query)
    d.problems += _runtime_problems(host, runtime, d.unchecked)
    if engine is not None and d.recommended is not None:
        d.location = locate_recommended(m, d.recommended, host, repo, engine, flavor)
    d.problems += lifecycle_problems(m, d)
    d.problems = list(dict.fromkeys(d.problems))  # the GPU and the CPU question can fail on the same rule
    return d


def _with_notebook(m: Matrix, host: Host, wish: RawQuery, choice: HostChoice) -> HostChoice:
    """The machine's choice when it has a notebook image, else the best choice among the Pythons every notebook
    package accepts (the oldest first, as close to the first choice as it gets), else the first choice."""
    if choice.result is None or notebook_problem(m, choice.result.combo) is None:
        return choice
    pythons = sorted({p for o in m.os for p in o.pythons()}, key=lambda p: tuple(int(n) for n in p.split(".")))
    for python in pythons:
        other = choose_here(m, host, replace(wish, python=python))
        if other.result is not None and notebook_problem(m, other.result.combo) is None:
            return other
    return choice


def lifecycle_problems(m: Matrix, d: Diagnosis) -> list[Problem]:
    """The machine's driver branch past its end (with the branch to move to), and the OS of the image to run past
    its regular support (the located image's, else the recommended one's)."""
    day = lifecycle.today()
    found = []
    branch = lifecycle.branch_of(m, _branch(d.host.driver)) if d.host.driver else None
    note = lifecycle.branch_note(branch, day) if branch else None
    if note:
        target = lifecycle.move_to(m, (g.arch for g in d.host.all_gpus if g.arch), day)
        fix = lifecycle.move_line(target) if target else "install a driver branch NVIDIA still supports"
        found.append(Problem("driver-lifecycle", note, fix))
    base = _image_os(m, d)
    os_note = lifecycle.os_note(base, day) if base else None
    if os_note:
        found.append(Problem("os-lifecycle", os_note, "an image on an OS inside its regular support: the chooser "
                             "prefers one unless --os asks (torchyard lookup --here lists them)"))  # fmt: skip
    return found


def _branch(driver: str) -> int:
    head = driver.split(".", 1)[0]
    return int(head) if head.isdigit() else -1


def _image_os(m: Matrix, d: Diagnosis) -> OSBase | None:
    holds = d.location.holds if d.location is not None and d.location.holds else None
    combo = holds or (d.recommended.result.combo.id if d.recommended else None)
    found = re.search(r"-py\d+\.\d+-([a-z0-9.]+?)(?:-arm64)?$", combo or "")
    return next((o for o in m.os if found and o.name == found[1]), None)


def locate_recommended(
    m: Matrix, r: Recommendation, host: Host, repo: str, engine: Shelf, flavor: Flavor = Flavor.RUNTIME
) -> Location:
    """Where the image to run here is: the recommended combination's, else another local one that runs here (of
    the same flavor, for a notebook: its user and server are its contract)."""
    c = r.result.combo
    notebook = flavor is Flavor.NOTEBOOK
    size = "not measured" if notebook else expected_size(str(c.torch.version), c.variant.name, c.platform.value)
    wanted = Wanted(c.id, r.image.rpartition(":")[2], c.platform.value, r.build, size, flavor.value, notebook)
    return locate(wanted, judge_here(m, host), local=engine_images(engine), repo=registry_of(repo))


def judge_here(m: Matrix, host: Host) -> Judge:
    """How an image (known by its labels) runs on this machine, as `inspect IMAGE --here` judges it: on a machine
    without a GPU, RUNS ON CPU for any torch image of its platform without CUDA extensions."""
    q = parse_query(m, fill_from_host(RawQuery(), host, m)[0])
    cpu = no_gpu(host)

    def judged(ref: str, labels: dict[str, str], platform: str, require: str | None) -> Answer:
        facts = label_facts(ref, platform, labels, require)
        return verdict(judge(m, facts, q, cpu_host=cpu), here=True).answer

    return judged


def no_gpu(host: Host) -> bool:
    """No NVIDIA GPU at all: not in nvidia-smi's list, not on the PCI bus (a failing driver is not "no GPU")."""
    return not host.all_gpus and not any(p for p in host.reading.problems if not p.startswith("no NVIDIA driver"))


_NO_GPU_IMAGE = Problem(
    "gpu-image", "no GPU image runs on this machine: recommending the CPU image", "fix the problems above"
)


def _driver_fix(host: Host) -> str:
    if any(p.startswith("nvidia-smi failed") for p in host.reading.problems):
        return "the NVIDIA kernel module is not running: reboot after installing or updating the driver (see dmesg)"
    if host.reading.source is None:
        return "install the NVIDIA driver (https://www.nvidia.com/en-us/drivers/) and reboot"
    return "check that the NVIDIA kernel module is loaded: nvidia-smi must list the GPUs (reboot after a driver update)"


def _recommend(
    m: Matrix, r: Result, runtime: RuntimeReading | None, repo: str, *, gpu: bool, flavor: Flavor = Flavor.RUNTIME
) -> Recommendation:
    c = r.combo
    tag = image_tags(m, c, flavor, Strategy.WHEELS, ()).immutable
    gpu_flags = tuple(runtime.gpu_flags if runtime else ["--gpus", "all"]) if gpu else ()
    index = index_url(c)
    pip = "pip install " + shlex.join(
        [f"torch=={c.torch.version}", f"torchvision=={c.torch.torchvision}", f"torchaudio=={c.torch.torchaudio}"]
        + (["--index-url", index] if index else [])
    )
    return Recommendation(r, f"{repo}:{tag}", build_command(c, repo, flavor), pip, gpu_flags)


def build_command(c: Combination, repo: str, flavor: Flavor = Flavor.RUNTIME) -> str:
    """The `torchyard build` line that makes combination c's image under repo (doctor's, the page's); another
    flavor than the runtime image adds its --target."""
    flags = ["--torch", str(c.torch.version), "--variant", c.variant.name, "--python", c.python, "--os", c.os.name]
    target = [] if flavor is Flavor.RUNTIME else ["--target", flavor.value]
    return shlex.join(["torchyard", "build", *flags, "--platform", c.platform.value, *target, "--repo", repo])


def _newer_out_of_reach(m: Matrix, q: Query, best: Result) -> list[Problem]:
    """The newest torch for these GPUs if the driver were no obstacle, when this driver cannot run it; "the
    newest it runs" only when every newer build was refused, not when a newer one could not be checked."""
    unknown = valid_newer(m, q, best.combo.torch.version)
    found = [_unchecked_newer(unknown[0])] if unknown else []
    if q.driver is None or not q.archs:
        return found
    unbound = first_valid(m, replace(q, driver=None))
    if unbound is None:
        return found
    top = unbound.combo
    if top.torch.version == best.combo.torch.version and top.variant.cuda == best.combo.variant.cuda:
        return found
    facts = Facts(m)
    failed, cuda = evaluate(facts, q, top).first_failure, top.variant.cuda
    if failed is None or cuda is None:  # the driver runs it too: only the ranking differs (PyPI's default first
        return found  # without a driver, full level first with one), so nothing newer is out of reach
    newest = ", the newest it runs" if not unknown else ", the newest every check passed for"
    if best.unrecorded:  # the choice itself could not be fully checked: it may run, nothing more
        reasons = "; ".join(dict.fromkeys(c.reason for c in best.unrecorded))
        newest = f", the newest that may run (CANNOT TELL: {reasons})"
    return [
        Problem(
            "driver-cuda",
            f"driver {q.driver} cannot run torch {top.local_version} (CUDA {minor_str(cuda)}): {failed.reason}; "
            f"chose torch {best.combo.local_version}{newest}",
            f"update the driver (to >= {min_driver(facts, top)}) for the newest builds, or keep the choice above",
        ),
        *found,
    ]


def _unchecked_newer(r: Result) -> Problem:
    reasons = "; ".join(dict.fromkeys(c.reason for c in r.unrecorded))
    return Problem(
        "not-recorded",
        f"torch {r.combo.local_version} is newer and may run here, but it cannot be checked: {reasons}",
        "record the missing facts in matrix.toml (with their sources), or try it: torchyard inspect IMAGE --here",
    )


_FIXES = {
    "driver-cuda": "update the NVIDIA driver, or pick an older CUDA variant (torchyard lookup --driver ... lists them)",
    "driver-gpu": "install a driver branch that supports this GPU (the message names the range)",
    "arch-torch": "use a torch release with code for this GPU (torchyard lookup --gpu ... lists them)",
    "platform": "see the message: this GPU or platform is served elsewhere",
}


def _why_nothing(m: Matrix, q: Query) -> list[Problem]:
    """Every rule the nearest candidate fails, each reason once (also for the CPU question: a wish no CPU image
    meets is said, not left to the runtime's problems)."""
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
