"""A project's image on this machine (docs/project.md, "Run and doctor in a project"): `torchyard run` starts it
and doctor says whether it is here and runs here.

It is found by the one locator (host.locate.locate_project) among the local images, by what they hold: the
io.torchyard.project label naming the project, and the chosen combination's labels, which the project stage
inherits from its base image; else, with a team repository (--repo REGISTRY/NAME), in the registry under
REGISTRY/NAME/PROJECT, where `torchyard build --push` put it (host.project_remote), and pulled. The image runs
wherever its base does (the same combination, judged by the same labels). A missing one is built as `torchyard
build` in the project builds it, where run may build (--yes, or the user said yes), else run names that command and
exits as it does for any missing image.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace

from builder.core.errors import NoMatchError, TorchyardError
from builder.engine.types import ImageInfo
from builder.host.doctor import Diagnosis, Recommendation, judge_here
from builder.host.launch import Launch, RunImages, RunRequest, Say, build, fetch, with_identity
from builder.host.locate import (
    LOCAL_NAME,
    OTHER_LOCAL,
    PROJECT_LABEL,
    Location,
    ProjectWanted,
    Shelf,
    Where,
    locate_project,
    registry_of,
)
from builder.host.probe import Host
from builder.host.project_remote import project_in_registry
from builder.matrix.model import Matrix
from builder.oci.client import Distribution
from builder.resolve.verdict import Answer

BUILD = ("build",)  # `torchyard build` in the project folder: the base, then the project image


@dataclass(frozen=True)
class ProjectHere:
    """What run and doctor know of the project's image here."""

    wanted: ProjectWanted | None  # None: no combination runs here, so neither does the project
    location: Location | None  # the newest local one that runs here, else one in the registry; None: neither
    build: tuple[str, ...]  # the words after `torchyard` that build it (`build`, `build --project PATH`)
    notes: tuple[str, ...] = ()  # what the registry could not answer, or why it holds none
    repo: str | None = None  # the team's repository that was asked (a registry host), else None: local only

    @property
    def in_registry(self) -> bool:
        return self.location is not None and self.location.where is Where.REPOSITORY

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
    return ProjectWanted(name, c.id, c.platform.value, flavor, chosen.image.rpartition(":")[2])


def project_images(engine: Shelf) -> list[ImageInfo]:
    """The local project images; none when the engine does not answer (said by the locator's other lines)."""
    try:
        return engine.labelled(PROJECT_LABEL)
    except TorchyardError:
        return []


def project_here(
    m: Matrix,
    host: Host,
    wanted: ProjectWanted | None,
    engine: Shelf,
    project_flag: str | None,
    *,
    repo: str | None = None,
    client: Distribution | None = None,
) -> ProjectHere:
    """`wanted`: the project's name over the chosen combination (None when nothing runs here); `repo`: the team's
    repository, asked when no local image fits (only one that names a registry host); `client`: its reader."""
    build_words = BUILD + (("--project", project_flag) if project_flag is not None else ())
    if wanted is None:
        return ProjectHere(None, None, build_words)
    judge = judge_here(m, host)
    found = locate_project(wanted, judge, project_images(engine))
    team = registry_of(repo)
    if found is not None or team is None:
        return ProjectHere(wanted, found, build_words)
    there, why = project_in_registry(wanted, judge, team, client)
    return ProjectHere(wanted, there, build_words, (why,) if why else (), team)


# -- run ----------------------------------------------------------------------------------------------------------


def project_launch(launch: Launch, here: ProjectHere, engine: RunImages, request: RunRequest) -> Launch:
    """The launch with the project's image: the found one (local; its own passwd read), else the one in the
    team's repository (not local: obtain_project pulls it), else its repository's name, not local, built by
    `here.build`."""
    # the locator's line about another base image found instead of the chosen one is not about this image
    notes = tuple(n for n in launch.notes if not n.startswith(OTHER_LOCAL))
    if here.location is None or here.location.reference is None or here.in_registry:
        image = here.location.reference if here.location and here.location.reference else here.placeholder
        spec = replace(launch.spec, image=image, files=())
        return replace(launch, spec=spec, local=False, build=here.build, notes=notes)
    spec = replace(launch.spec, image=here.location.reference, files=())
    return with_identity(replace(launch, spec=spec, local=True, build=here.build, notes=notes), engine, request)


def project_lines(here: ProjectHere) -> list[str]:
    """run's line about the project's image."""
    loc = here.location
    if here.wanted is None:
        return []
    if loc is not None:
        where = ", in the team's repository" if loc.where is Where.REPOSITORY else ""
        return [f"the project's image: {loc.reference} ({here.wanted.combination}){where}"]
    return [f"the image of project {here.wanted.name} ({here.wanted.combination}) is not built yet", *here.notes]


def obtain_project(
    m: Matrix,
    launch: Launch,
    here: ProjectHere,
    engine: RunImages,
    request: RunRequest,
    may_build: Callable[[Launch], bool],
    say: Say,
) -> Launch:
    """The project's image in the local engine: pulled when the locator found it in the team's repository, else
    (or when the pull fails, said) built with `torchyard build` where `may_build` allows, then found again by the
    locator (locally: a build does not push)."""
    if launch.local:
        return launch
    if here.in_registry and fetch(launch, engine, say, pull=True):
        return with_identity(replace(launch, local=True), engine, request)
    launch = replace(launch, spec=replace(launch.spec, image=here.placeholder))  # what the build makes
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
    command, loc = shlex.join(("torchyard", *here.build)), here.location
    if loc is not None and loc.where is Where.REPOSITORY:
        where = f"in the team's repository ({loc.reference}): run pulls it"
    elif loc is not None:
        where = f"in the local engine ({loc.reference})"
    else:
        where = f"not built yet: `{command}` in the project builds it"
    return [
        f"project image: {LOCAL_NAME}/{w.name} over {w.combination}",
        f"  where:    {where}",
        *(f"  registry: {note}" for note in here.notes),  # asked and not found there, or not reachable: said
        f"  runs here: {runs_here(here, d, archs)}",
        f"  run it:   {run_line(here)}",
    ]


def run_line(here: ProjectHere) -> str:
    """The line that starts the project's image, building it first when it is missing; with the team's repository
    where the image is there (run looks in a registry only when told which)."""
    pull = ["--repo", here.repo] if here.in_registry and here.repo else []
    words = ["torchyard", "run", *here.build[1:], *pull]
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
