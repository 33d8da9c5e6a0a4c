"""A refresh that says what changed (issue 44 item 3). `--refresh TOKEN` rebuilds with an `apt-get upgrade`; the
token enters the content hash, so without this every refresh would publish a new digest whether or not a package
moved. Two checks, both only for a build with a refresh token:

- before the build, the base image's apt sources: a base that lists no security suite (`<codename>-security`, or
  `<codename>/updates` on old releases) cannot get security fixes from a refresh; one warning line and a field of
  the report say so. Read with one short run of the base where the engine holds it (no pull just for this), else
  from the built image (its sources are the base's) before its smoke suite.
- after the build and before the smoke suite, the built image's package set (dpkg packages and Python
  distributions with their versions: the inventory its SBOM is made from) against the SBOM of the image published
  under its tag. The same set: nothing is pushed, the published digest stays (no smoke suite, no tag, no build
  tag, no alias move). Another set: published as any build, the changes listed. Not compared (no published
  image, no SBOM, an SBOM not signed with the run's key, an unreadable one): published as before, and why is said.

The exported workflow compares when it promotes instead (`promote --keep-unchanged`, builder/publish/
promote_refresh.py), with this module's attached_packages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from builder.core.errors import TorchyardError
from builder.core.kinds import Flavor
from builder.engine import Engine, split_ref
from builder.oci.client import Manifest
from builder.oci.refs import RepoRef, parse_repo, platform_of
from builder.pipeline.plan import CONTENT_LABEL, REFRESH_ARG, REFRESH_LABEL, UNREFRESHED_LABEL, Plan
from builder.pipeline.registry import Registry
from builder.trust import cosign, sbom
from builder.trust.attest import read_attached
from builder.trust.inventory import read_inventory
from builder.trust.sbom_diff import Change, Key, diff, of_inventory, of_sbom

if TYPE_CHECKING:
    from builder.oci.client import Distribution
    from builder.trust.keys import SigningKey

UNCHANGED = "unchanged"
NOT_CHECKED = "not checked"
NO_SECURITY = "the base lists no security suite: a refresh cannot install security fixes"
SOURCES_TIMEOUT = 60
# every apt source file, each after a marker line; nothing printed for a pattern that matches no file
SOURCES_SCRIPT = (
    "for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; "
    'do if [ -f "$f" ]; then echo "### $f"; cat "$f"; fi; done'
)
Log = Callable[[str], None]
_SECURITY = re.compile(r"(-security|/updates)$")
_OPTIONS = re.compile(r"\[[^\]]*\]")


def token_of(plan: Plan) -> str:
    """The plan's refresh token ("" for a build without --refresh)."""
    return dict(plan.build_args).get(REFRESH_ARG, "")


@dataclass
class Refresh:
    """What a refresh found for one image (the report's `refresh` object, docs/publish.md)."""

    token: str
    sources: str = NOT_CHECKED  # "lists bookworm-security" | NO_SECURITY | "not checked: why"
    packages: str = "not compared"  # UNCHANGED | "N change(s)" | "not compared: why"
    compared_with: str = ""  # the published digest whose SBOM was compared
    unrefreshed: str = ""  # this build's content hash without its token: the published image's must be the same
    changes: tuple[Change, ...] = ()

    @property
    def unchanged(self) -> bool:
        return self.packages == UNCHANGED

    def as_json(self) -> dict[str, Any]:
        return {"token": self.token, "sources": self.sources, "packages": self.packages,
                "compared_with": self.compared_with, "changes": [c.as_json() for c in self.changes]}  # fmt: skip

    def lines(self, name: str) -> list[str]:
        """What a publish prints for the item `name`: a base without a security suite, and the package changes."""
        found = [f"WARN  {name}: {self.sources}"] if self.sources.startswith(NO_SECURITY) else []
        if self.unchanged:
            return [*found, f"SAME  {name}: refresh {self.token} changed no package: {self.compared_with} kept"]
        if self.packages.startswith("not compared"):
            return [*found, f"NEW   {name}: refresh {self.token}: packages {self.packages}"]
        return [*found, *(f"CHG   {name}: {c.describe()}" for c in self.changes)]


