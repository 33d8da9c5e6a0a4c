"""Where the image doctor (or `lookup --here`, or `torchyard run`) names can be had: in the local engine, in the
team's repository (--repo / TORCHYARD_REPO, read with the registry client under a short timeout), or nowhere,
with the `torchyard build` line that makes it. A registry that cannot be reached is reported, never fatal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from builder.core.errors import TorchyardError
from builder.engine import Engine
from builder.net.http import Http, Policy
from builder.oci.client import Distribution
from builder.oci.refs import parse_repo

if TYPE_CHECKING:
    from builder.host.doctor import Diagnosis

LOOKUP_TIMEOUT = 1.0  # seconds per request: doctor must answer at once, also when the registry is down

# Sizes measured in docs/benchmarks.md (bench/family_bench.py, bench/arm64_build.py): (torch, variant, platform).
MEASURED_SIZES = {
    ("2.14.1", "cu130", "linux/amd64"): "6.33 GB",
    ("2.14.0", "cu130", "linux/amd64"): "6.33 GB",
    ("2.14.1", "cu130", "linux/arm64"): "6.17 GB",
}


class Where(StrEnum):
    LOCAL = "local engine"
    REPOSITORY = "repository"
    NOWHERE = "nowhere"


@dataclass(frozen=True)
class Location:
    where: Where
    reference: str | None  # the image to run (local tag, or repository:tag); None when nowhere
    notes: tuple[str, ...]  # what could not be read ("registry ... not reachable")
    build: str  # the torchyard build line that makes it
    size: str  # its expected size, or "not measured"


def expected_size(torch: str, variant: str, platform: str) -> str:
    measured = MEASURED_SIZES.get((torch, variant, platform))
    if measured:
        return f"about {measured} (measured: docs/benchmarks.md)"
    if variant.startswith("cu13"):
        return "not measured for this combination (a torch 2.14.1 cu130 runtime image: 6.33 GB, docs/benchmarks.md)"
    return "not measured for this combination"


def locate_image(
    tag: str,
    *,
    local: Callable[[str], bool] | None,
    repo: str | None,
    build: str,
    size: str,
    client: Distribution | None = None,
) -> Location:
    """`tag`: the image's tag (no repository). `local(ref)`: whether the engine holds ref (None: no engine)."""
    notes: list[str] = []
    for ref in _local_names(tag, repo):
        if local is not None and local(ref):
            return Location(Where.LOCAL, ref, (), build, size)
    if local is None:
        notes.append("the local engine could not be asked (no Docker engine)")
    if repo:
        found, note = _in_repository(repo, tag, client)
        if found:
            return Location(Where.REPOSITORY, f"{repo}:{tag}", tuple(notes), build, size)
        notes += [note] if note else []
    else:
        notes.append("no team repository given (--repo REGISTRY/NAME or TORCHYARD_REPO)")
    return Location(Where.NOWHERE, None, tuple(notes), build, size)


def _local_names(tag: str, repo: str | None) -> list[str]:
    """The team's name first, then the name `torchyard build` gives without --repo."""
    return list(dict.fromkeys([*([f"{repo}:{tag}"] if repo else []), f"torchyard:{tag}"]))


def _in_repository(repo: str, tag: str, client: Distribution | None) -> tuple[bool, str | None]:
    client = client or Distribution(Http(Policy(timeout=LOOKUP_TIMEOUT, retries=0, connect_retries=0)))
    try:
        found = client.manifest(parse_repo(repo), tag)
    except TorchyardError as exc:  # Unreachable, a refusal, a timeout: reported, never fatal
        return False, f"the registry of {repo} is not reachable ({exc})"
    if found is None:
        return False, f"{repo}:{tag} is not in the repository"
    return True, None


def locate_recommended(
    image: str, build: str, size: str, *, repo: str | None, local: Callable[[str], bool] | None
) -> Location:
    """Where doctor's (or lookup --here's) image is: `image` is repo:tag as named; `repo` the team's repository
    (None: only the local engine is asked)."""
    tag = image.rsplit(":", 1)[1]
    return locate_image(tag, local=local, repo=repo, build=build, size=size)


def engine_lookup(engine: Engine) -> Callable[[str], bool] | None:
    """engine.inspect as a yes/no question; None when no engine answers (a missing Docker is not an error here)."""
    try:
        engine.info()
    except TorchyardError:
        return None
    return lambda ref: engine.inspect(ref) is not None


def where_lines(loc: Location) -> list[str]:
    """The lines doctor and lookup --here print under the image."""
    if loc.where is Where.LOCAL:
        head = f"in the local engine ({loc.reference})"
    elif loc.where is Where.REPOSITORY:
        head = f"in the team's repository ({loc.reference}): docker pull {loc.reference}"
    else:
        head = f"nowhere yet: build it first (its `build` line); expected size {loc.size}"
    return [head, *loc.notes]


def location_json(loc: Location) -> dict[str, object]:
    return {"where": loc.where.value, "reference": loc.reference, "notes": list(loc.notes), "size": loc.size}


def locate_diagnosis(d: Diagnosis, repo: str, engine: Engine) -> Location | None:
    """Where doctor's recommendation is; `repo` is a registry repository when it names a host (else only the
    local engine is asked)."""
    r = d.recommended
    if r is None:
        return None
    c = r.result.combo
    size = expected_size(str(c.torch.version), c.variant.name, c.platform.value)
    return locate_recommended(r.image, r.build, size, repo=_registry(repo), local=engine_lookup(engine))


def _registry(repo: str) -> str | None:
    """The repository when it names a registry host (ghcr.io/acme/x, 127.0.0.1:5000/team/x), else None: a
    bare name (the default `torchyard`) lives only in local engines."""
    first, slash, _ = repo.partition("/")
    return repo if slash and ("." in first or ":" in first or first == "localhost") else None
