"""The one locator: where the image for this machine can be had, found by what images hold, not by a tag string.

doctor, `torchyard run`, `lookup --here` and `doctor --check` ask it. The rule when several fit (docs/host.md):

1. the chosen combination's runtime image (its labels name the combination): in the local engine, the plain one
   first, then one built for named architectures (-sm89), then one with additions (-x<id>), newest built first;
   else in the team's repository (one tags list, and the configs of the tags that start with the combination's
   immutable tag);
2. else the local torch image that runs here with the newest torch (runtime images first, then the newest built),
   said to be not the chosen one, with the chosen one's build line;
3. else nowhere: pulled or built as before.

Every candidate is judged here by the GPU code it really carries (`Judge`: torch's, from its combination, and its
extensions', from their architecture list), so an image built for another GPU, or one whose CUDA extensions need a
GPU on a machine without one, is passed over. A registry that cannot be reached is reported, never fatal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from builder.core.errors import TorchyardError
from builder.engine import ImageInfo
from builder.net.http import Http, Policy
from builder.oci.client import Distribution
from builder.oci.refs import RepoRef, parse_repo, platform_of
from builder.resolve.verdict import Answer

LOOKUP_TIMEOUT = 1.0  # seconds per request: doctor must answer at once, also when the registry is down
REGISTRY_BUDGET = 1.0  # seconds for every config read in the registry (the tags list comes first)
OURS = "io.torchyard.version"  # the label every torchyard image carries
PROJECT_LABEL = "io.torchyard.project"  # a project's image (builder/pipeline/project_plan.py): never a base image
OTHER_LOCAL = "in the local engine: "  # where_lines' head for another local image than the chosen one
LOCAL_NAME = "torchyard"  # the repository `torchyard build` names images by without --repo

# Sizes measured in docs/benchmarks.md (bench/family_bench.py, bench/arm64_build.py): (torch, variant, platform).
MEASURED_SIZES = {
    ("2.14.1", "cu130", "linux/amd64"): "6.33 GB",
    ("2.14.0", "cu130", "linux/amd64"): "6.33 GB",
    ("2.14.1", "cu130", "linux/arm64"): "6.17 GB",
}

# (reference, labels, platform, NVIDIA_REQUIRE_CUDA) -> how the image runs on this machine
Judge = Callable[[str, dict[str, str], str, str | None], Answer]
RUNS_HERE = (Answer.RUNS, Answer.RUNS_ON_CPU)
NOT_REFUSED = (*RUNS_HERE, Answer.RUNS_WITH, Answer.CANNOT_TELL)  # the chosen combination: its own unknowns stand


class Shelf(Protocol):
    """What the locator asks of the engine (builder.engine.DockerEngine has it)."""

    def labelled(self, label: str) -> list[ImageInfo]: ...


class Where(StrEnum):
    LOCAL = "local engine"
    REPOSITORY = "repository"
    NOWHERE = "nowhere"


@dataclass(frozen=True)
class Wanted:
    """The chosen combination's runtime image, as the locator looks for it."""

    combination: str  # its id (the io.torchyard.combination label)
    tag: str  # its plain immutable runtime tag (no -sm, no -x)
    platform: str
    build: str  # the torchyard build line that makes it
    size: str  # its expected size, or "not measured"
    flavor: str = "runtime"  # lookup --inference looks for the inference image
    same_flavor: bool = False  # another local image must be of this flavor too (a notebook's user and server)


@dataclass(frozen=True)
class Location:
    where: Where
    reference: str | None  # the image to run (local tag, or repository:tag); None when nowhere
    notes: tuple[str, ...]  # what could not be read ("registry ... not reachable")
    build: str  # the torchyard build line that makes the chosen image
    size: str  # its expected size, or "not measured"
    chosen: bool = True  # False: another local image that runs here, not the chosen combination's
    holds: str | None = None  # the combination the found image holds
    answer: Answer | None = None  # how it runs here (RUNS, RUNS ON CPU), where judged


@dataclass(frozen=True)
class _Candidate:
    ref: str
    holds: str
    answer: Answer
    rank: tuple[object, ...]


def expected_size(torch: str, variant: str, platform: str) -> str:
    measured = MEASURED_SIZES.get((torch, variant, platform))
    if measured:
        return f"about {measured} (measured: docs/benchmarks.md)"
    if variant.startswith("cu13"):
        return "not measured for this combination (a torch 2.14.1 cu130 runtime image: 6.33 GB, docs/benchmarks.md)"
    return "not measured for this combination"


def locate(
    wanted: Wanted,
    judge: Judge,
    *,
    local: Sequence[ImageInfo] | None,
    repo: str | None,
    client: Distribution | None = None,
) -> Location:
    """`local`: the engine's torchyard images (None: no engine answered); `repo`: the team's registry repository
    (None: only the local engine is asked)."""
    notes: list[str] = [] if local is not None else ["the local engine could not be asked (no Docker engine)"]
    mine = _local(wanted, judge, local or (), repo, chosen=True)
    if mine is not None:
        return _found(Where.LOCAL, mine, wanted, notes, chosen=True)
    if repo:
        there, note = _in_repository(wanted, judge, repo, client)
        if there is not None:
            return _found(Where.REPOSITORY, there, wanted, notes, chosen=True)
        notes += [note] if note else []
    else:
        notes.append("no team repository given (--repo REGISTRY/NAME or TORCHYARD_REPO)")
    other = _local(wanted, judge, local or (), repo, chosen=False)
    if other is not None:
        return _found(Where.LOCAL, other, wanted, notes, chosen=False)
    return Location(Where.NOWHERE, None, tuple(notes), wanted.build, wanted.size)