def before_build(engine: Engine, plan: Plan, flavors: list[Flavor], log: Log) -> dict[Flavor, Refresh]:
    """A Refresh for each flavor of a build with a refresh token ({} without one), its base's sources read where
    the engine holds the base (each base once)."""
    token = token_of(plan)
    if not token:
        return {}
    read: dict[str, str | None] = {}
    found = {}
    unrefreshed = plan.content_with_token("")  # the same for every flavor: one hash of the context
    for flavor in flavors:
        base = plan.spec.base_image(flavor)
        found[flavor] = Refresh(token, unrefreshed=unrefreshed)
        if base in read:  # a base shared by flavors (runtime, devel): read and said once
            found[flavor].sources = read[base] or NOT_CHECKED
            continue
        read[base] = base_sources(engine, base)
        if read[base] is not None:
            _sources(found[flavor], str(read[base]), f"[{flavor.value}]", f"the base {base}", log)
    return found


def after_build(
    engine: Engine, registry: Registry | None, ref: str, image_id: str, found: Refresh, key: SigningKey | None,
    log: Log, name: str,
) -> None:  # fmt: skip
    """The sources from the built image when the base was not read before, then the package set compared with the
    published image's (only with a registry: what a publish that pushes gives)."""
    if found.sources == NOT_CHECKED:
        _sources(found, read_sources(engine, image_id), f"[{name}]", "the built image (no local base)", log)
    if registry is None:  # `publish --no-push`, or `build --push`, which pushes a candidate (see BuildSettings)
        found.packages = "not compared: only a publish that pushes compares with the published image"
        return
    found.packages, found.compared_with, found.changes = compare(
        engine, registry, ref, image_id, key, found.unrefreshed
    )
    against = f" against {ref} ({found.compared_with})" if found.compared_with else ""
    listed = "".join(f"; {c.describe()}" for c in found.changes)
    log(f"[{name}] refresh {found.token}: packages {found.packages}{against}{listed}")


def _sources(found: Refresh, verdict: str, label: str, where: str, log: Log) -> None:
    found.sources = verdict
    prefix = "WARNING: " if verdict.startswith(NO_SECURITY) else ""
    log(f"{prefix}{label} refresh {found.token}, apt sources of {where}: {verdict}")


# -- the security suite --------------------------------------------------------------------------------------------


def security_suites(text: str) -> list[str]:
    """The security suites apt source files list: one-line `deb [opts] URI SUITE COMPONENTS` entries and deb822
    `Suites:` fields (commented lines and deb-src entries left out)."""
    found: list[str] = []
    for line in text.splitlines():
        words = _OPTIONS.sub(" ", line.split("#", 1)[0]).split()  # deb [arch=amd64 signed-by=...] URI SUITE
        if words[:1] == ["deb"]:
            found += words[2:3]
        elif words[:1] == ["Suites:"]:
            found += words[1:]
    return sorted({s for s in found if _SECURITY.search(s)})


def read_sources(engine: Engine, image: str) -> str:
    """The verdict on the image's apt sources, from one short run of it (`sh`: every base torchyard builds on)."""
    try:
        result = engine.run(image, ["sh", "-c", SOURCES_SCRIPT], timeout=SOURCES_TIMEOUT)
    except TorchyardError as exc:
        return f"not checked: reading the apt sources of {image} failed ({exc})"
    if result.exit_code != 0:
        why = "timed out" if result.timed_out else f"exited {result.exit_code}"
        return f"not checked: reading the apt sources of {image} {why}"
    suites = security_suites(result.output)
    if suites:
        return f"lists {', '.join(suites)}"
    return NO_SECURITY if "### " in result.output else f"{NO_SECURITY} (it has no apt source file)"


def base_sources(engine: Engine, base: str) -> str | None:
    """The verdict on the base's sources before the build, when the engine holds the base; None when it does not
    (the build pulls it: read_sources then reads the built image)."""
    return read_sources(engine, base) if engine.inspect(base) is not None else None


# -- the package set -----------------------------------------------------------------------------------------------


