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
from typing import Protocol, cast

from builder.core.errors import BuildError, NoMatchError, PushError, TorchyardError
from builder.core.kinds import Flavor
from builder.core.process import run_command
from builder.engine.interactive import ContainerSpec, container_name
from builder.engine.types import Engine, ImageInfo, RegistryAuth
from builder.host.doctor import DEFAULT_REPO, Diagnosis, Recommendation, diagnose, no_gpu
from builder.host.identity import Caller, Identity, cache_folder, env_of, identity_files
from builder.host.image_inspect import extension_checks, judge, label_facts, read_facts
from builder.host.locate import Shelf, Where, where_lines
from builder.host.probe import Host, fill_from_host
from builder.host.runtime import RuntimeReading
from builder.matrix.model import Matrix
from builder.resolve.query import RawQuery, parse_query

Say = Callable[[str], None]
SHELL = ("sh", "-c", 'exec "$(command -v bash || command -v sh)"')  # bash where the image has it


class Images(Protocol):
    """What starting an image needs of the engine (builder.engine.DockerEngine has it)."""

    def inspect(self, ref: str) -> ImageInfo | None: ...
    def pull(self, ref: str, auth: RegistryAuth | None) -> ImageInfo: ...


class RunImages(Images, Shelf, Protocol):
    """What run needs besides: the locator's image list, and the files of an image (its /etc/passwd)."""

    def read_file(self, image: str, path: str, limit: int = 1 << 20) -> bytes | None: ...


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """`torchyard run`'s flags, parsed."""

    image: str | None = None  # None: the image doctor chooses for this machine (--here)
    command: tuple[str, ...] = ()  # empty: an interactive shell
    repo: str | None = None  # the team's repository (--repo / TORCHYARD_REPO); None: build here
    wish: RawQuery = field(default_factory=RawQuery)  # --torch, --python, --os narrow the choice
    workspace: str  # the folder mounted at /workspace
    who: Caller | None  # the caller (UID:GID and name, host.identity); None: --root
    shm_size: str | None = None  # instead of --ipc=host
    env: tuple[str, ...] = ()
    docker_args: tuple[str, ...] = ()
    tty: bool = False
    force: bool = False  # run an image that will not run here
    flavor: Flavor = Flavor.RUNTIME  # which of the chosen combination's images (run --notebook: the notebook one)


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


def prepare(m: Matrix, host: Host, runtime: RuntimeReading | None, request: RunRequest, engine: RunImages) -> Launch:
    """Choose (doctor's chooser and locator; for a given image only if it is refused), look in the local engine,
    judge a given image that is there."""
    repo = request.repo or DEFAULT_REPO
    # A given IMAGE may never need the choice; the chosen one needs the locator (the engine's images).
    diagnosis = functools.cache(
        lambda: diagnose(m, host, runtime, request.wish, repo, None if request.image else engine, request.flavor)
    )

    def recommend() -> Recommendation | None:
        return diagnosis().recommended

    if request.image is None and recommend() is None:
        reasons = "; ".join(p.message for p in diagnosis().problems) or "no combination fits"
        raise NoMatchError(f"no image runs on this machine: {reasons} (torchyard doctor says more)")
    d = None if request.image else diagnosis()
    image = request.image or _chosen_image(d)
    gpu, notes = gpu_access(host, runtime)
    spec = ContainerSpec(
        image=image,
        command=request.command or SHELL,
        name=container_name(),
        gpu_flags=gpu,
        shm_size=request.shm_size,
        workspace=request.workspace,
        user=request.who.user if request.who else None,
        env=(env_of(request.who) if request.who else ()) + request.env,
        tty=request.tty,
        extra=_read_only(request.docker_args),
    )
    build = None if d is None or d.recommended is None else tuple(shlex.split(d.recommended.build)[1:])
    info = engine.inspect(image)
    notes += _located(d) + _tmpfs_note(request.docker_args)
    launch = Launch(spec, host, recommend, info is not None, tuple(notes), build, m.path)
    if info is not None and request.image:
        launch = check_runs(m, launch, info, request.force, engine)
    return with_identity(launch, engine, request)


def _chosen_image(d: Diagnosis | None) -> str:
    """The located image (local or in the team's repository), else the chosen one's name (to pull or build)."""
    assert d is not None and d.recommended is not None
    return d.image or d.recommended.image


def _located(d: Diagnosis | None) -> list[str]:
    """What the locator said, when it found something other than the recommended image."""
    loc = d.location if d is not None else None
    if loc is None or loc.chosen or loc.where is not Where.LOCAL:
        return []
    return where_lines(loc)[:1]


def _read_only(docker_args: tuple[str, ...]) -> tuple[str, ...]:
    """With --read-only, HOME (/tmp) must stay writable (torch.compile's cache, pip's): a tmpfs there, unless the
    user mounted one."""
    if "--read-only" not in docker_args or any(a.startswith("--tmpfs") for a in docker_args):
        return docker_args
    return ("--tmpfs", "/tmp:exec,mode=1777", *docker_args)


def _tmpfs_note(docker_args: tuple[str, ...]) -> list[str]:
    if _read_only(docker_args) == docker_args:
        return []
    return ["--read-only: /tmp (the container's HOME) is a tmpfs (--tmpfs /tmp)"]


def with_identity(launch: Launch, engine: RunImages, request: RunRequest) -> Launch:
    """The caller's name for its UID inside: the image's passwd and group with it added, mounted read-only (only
    where the image is here to be read, and does not know the UID)."""
    if request.who is None or not launch.local:
        return launch
    try:
        found = identity_files(request.who, lambda path: engine.read_file(launch.image, path), cache_folder())
    except (TorchyardError, OSError) as exc:
        return replace(launch, notes=(*launch.notes, f"the user has no name inside ({exc})"))
    return replace(launch, spec=replace(launch.spec, files=_files(found)))


def _files(found: Identity | None) -> tuple[tuple[str, str], ...]:
    if found is None or any(c in str(p) for p in (found.passwd, found.group) for c in ":,\n"):
        return ()
    return ((str(found.passwd), "/etc/passwd"), (str(found.group), "/etc/group"))


def obtain(
    m: Matrix, launch: Launch, engine: RunImages, request: RunRequest, may_build: Callable[[Launch], bool], say: Say
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
    launch = check_runs(m, launch, info, request.force, engine) if request.image else launch
    return with_identity(launch, engine, request)


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
    """(why the image will not run here, what could not be checked). Without a GPU the platform matters, and
    torchyard's CUDA extensions (its labels say them): any image's torch runs on the CPU."""
    if host.platform is not None and info.platform != host.platform.value:
        return [f"the image is {info.platform}, this machine {host.platform.value}"], []
    if not host.gpus:
        facts = label_facts(image, info.platform, info.labels, None)
        q = parse_query(m, RawQuery())
        return [c.reason for c in extension_checks(facts, q, cpu_host=no_gpu(host)) if not c.ok], []

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
