"""A project's image in the team's registry (docs/project.md, "Run and doctor in a project"): where `torchyard
build --push --repo REPO` put it, under REPO/NAME, found as the local one is, by what it holds.

One tags list of the project's repository, then the configs of its project tags (BASE-TAG-p<content id>), those over
the chosen combination's stem first, for as long as the budget lasts: each is judged by its labels (the project's
name, the combination, the flavor and platform, and how the base runs here), and the newest built of those that
fit wins. Which code it holds is not compared (a tag names the content, the machine running it may have another
checkout): `torchyard build` in the project makes the image of the code at hand. A registry that cannot be reached
is a note, never fatal: run then offers to build, as without --repo.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from time import monotonic

from builder.core.errors import TorchyardError
from builder.core.kinds import Flavor
from builder.host.locate import (
    LOOKUP_TIMEOUT,
    NOT_REFUSED,
    PROJECT_LABEL,
    REGISTRY_BUDGET,
    Judge,
    Location,
    ProjectWanted,
    Where,
    created_at,
    cuda_requirement,
)
from builder.net.http import Http, Policy
from builder.oci.client import Distribution
from builder.oci.refs import RepoRef, parse_repo, platform_of
from builder.render.tags import project_repository
from builder.resolve.verdict import Answer

_Fit = tuple[str, Answer, float]  # (ref, how it runs here, when it was built)
_PROJECT_TAG = re.compile(r".+-p[0-9a-f]{12}")  # builder/render/tags.py: project_tag
_FLAVOR = re.compile("-(?:" + "|".join(f.value for f in Flavor) + ")(?:-|$)")


def project_in_registry(
    wanted: ProjectWanted, judge: Judge, repo: str, client: Distribution | None = None
) -> tuple[Location | None, str]:
    """`repo`: the team's repository (a registry host first, host.locate.registry_of); the project's images are
    under repo/NAME. (the newest fitting image, None; or None and why none was found)."""
    client = client or Distribution(Http(Policy(timeout=LOOKUP_TIMEOUT, retries=0, connect_retries=0)))
    shown = project_repository(repo, wanted.name)
    where = parse_repo(shown)
    try:
        tags = client.tags(where)
    except TorchyardError as exc:  # unreachable, a refusal, a timeout: said, never fatal
        return None, f"the registry of {shown} is not reachable ({exc})"
    found, late = _read_within_budget(client, (where, shown), _in_order(tags, wanted.base_tag), wanted, judge)
    if found:
        ref, answer, _ = max(found, key=lambda f: (f[2], f[0]))
        return Location(Where.REPOSITORY, ref, (), "torchyard build", "", True, wanted.combination, answer), ""
    why = f"no image of project {wanted.name} over {wanted.combination} that runs here is in {shown}"
    return None, why + (f" (not every tag read within {REGISTRY_BUDGET:.0f} s)" if late else "")


def _in_order(tags: Iterable[str], base_tag: str) -> list[str]:
    """The project tags, those over the chosen combination's stem (its tag before the flavor) first, then the
    others (an image's labels decide, not its tag); the highest tag first within each."""
    cut = _FLAVOR.search(base_tag)
    stem = base_tag[: cut.start()] if cut else base_tag
    mine = sorted((t for t in tags if _PROJECT_TAG.fullmatch(t)), reverse=True)
    return sorted(mine, key=lambda t: not (stem and t.startswith(stem + "-")))  # stable: highest first within


def _read_within_budget(
    client: Distribution, where: tuple[RepoRef, str], tags: list[str], wanted: ProjectWanted, judge: Judge
) -> tuple[list[_Fit], bool]:
    """Each tag that fits; True when the budget ran out first. `where`: the repository, and as the user named it."""
    deadline = monotonic() + REGISTRY_BUDGET
    found: list[_Fit] = []
    for tag in tags:
        if monotonic() > deadline:
            return found, True
        fits = _judged(client, where, tag, wanted, judge)
        if fits is not None:
            found.append(fits)
    return found, False


def _judged(
    client: Distribution, where: tuple[RepoRef, str], tag: str, wanted: ProjectWanted, judge: Judge
) -> _Fit | None:
    try:
        read = client.image(where[0], tag, wanted.platform)
    except TorchyardError:  # a tag without this platform, a config that cannot be read: passed over
        return None
    if read is None:
        return None
    config = read[1]
    inner = config.get("config") or {}
    labels = {str(k): str(v) for k, v in (inner.get("Labels") or {}).items()}
    holds = (labels.get(PROJECT_LABEL), labels.get("io.torchyard.combination"), labels.get("io.torchyard.flavor"))
    if holds != (wanted.name, wanted.combination, wanted.flavor) or platform_of(config) != wanted.platform:
        return None
    ref = f"{where[1]}:{tag}"
    answer = judge(ref, labels, wanted.platform, cuda_requirement([str(e) for e in inner.get("Env") or []]))
    return (ref, answer, created_at(str(config.get("created") or ""))) if answer in NOT_REFUSED else None