def compare(
    engine: Engine, registry: Registry, ref: str, image_id: str, key: SigningKey | None, unrefreshed: str
) -> tuple[str, str, tuple[Change, ...]]:
    """(packages verdict, the published digest compared with, the changes) for the image just built (`image_id`)
    against the one published under `ref`, when that is the same content under another refresh token."""
    try:
        published = registry.read(ref)
    except TorchyardError as exc:  # the push that follows says what the registry refuses
        return f"not compared: reading {ref} failed ({str(exc)[:200]})", "", ()
    if published is None:
        return f"not compared: {ref} is not in the registry (a first publish)", "", ()
    if published.is_index:
        return f"not compared: {ref} is an image index (an SBOM is attached to each image)", published.digest, ()
    old, why = _published_packages(registry, ref, published, key, unrefreshed)
    if old is None:
        return f"not compared: {why}", published.digest, ()
    try:
        new = of_inventory(read_inventory(engine, image_id, stack={}))  # a stack given: torch is not imported
    except TorchyardError as exc:
        return f"not compared: reading the packages of the new image failed ({exc})", published.digest, ()
    changes = diff(old, new)
    return (f"{len(changes)} change(s)" if changes else UNCHANGED), published.digest, changes


def unrefreshed_of(labels: Mapping[str, str]) -> str:
    """An image's content hash without its refresh token, from its labels; "" for a refresh build of a torchyard from
    before the label (unknown). An image built without a token has it as its content hash."""
    return labels.get(UNREFRESHED_LABEL) or ("" if labels.get(REFRESH_LABEL) else labels.get(CONTENT_LABEL, ""))


def beyond_token(name: str, labels: Mapping[str, str], unrefreshed: str) -> str:
    """Why the image `name` (its labels) may not be kept in place of a build whose content hash without its refresh
    token is `unrefreshed`; "" when it is that content under another token, or with none (an image built without a
    refresh: its content hash is that hash). A refresh replaces only packages: an image whose Dockerfile, build
    arguments or context files differ is published anew whatever its packages."""
    published = unrefreshed_of(labels)
    if not published:
        return f"{name} records no {UNREFRESHED_LABEL} (published before torchyard recorded it)"
    if published != unrefreshed:
        return f"{name} differs in more than its refresh token (Dockerfile, build arguments or context files)"
    return ""


def _published_packages(
    registry: Registry, ref: str, published: Manifest, key: SigningKey | None, unrefreshed: str
) -> tuple[dict[Key, str] | None, str]:
    """The package set of the published image's SBOM, or None and why it is not compared (another content, or an
    SBOM that cannot be read)."""
    beyond = beyond_token(ref, registry.labels(ref, top=published) or {}, unrefreshed)
    if beyond:
        return None, beyond
    return attached_packages(registry.client, parse_repo(split_ref(ref)[0]), ref, published.digest, key)


def attached_packages(
    client: Distribution, repo: RepoRef, ref: str, digest: str, key: SigningKey | None
) -> tuple[dict[Key, str] | None, str]:
    """The package set of the SBOM attached to `digest` in `repo` (`ref` names the image in the reason), or None
    and why it cannot be read. With a key, the SBOM must be signed with it: an unsigned one is anyone's claim.
    Shared by publish's refresh and `promote --keep-unchanged` (builder/publish/promote_refresh.py)."""
    try:
        attached = read_attached(client, repo, digest, sbom.MEDIA_TYPE)
        if attached is None:
            return None, f"{ref} ({digest}) has no SBOM"
        unsigned = cosign.signed_by(client, repo, attached[0], key.public()) if key is not None else None
        if unsigned is not None:
            return None, f"the SBOM of {ref} ({digest}) is not signed with this run's key ({unsigned})"
        return of_sbom(attached[1]), ""
    except (TorchyardError, ValueError) as exc:
        return None, f"the SBOM of {ref} ({digest}) could not be read ({str(exc)[:200]})"


def lists_exactly(registry: Registry, ref: str, digests: Mapping[str, str]) -> bool:
    """Whether the index under `ref` lists exactly these images ({platform: digest}): what a refresh that changed
    no platform's packages leaves behind (each image kept), so that index stays rather than a new one whose only
    difference is the content identity naming the refresh (builder/pipeline/multiplatform.py)."""
    found = registry.read(ref)
    if found is None or not found.is_index:
        return False
    return {platform_of(e): str(e.get("digest")) for e in found.entries()} == dict(digests)
