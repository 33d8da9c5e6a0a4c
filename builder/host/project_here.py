"""A project's image on this machine (docs/project.md, "Run and doctor in a project"): `torchyard run` starts it
and doctor says whether it is here and runs here.

It is found by the one locator (host.locate.locate_project) among the local images, by what they hold: the
io.torchyard.project label naming the project, and the chosen combination's labels, which the project stage
inherits from its base image. The image runs wherever its base does (the same combination, judged by the same
labels). A missing one is built as `torchyard build` in the project builds it, where run may build (--yes, or the
user said yes), else run names that command and exits as it does for any missing image.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace

from builder.core.errors import NoMatchError, TorchyardError
from builder.engine.types import ImageInfo
from builder.host.doctor import Diagnosis, Recommendation, judge_here
from builder.host.launch import Launch, RunImages, RunRequest, Say, build, with_identity
from builder.host.locate import LOCAL_NAME, OTHER_LOCAL, PROJECT_LABEL, Location, ProjectWanted, Shelf, locate_project
from builder.host.probe import Host
from builder.matrix.model import Matrix
from builder.resolve.verdict import Answer

BUILD = ("build",)  # `torchyard build` in the project folder: the base, then the project image


@dataclass(frozen=True)
class ProjectHere:
    """What run and doctor know of the project's image here."""

    wanted: ProjectWanted | None  # None: no combination runs here, so neither does the project
    location: Location | None  # the newest local one that runs here; None: not built yet
    build: tuple[str, ...]  # the words after `torchyard` that build it (`build`, `build --project PATH`)

    @property
    def placeholder(self) -> str:
        """What the image is called before it exists: its repository, as `torchyard build` names it."""
        name = self.wanted.name if self.wanted else "project"
        return f"{LOCAL_NAME}/{name}"


def wanted_of(name: str, flavor: str, chosen: Recommendation | None) -> ProjectWanted | None:
    """The project's image as the locator looks for it: its name over the combination chosen here (None: none)."""
    if chosen is None:
        return None
    c = chosen.result.combo
    return ProjectWanted(name, c.id, c.platform.value, flavor)


def project_images(engine: Shelf) -> list[ImageInfo]:
    """The local project images; none when the engine does not answer (said by the locator's other lines)."""
    try:
        return engine.labelled(PROJECT_LABEL)
    except TorchyardError:
        return []


def project_here(
    m: Matrix, host: Host, wanted: ProjectWanted | None, engine: Shelf, project_flag: str | None
) -> ProjectHere:
    """`wanted`: the project's name over the chosen combination (None when nothing runs here)."""
    build_words = BUILD + (("--project", project_flag) if project_flag is not None else ())
    if wanted is None:
        return ProjectHere(None, None, build_words)
    found = locate_project(wanted, judge_here(m, host), project_images(engine))
    return ProjectHere(wanted, found, build_words)


# -- run ----------------------------------------------------------------------------------------------------------


def project_launch(launch: Launch, here: ProjectHere, engine: RunImages, request: RunRequest) -> Launch:
    """The launch with the project's image: the found one (local; its own passwd read), else its repository's
    name, not local, built by `here.build`."""
    # the locator's line about another base image found instead of the chosen one is not about this image
    notes = tuple(n for n in launch.notes if not n.startswith(OTHER_LOCAL))
    if here.location is None or here.location.reference is None:
        spec = replace(launch.spec, image=here.placeholder, files=())
        return replace(launch, spec=spec, local=False, build=here.build, notes=notes)
    spec = replace(launch.spec, image=here.location.reference, files=())
    return with_identity(replace(launch, spec=spec, local=True, build=here.build, notes=notes), engine, request)


def project_lines(here: ProjectHere) -> list[str]:
    """run's line about the project's image."""
    if here.wanted is None:
        return []
    if here.location is not None:
        return [f"the project's image: {here.location.reference} ({here.wanted.combination})"]
    return [f"the image of project {here.wanted.name} ({here.wanted.combination}) is not built yet"]


def obtain_project(
    m: Matrix,
    launch: Launch,
    here: ProjectHere,
    engine: RunImages,
    request: RunRequest,
    may_build: Callable[[Launch], bool],
    say: Say,
) -> Launch:
    """The project's image in the local engine: built with `torchyard build` where `may_build` allows (never
    pulled: it is found by what it holds), then found again by the locator."""
    if launch.local:
        return launch
    if not may_build(launch):
        raise NoMatchError(build_hint(here))
    build(launch, say)
    again = project_here(m, launch.host, here.wanted, engine, None)
    if again.location is None:
        raise NoMatchError(f"{here.placeholder}: the build passed but no image of the project runs here")
    return project_launch(launch, replace(again, build=here.build), engine, request)


def build_hint(here: ProjectHere) -> str:
    """The one line for a caller that may not build: the command that builds the project's image."""
    name = here.wanted.name if here.wanted else "the project"
    holds = f" ({here.wanted.combination})" if here.wanted else ""
    command = shlex.join(("torchyard", *here.build))
    return (
        f"the image of project {name}{holds} is not in the local engine: build it with `{command}` in the project "
        "folder, or run again with --yes to build it now"
    )


# -- doctor -------------------------------------------------------------------------------------------------------


def doctor_lines(here: ProjectHere, d: Diagnosis, archs: tuple[str, ...]) -> list[str]:
    """doctor's lines about the project's image: its name, where it is, whether it runs here."""
    w = here.wanted
    if w is None:
        return [f"project image: {runs_here(here, d, archs)}"]
    command = shlex.join(("torchyard", *here.build))
    if here.location is not None:
        where = f"in the local engine ({here.location.reference})"
    else:
        where = f"not built yet: `{command}` in the project builds it"
    return [
        f"project image: {LOCAL_NAME}/{w.name} over {w.combination}",
        f"  where:    {where}",
        f"  runs here: {runs_here(here, d, archs)}",
        f"  run it:   {run_line(here)}",
    ]


def run_line(here: ProjectHere) -> str:
    """The line that starts the project's image, building it first when it is missing."""
    words = ["torchyard", "run", *here.build[1:]]
    return shlex.join(words) if here.location else shlex.join([*words, "--yes"]) + " (builds it first)"


def runs_here(here: ProjectHere, d: Diagnosis, archs: tuple[str, ...]) -> str:
    """It runs wherever its base does: judged by the found image's labels, else by the chosen combination and the
    project's torch.archs against this machine's GPUs."""
    if here.wanted is None:
        return "no: no image of its combination runs on this machine (see the problems below)"
    loc = here.location
    if loc is not None and loc.answer is not None:
        return _answer(loc.answer)
    gpus = sorted({g.arch.name for g in d.host.gpus if g.arch is not None})
    missing = [a for a in gpus if archs and a not in archs]
    if missing:
        return (f"not checked: built for {', '.join(archs)} (torch.archs), this machine has {', '.join(missing)} "
                "(torchyard inspect IMAGE --here judges the built image)")  # fmt: skip
    cpu = d.recommended is not None and not d.recommended.gpu_flags
    return (
        "yes, on the CPU: its base's combination is the one for this machine"
        if cpu
        else ("yes: its base's combination is the one for this machine")
    )


def _answer(answer: Answer) -> str:
    if answer is Answer.RUNS:
        return "yes"
    if answer is Answer.RUNS_ON_CPU:
        return "yes, on the CPU"
    return (
        "cannot tell (torchyard inspect IMAGE --here says why)"
        if answer is Answer.CANNOT_TELL
        else ("yes, under conditions (torchyard inspect IMAGE --here names them)")
    )
