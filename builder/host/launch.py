"""`torchyard run`: from "which image" to a container on this machine, in one step.

The image is doctor's answer for this machine (the one chooser, `diagnose`) or the one given; it is taken from
the local engine, else pulled from the team's repository, else built (the caller decides whether it may be).
A given image is first judged as `torchyard inspect --here` judges it, and refused when it will not run here.
The container gets this engine's GPU flags (none without a GPU), --ipc=host (or a --shm-size), the current
folder at /workspace, and the caller's UID:GID with a writable HOME.
"""

from __future__ import annotations

import functools
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol, cast

from builder.core.errors import BuildError, NoMatchError, PushError, TorchyardError
from builder.core.process import run_command
from builder.engine.interactive import ContainerSpec, container_name
from builder.engine.types import Engine, ImageInfo, RegistryAuth
from builder.host.probe import Host, fill_from_host
from builder.host.runtime import RuntimeReading
from builder.matrix.model import Matrix
from builder.resolve.query import RawQuery, parse_query

if TYPE_CHECKING:  # doctor (the resolver's ranking, the report) is imported when a choice is needed
    from builder.host.doctor import Diagnosis, Recommendation

DEFAULT_REPO = "torchyard"  # a name without a registry: images built here, never pulled
Say = Callable[[str], None]
SHELL = ("sh", "-c", 'exec "$(command -v bash || command -v sh)"')  # bash where the image has it


class Images(Protocol):
    """What run needs of the engine (builder.engine.DockerEngine has it)."""

    def inspect(self, ref: str) -> ImageInfo | None: ...
    def pull(self, ref: str, auth: RegistryAuth | None) -> ImageInfo: ...


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """`torchyard run`'s flags, parsed."""

    image: str | None = None  # None: the image doctor chooses for this machine (--here)
    command: tuple[str, ...] = ()  # empty: an interactive shell
    repo: str | None = None  # the team's repository (--repo / TORCHYARD_REPO); None: build here
    wish: RawQuery = field(default_factory=RawQuery)  # --torch, --python, --os narrow the choice
    workspace: str  # the folder mounted at /workspace
    user: str | None  # UID:GID; None: --root
    shm_size: str | None = None  # instead of --ipc=host
    env: tuple[str, ...] = ()
    docker_args: tuple[str, ...] = ()
    tty: bool = False
    force: bool = False  # run an image that will not run here


@dataclass(frozen=True)
class Launch:
    spec: ContainerSpec
    host: Host
    recommend: Callable[[], Recommendation | None]  # doctor's image for this machine (computed when first asked)
    local: bool  # the image is in the local engine
    notes: tuple[str, ...]  # what to tell the user before it starts
    build: tuple[str, ...] | None  # `torchyard build ...` (the words after torchyard) that makes the chosen image
    matrix_path: str  # the build uses the same matrix

    @property
    def image(self) -> str:
        return self.spec.image


def _diagnose(m: Matrix, host: Host, runtime: RuntimeReading | None, request: RunRequest) -> Diagnosis:
    from builder.host.doctor import diagnose

    return diagnose(m, host, runtime, request.wish, request.repo or DEFAULT_REPO)


def prepare(m: Matrix, host: Host, runtime: RuntimeReading | None, request: RunRequest, engine: Images) -> Launch:
    """Choose (doctor's chooser; for a given image only if it is refused), look in the local engine, judge a
    given image that is there."""
    diagnosis = functools.cache(lambda: _diagnose(m, host, runtime, request))  # a given IMAGE may never need it

    def recommend() -> Recommendation | None:
        return diagnosis().recommended

    if request.image is None and recommend() is None:
        d = diagnosis()
        reasons = "; ".join(p.message for p in d.problems) or "no combination fits"
        raise NoMatchError(f"no image runs on this machine: {reasons} (torchyard doctor says more)")
    chosen = None if request.image else recommend()
    image = request.image or (chosen.image if chosen else "")
    gpu, notes = gpu_access(host, runtime)
    spec = ContainerSpec(
        image=image,
        command=request.command or SHELL,
        name=container_name(),
        gpu_flags=gpu,
        shm_size=request.shm_size,
        workspace=request.workspace,
        user=request.user,
        env=request.env,
        tty=request.tty,
        extra=request.docker_args,
    )
    build = None if chosen is None else tuple(shlex.split(chosen.build)[1:])
    info = engine.inspect(image)
    launch = Launch(spec, host, recommend, info is not None, tuple(notes), build, m.path)
    return check_runs(m, launch, info, request.force, engine) if info is not None and request.image else launch


