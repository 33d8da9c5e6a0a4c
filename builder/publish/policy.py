"""Policy reaches what is published (issue 44 item 4): an image the registry already holds with its content is
skipped (no build, no push), and the security gate still judges it, from what was published with it.

With --push the gate reads the image's SBOM from the registry (the CycloneDX document torchyard attached as an OCI
referrer with --attest or --sign-key, builder/trust/sbom.py): its Debian packages (name, version, source package)
against the security suite of the OS matrix.toml records for the combination (its codename), and its Python
distributions against PyPI's advisories, with the rules and allowlist of a built image (builder/pipeline/gate.py).
Nothing is pulled. A published image without an SBOM is not checked, and, as a security suite that cannot be read,
not passed: the gate does not pass what it did not check. Without --push the image is the local one, read as a built
image is. A blocked image fails its item (exit 4) with the gate's reason; its aliases and its index are then held,
and nothing is rebuilt: --refresh rebuilds it.

require_archs reaches published images at plan time (builder/publish/plan.py), before anything runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from builder.core.errors import BuildError, TorchyardError
from builder.core.kinds import Status
from builder.core.redact import redact
from builder.engine import Engine, split_ref
from builder.matrix.model import OSBase
from builder.oci.refs import parse_repo
from builder.pipeline.gate import GateResult, Packages, SecurityGate
from builder.pipeline.image_set import Installed
from builder.pipeline.registry import Registry
from builder.pipeline.security import DebPackage
from builder.publish.items import Item
from builder.publish.plan import PublishPlan
from builder.publish.report import ItemResult
from builder.render.pins import canonical
from builder.trust import cosign
from builder.trust.attest import read_attached
from builder.trust.sbom import MEDIA_TYPE as SBOM_TYPE

if TYPE_CHECKING:  # cryptography loads where a key is used (builder/trust/keys.py)
    from builder.trust.keys import SigningKey

Log = Callable[[str], None]
NO_DPKG = "torchyard:dpkg"  # the SBOM's property when the image had no dpkg status database
SOURCE = "torchyard:dpkg:source"
NOT_PASSED = "; not checked, so not passed"
Remote = tuple[Registry, "SigningKey | None"]  # the registry the images are published in, and this run's key
GATE_STOPPED = (
    "interrupted while the security gate read what is published: no alias was moved; run the same publish again"
)


def gate_skipped(
    pplan: PublishPlan,
    results: dict[str, ItemResult],
    gate: SecurityGate,
    remote: Remote | None,
    engine: Callable[[], Engine],
    log: Log,
) -> None:
    """The gate on every item this run skipped (its result replaced: with the gate's findings, or FAILED with its
    reason). `remote`: read the published SBOM in this registry (--push), signed with this key when one is given;
    None: judge the local image (`engine`)."""
    skipped = [i for i in pplan.items if i.id in results and results[i.id].status is Status.SKIPPED]
    local = engine() if remote is None and skipped else None
    for item in skipped:
        result = results[item.id]
        try:
            found = _judge(item, result.ref, gate, remote, local)
        except TorchyardError as exc:
            reason = redact(str(exc))
            results[item.id] = replace(result, status=Status.FAILED, reason=reason)
            log(f"FAIL  {item.id}: {reason.splitlines()[0]} (published, not rebuilt)")
            continue
        results[item.id] = replace(result, security=found.as_json())
        log(f"GATE  {item.id}: OS {found.os}; Python {found.python}")


def _judge(item: Item, ref: str, gate: SecurityGate, remote: Remote | None, local: Engine | None) -> GateResult:
    platform = item.combo.platform.value
    if remote is None:
        assert local is not None, "a local image is judged by the engine"
        return gate.check(local, ref, platform)
    return gate.check_packages(published_packages(remote, ref, platform, item.combo.os), platform)


def published_packages(remote: Remote, ref: str, platform: str, base: OSBase) -> Packages:
    """What the SBOM attached to the image under `ref` (for `platform`) lists; BuildError when it has none, is not
    signed with the key (when one is given: an unsigned SBOM is anyone's claim) or cannot be read (not checked,
    so not passed)."""
    registry, key = remote
    digest = _digest(registry, ref, platform)
    repo = parse_repo(split_ref(ref)[0])
    attached = read_attached(registry.client, repo, digest, SBOM_TYPE)
    if attached is None:
        raise BuildError(f"security gate not checked: {ref} has no SBOM attached (publish with --attest or "
                         f"--sign-key){NOT_PASSED}")  # fmt: skip
    unsigned = cosign.signed_by(registry.client, repo, attached[0], key.public()) if key is not None else None
    if unsigned is not None:
        raise BuildError(f"security gate not checked: the SBOM of {ref} is not signed with this run's key "
                         f"({unsigned}){NOT_PASSED}")  # fmt: skip
    try:
        return packages_of_sbom(attached[1], ref, base)
    except ValueError as exc:
        why = f"the SBOM of {ref} could not be read ({exc})"
        raise BuildError(f"security gate not checked: {why}{NOT_PASSED}") from None


def _digest(registry: Registry, ref: str, platform: str) -> str:
    """The digest of the image the SBOM is about: the tag's manifest, or its entry for `platform` in an index."""
    top = registry.read(ref)
    if top is None:
        raise BuildError(f"security gate: {ref} is no longer in the registry")
    if not top.is_index:
        return top.digest
    entries = [str(e["digest"]) for e in top.entries() if _platform(e) == platform]
    if entries:
        return entries[0]
    raise BuildError(f"security gate: {ref} holds no {platform} image")


def _platform(entry: Mapping[str, Any]) -> str:
    p = entry.get("platform") or {}
    return f"{p.get('os')}/{p.get('architecture')}"


def packages_of_sbom(content: bytes, subject: str, base: OSBase) -> Packages:
    """The gate's inputs from a CycloneDX SBOM torchyard wrote; the OS from matrix.toml (the SBOM records its
    Debian packages, not the release's codename). ValueError when it is not such a document."""
    data = json.loads(content)
    components = data.get("components") if isinstance(data, dict) else None
    if not isinstance(components, list):
        raise ValueError("not a CycloneDX document (no components list)")
    listed = [c for c in components if isinstance(c, dict)]
    debian = tuple(_deb(c) for c in listed if str(c.get("purl") or "").startswith("pkg:deb/"))
    python = tuple(_dist(c) for c in listed if str(c.get("purl") or "").startswith("pkg:pypi/"))
    no_dpkg = _property(data.get("metadata") or {}, NO_DPKG)
    if no_dpkg is not None:
        return Packages(subject, None, None, python, f"{subject}: {no_dpkg} (its SBOM)")
    release = {"ID": base.family, "VERSION_CODENAME": base.codename}
    release["PRETTY_NAME"] = base.name if base.codename else f"{base.name} (matrix.toml records no codename)"
    return Packages(subject, tuple(sorted(debian, key=lambda p: p.name)), release, python)


def _deb(component: Mapping[str, Any]) -> DebPackage:
    name = str(component.get("name") or "")
    return DebPackage(name, str(component.get("version") or ""), _property(component, SOURCE) or name)


def _dist(component: Mapping[str, Any]) -> Installed:
    name, version = canonical(str(component.get("name") or "")), str(component.get("version") or "")
    return Installed(name=name, version=version, tags=(), installer=None, local=None)


def _property(holder: Mapping[str, Any], name: str) -> str | None:
    for found in holder.get("properties") or []:
        if isinstance(found, dict) and found.get("name") == name:
            return str(found.get("value") or "")
    return None