def _found(where: Where, c: _Candidate, wanted: Wanted, notes: list[str], *, chosen: bool) -> Location:
    return Location(where, c.ref, tuple(notes), wanted.build, wanted.size, chosen, c.holds, c.answer)


def _local(
    wanted: Wanted, judge: Judge, images: Sequence[ImageInfo], repo: str | None, *, chosen: bool
) -> _Candidate | None:
    """The best local image: of the chosen combination (plain, -sm, -x; newest first), or (chosen=False) of any
    other that runs here (runtime images first, newest first)."""
    found = []
    for info in images:
        if PROJECT_LABEL in info.labels:  # a project's image holds the combination and the project's code too
            continue
        holds = info.labels.get("io.torchyard.combination", "")
        wanted_one = holds == wanted.combination and info.labels.get("io.torchyard.flavor") == wanted.flavor
        if wanted_one != chosen or info.platform != wanted.platform:
            continue
        if wanted.same_flavor and info.labels.get("io.torchyard.flavor") != wanted.flavor:
            continue
        ref = _name(info, wanted.tag, repo)
        if ref is None:
            continue
        answer = judge(ref, info.labels, info.platform, cuda_requirement(info.env))
        if answer in (NOT_REFUSED if chosen else RUNS_HERE):
            found.append(_Candidate(ref, holds, answer, _rank(info, ref, wanted.tag, chosen=chosen)))
    return min(found, key=lambda c: c.rank, default=None)


def _rank(info: ImageInfo, ref: str, base: str, *, chosen: bool) -> tuple[object, ...]:
    newest = -created_at(info.created)
    if not chosen:  # runtime images first, then the newest torch (the closest to the recommendation), newest built
        return (info.labels.get("io.torchyard.flavor") != "runtime", _newest_torch(info.labels), newest, ref)
    return (*_kind(ref.rpartition(":")[2], base), newest, ref)


def _newest_torch(labels: dict[str, str]) -> tuple[int, ...]:
    """A sort key putting newer torch releases first (io.torchyard.torch: 2.15.0+cu132); unreadable ones last."""
    public = labels.get("io.torchyard.torch", "").partition("+")[0]
    parts = public.split(".")
    return tuple(-int(p) for p in parts) if parts and all(p.isdigit() for p in parts) else (1,)


def _kind(tag: str, base: str) -> tuple[bool, bool]:
    """(has additions, has named architectures): the plain tag sorts first, -x<id> last."""
    rest = tag[len(base) :] if tag.startswith(base) else tag
    return "-x" in rest, "-sm" in rest


def _name(info: ImageInfo, base: str, repo: str | None) -> str | None:
    """The name to run the image by: the team's repository first, then one whose tag is the combination's
    immutable one, then any; None for an image with no tag."""
    tags = [t for t in info.tags if not t.endswith(":<none>")]
    if not tags:
        return None

    def preference(ref: str) -> tuple[bool, bool, bool, str]:
        name, _, tag = ref.rpartition(":")
        return (name != repo, name != LOCAL_NAME, not tag.startswith(base), ref)

    return min(tags, key=preference)


def created_at(text: str) -> float:
    """The engine's RFC 3339 time (nanoseconds and a Z allowed) as seconds; 0 where it says none."""
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return 0.0


def cuda_requirement(env: Sequence[str]) -> str | None:
    found = dict(item.partition("=")[::2] for item in env)
    return found.get("NVIDIA_REQUIRE_CUDA") or None


def _in_repository(
    wanted: Wanted, judge: Judge, repo: str, client: Distribution | None
) -> tuple[_Candidate | None, str | None]:
    """One tags list, then the configs of the tags that start with the combination's immutable tag, in the
    order the rule prefers, for as long as the budget lasts."""
    client = client or Distribution(Http(Policy(timeout=LOOKUP_TIMEOUT, retries=0, connect_retries=0)))
    where = parse_repo(repo)
    try:
        tags = client.tags(where)
    except TorchyardError as exc:  # unreachable, a refusal, a timeout: reported, never fatal
        return None, f"the registry of {repo} is not reachable ({exc})"
    mine = sorted((t for t in tags if _of_combination(t, wanted.tag)), key=lambda t: (*_kind(t, wanted.tag), t))
    deadline = time.monotonic() + REGISTRY_BUDGET
    for tag in mine:
        if time.monotonic() > deadline:
            return None, f"{repo}: not every tag of {wanted.tag} could be read within {REGISTRY_BUDGET:.0f} s"
        found = _judged(client, where, tag, wanted, judge)
        if found is not None:
            return found, None
    passed = f" ({len(mine)} tag(s) of it hold images that do not run here)" if mine else ""
    return None, f"{repo}:{wanted.tag} is not in the repository{passed}"