def obtain(
    m: Matrix, launch: Launch, engine: Images, request: RunRequest, may_build: Callable[[Launch], bool], say: Say
) -> Launch:
    """The image in the local engine: pulled (a given image from where it names, the chosen one from the team's
    repository), else built where `may_build` allows; a given image is judged once it is here."""
    if launch.local:
        return launch
    if not fetch(launch, engine, say, pull=bool(request.image or request.repo)):
        if not may_build(launch):
            raise NoMatchError(build_hint(launch))
        build(launch, say)
    info = engine.inspect(launch.image)
    if info is None:
        raise NoMatchError(f"{launch.image} is still not in the local engine")
    launch = replace(launch, local=True)
    return check_runs(m, launch, info, request.force, engine) if request.image else launch


def gpu_access(host: Host, runtime: RuntimeReading | None) -> tuple[tuple[str, ...], list[str]]:
    """The engine's GPU flags where this machine has GPUs the driver runs; none, said, where it has not."""
    if not host.gpus:
        why = "; ".join(host.reading.problems) or "no NVIDIA GPU found"
        return (), [f"no GPU here ({why}): the container will use the CPU"]
    flags = tuple(runtime.gpu_flags) if runtime is not None else ("--gpus", "all")
    if runtime is not None and runtime.engine and not runtime.gpus_flag and not runtime.cdi_specs:
        return flags, ["the engine has no NVIDIA runtime, toolkit hook or CDI spec: docker will refuse the GPU "
                       "flags (torchyard doctor names the fix)"]  # fmt: skip
    return flags, []


def check_runs(m: Matrix, launch: Launch, info: ImageInfo, force: bool, engine: Images) -> Launch:
    """A given image, judged for this machine as `inspect --here` judges it: refused (exit 1) when it will not
    run here, with the image that would, unless forced."""
    reasons, notes = will_not_run(m, launch.host, launch.image, info, engine)
    if reasons and not force:
        r = launch.recommend()
        instead = f"; the image that runs here: {r.image}" if r else ""
        raise NoMatchError(f"{launch.image} will not run here: {'; '.join(reasons)}{instead} (--force to run it)")
    notes += [f"{launch.image} will not run here ({'; '.join(reasons)}): running it anyway (--force)"] * bool(reasons)
    return replace(launch, notes=launch.notes + tuple(notes))


def will_not_run(m: Matrix, host: Host, image: str, info: ImageInfo, engine: Images) -> tuple[list[str], list[str]]:
    """(why the image will not run here, what could not be checked). Without a GPU only the platform matters:
    any image's torch runs on the CPU."""
    if host.platform is not None and info.platform != host.platform.value:
        return [f"the image is {info.platform}, this machine {host.platform.value}"], []
    if not host.gpus:
        return [], []
    from builder.host.image_inspect import judge, read_facts  # only on GPU machines: it imports the smoke runner

    try:
        facts = read_facts(cast(Engine, engine), image)  # the real engine is one
    except TorchyardError as exc:
        return [], [f"not checked whether {image} runs on these GPUs: {exc}"]
    q = parse_query(m, fill_from_host(RawQuery(), host, m)[0])
    return [c.reason for c in judge(m, facts, q) if not c.ok], []


def fetch(launch: Launch, engine: Images, say: Say, *, pull: bool) -> bool:
    """Pull the image when it is not local and may be pulled (a given image, or a team repository was named).
    True: it is here now."""
    if launch.local:
        return True
    if not pull:
        return False
    say(f"{launch.image} is not in the local engine: pulling it")
    try:
        engine.pull(launch.image, None)
    except PushError as exc:
        if launch.build is None:
            raise
        say(f"not pulled ({exc})")
        return False
    return True


def build(launch: Launch, say: Say) -> None:
    """Build the chosen image with `torchyard build`, run by this interpreter with the same matrix (its output
    streamed)."""
    if launch.build is None:
        raise NoMatchError(f"{launch.image} is not here and torchyard does not build images it did not choose")
    say("building: " + shlex.join(["torchyard", *launch.build]))
    argv = [sys.executable, "-m", "builder", "--matrix", launch.matrix_path, *launch.build]
    done = run_command(argv, on_line=say)
    if done.returncode != 0:
        raise BuildError(f"the build of {launch.image} failed (exit {done.returncode}); its output is above")


def build_hint(launch: Launch) -> str:
    """The one line for a caller that may not build: the command that does."""
    command = shlex.join(["torchyard", *(launch.build or ())])
    return (
        f"{launch.image} is not here and not in the team's repository (--repo / TORCHYARD_REPO): build it with "
        f"`{command}` (minutes, GBs of wheels), or run again with --yes to build it now"
    )