def _of_combination(tag: str, base: str) -> bool:
    """The combination's immutable tag itself, or it with -sm.../-x... (not a zstd copy or a platform member)."""
    if tag == base:
        return True
    rest = tag[len(base) :] if tag.startswith(base + "-") else ""
    return rest.startswith(("-sm", "-x")) and not tag.endswith(("-zstd", "-amd64", "-arm64"))


def _judged(client: Distribution, repo: RepoRef, tag: str, wanted: Wanted, judge: Judge) -> _Candidate | None:
    try:
        found = client.image(repo, tag, wanted.platform)
    except TorchyardError:
        return None
    if found is None:
        return None
    inner = found[1].get("config") or {}
    labels = {str(k): str(v) for k, v in (inner.get("Labels") or {}).items()}
    platform = platform_of(found[1])
    if labels.get("io.torchyard.combination") != wanted.combination or platform != wanted.platform:
        return None
    if labels.get("io.torchyard.flavor") != wanted.flavor:
        return None
    ref = f"{repo}:{tag}"
    answer = judge(ref, labels, platform, cuda_requirement([str(e) for e in inner.get("Env") or []]))
    return _Candidate(ref, wanted.combination, answer, ()) if answer in NOT_REFUSED else None


@dataclass(frozen=True)
class ProjectWanted:
    """A project's image, as the locator looks for it: its name and the combination (and flavor) it was built
    over (the project stage inherits the base's io.torchyard.* labels)."""

    name: str  # the io.torchyard.project label
    combination: str
    platform: str
    flavor: str = "runtime"
    base_tag: str = ""  # the chosen combination's image tag: its project tags are read first in a registry


def locate_project(wanted: ProjectWanted, judge: Judge, images: Sequence[ImageInfo]) -> Location | None:
    """The newest local image of the project over the combination that runs here (judged as base images are: by
    its labels, the base's), or None: not built yet (or none of them runs here)."""
    found = []
    for info in images:
        labels = info.labels
        if labels.get(PROJECT_LABEL) != wanted.name or info.platform != wanted.platform:
            continue
        if labels.get("io.torchyard.combination") != wanted.combination:
            continue
        if labels.get("io.torchyard.flavor") != wanted.flavor:
            continue
        ref = _project_name(info, wanted.name)
        answer = None if ref is None else judge(ref, labels, info.platform, cuda_requirement(info.env))
        if ref is not None and answer in NOT_REFUSED:
            found.append(_Candidate(ref, wanted.combination, answer, (-created_at(info.created), ref)))
    best = min(found, key=lambda c: c.rank, default=None)
    return None if best is None else Location(Where.LOCAL, best.ref, (), "torchyard build", "", True, best.holds,
                                              best.answer)  # fmt: skip


def _project_name(info: ImageInfo, name: str) -> str | None:
    """The project image's reference: one under the project's repository (torchyard/NAME) first."""
    tags = [t for t in info.tags if not t.endswith(":<none>")]
    return min(tags, key=lambda ref: (not ref.rpartition(":")[0].endswith(f"/{name}"), ref), default=None)


def engine_images(engine: Shelf) -> list[ImageInfo] | None:
    """The engine's torchyard images; None when no engine answers (a missing Docker is not an error here)."""
    try:
        return engine.labelled(OURS)
    except TorchyardError:
        return None


def where_lines(loc: Location) -> list[str]:
    """The lines doctor and lookup --here print under the image."""
    if loc.where is Where.LOCAL and loc.chosen:
        head = f"in the local engine ({loc.reference})"
    elif loc.where is Where.LOCAL:
        head = (f"{OTHER_LOCAL}{loc.reference}, not the recommended image (it holds {loc.holds}), "
                f"{_runs(loc)}; the recommended one: build it with its `build` line")  # fmt: skip
    elif loc.where is Where.REPOSITORY:
        head = f"in the team's repository ({loc.reference}): docker pull {loc.reference}"
    else:
        head = f"nowhere yet: build it first (its `build` line); expected size {loc.size}"
    return [head, *loc.notes]


def _runs(loc: Location) -> str:
    return "it runs on this machine's CPU" if loc.answer is Answer.RUNS_ON_CPU else "it runs here"


def location_json(loc: Location) -> dict[str, object]:
    return {
        "where": loc.where.value,
        "reference": loc.reference,
        "recommended": loc.chosen if loc.reference else None,
        "holds": loc.holds,
        "verdict": loc.answer.value if loc.answer else None,
        "notes": list(loc.notes),
        "size": loc.size,
    }


def registry_of(repo: str | None) -> str | None:
    """The repository when it names a registry host (ghcr.io/acme/x, 127.0.0.1:5000/team/x), else None: a
    bare name (the default `torchyard`) lives only in local engines."""
    if repo is None:
        return None
    first, slash, _ = repo.partition("/")
    return repo if slash and ("." in first or ":" in first or first == "localhost") else None
