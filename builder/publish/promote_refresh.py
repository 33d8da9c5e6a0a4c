"""`torchyard promote --keep-unchanged` (issue 44 item 3 in the exported workflow): a refreshed candidate whose
package set is the one DST already has is not promoted, so a weekly refresh that moved no package leaves the
public tag, its digest and its signatures as they are.

`--refresh TOKEN` enters the content hash, so every refreshed candidate has a new digest, and promoting it would
republish every image each week. Before anything is copied, for a SRC whose image carries a refresh token (the
io.torchyard.refresh label, builder/pipeline/plan.py), the package set of SRC's SBOM is compared with that of
DST's, both read registry-side (builder/pipeline/refresh.py's attached_packages, builder/trust/sbom_diff.py):

- the same set: DST is kept (nothing copied, signed or tagged; no build tag, no zstd copy);
- another set: promoted as without the flag, the changes listed;
- not compared (SRC not a refresh, an image index, DST absent, DST not the same content under another refresh
  token (their io.torchyard.unrefreshed-content-hash labels differ, or DST has none), an SBOM missing or
  unreadable, DST's SBOM not signed with the run's key when one is given): promoted as without the flag, and why
  is said.

SRC must carry `--content-hash` (when given) before it can keep DST: a stale candidate is never a reason to keep
anything, and the promotion that follows refuses it as before."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from builder.core.errors import TorchyardError
from builder.oci.client import Distribution, Manifest
from builder.oci.promote import CONTENT_LABEL
from builder.oci.refs import ImageRef
from builder.pipeline.plan import REFRESH_LABEL, UNREFRESHED_LABEL
from builder.pipeline.refresh import UNCHANGED, attached_packages, beyond_token
from builder.trust.sbom_diff import Change, Key, diff

if TYPE_CHECKING:
    from builder.trust.keys import SigningKey

NOT_COMPARED = "not compared"


@dataclass
class PackageCheck:
    """What `--keep-unchanged` found (the `refresh` object of `promote --json`)."""

    token: str  # SRC's refresh token ("" when SRC carries none, or could not be read)
    packages: str  # UNCHANGED | "N change(s)" | "not compared: why"
    compared_with: str = ""  # DST's digest, whose SBOM was compared
    changes: tuple[Change, ...] = ()

    @property
    def unchanged(self) -> bool:
        return self.packages == UNCHANGED

    def as_json(self) -> dict[str, Any]:
        return {"token": self.token, "packages": self.packages, "compared_with": self.compared_with,
                "changes": [c.as_json() for c in self.changes]}  # fmt: skip

    def lines(self, target: str) -> list[str]:
        """What promote prints: the kept line, the package changes, or why they were not compared."""
        if self.unchanged:
            return [f"kept: refresh {self.token} changed no package; {target} stays {self.compared_with}"]
        if self.packages.startswith(NOT_COMPARED):
            return [f"packages {self.packages}"]
        head = f"refresh {self.token}: {self.packages} against {target} ({self.compared_with})"
        return [head, *(f"  {c.describe()}" for c in self.changes)]


def check_packages(
    client: Distribution, source: ImageRef, target: ImageRef, content_hash: str | None, key: SigningKey | None
) -> PackageCheck:
    """SRC's package set against DST's, each from its attached SBOM (DST's signed with `key` when given)."""
    try:
        return _check(client, source, target, content_hash, key)
    except TorchyardError as exc:  # the promotion that follows says what the registry refuses
        return PackageCheck("", f"{NOT_COMPARED}: reading the registry failed ({str(exc)[:200]})")


def _check(
    client: Distribution, source: ImageRef, target: ImageRef, content_hash: str | None, key: SigningKey | None
) -> PackageCheck:
    src = client.manifest(source.repo, source.reference)
    if src is None:
        return PackageCheck("", f"{NOT_COMPARED}: {source} does not exist")
    if src.is_index:
        return PackageCheck("", f"{NOT_COMPARED}: {source} is an image index (an SBOM is attached to each image)")
    labels = _labels(client, source, src)
    token = labels.get(REFRESH_LABEL, "")
    if not token:
        return PackageCheck("", f"{NOT_COMPARED}: {source} is not a refresh build (no {REFRESH_LABEL} label)")
    if content_hash is not None and labels.get(CONTENT_LABEL) != content_hash:
        return PackageCheck(token, f"{NOT_COMPARED}: {source} does not carry --content-hash {content_hash}")
    return _against(client, source, target, src.digest, labels, key)


def _against(
    client: Distribution, source: ImageRef, target: ImageRef, digest: str, labels: dict[str, str],
    key: SigningKey | None,
) -> PackageCheck:  # fmt: skip
    token = labels[REFRESH_LABEL]
    dst = client.manifest(target.repo, target.reference)
    if dst is None:
        return PackageCheck(token, f"{NOT_COMPARED}: {target} is not in the registry (a first promotion)")
    if dst.digest == digest:
        return PackageCheck(token, f"{NOT_COMPARED}: {target} already is {digest}", dst.digest)
    if dst.is_index:
        why = f"{target} is an image index (an SBOM is attached to each image)"
        return PackageCheck(token, f"{NOT_COMPARED}: {why}", dst.digest)
    old, why = _dst_packages(client, target, dst, labels.get(UNREFRESHED_LABEL, ""), key)
    if old is None:
        return PackageCheck(token, f"{NOT_COMPARED}: {why}", dst.digest)
    new, why = attached_packages(client, source.repo, str(source), digest, None)  # the candidate's, unsigned
    if new is None:
        return PackageCheck(token, f"{NOT_COMPARED}: {why}", dst.digest)
    changes = diff(old, new)
    return PackageCheck(token, f"{len(changes)} change(s)" if changes else UNCHANGED, dst.digest, changes)


def _dst_packages(
    client: Distribution, target: ImageRef, dst: Manifest, unrefreshed: str, key: SigningKey | None
) -> tuple[dict[Key, str] | None, str]:
    """DST's package set, or None and why it is not compared (another content than SRC's, or no readable SBOM)."""
    beyond = beyond_token(str(target), _labels(client, target, dst), unrefreshed)
    if beyond:
        return None, beyond
    return attached_packages(client, target.repo, str(target), dst.digest, key)


def _labels(client: Distribution, source: ImageRef, manifest: Manifest) -> dict[str, str]:
    config = str((manifest.data.get("config") or {}).get("digest") or "")
    if not config:
        return {}
    found = (client.blob_json(source.repo, config).get("config") or {}).get("Labels") or {}
    return {str(k): str(v) for k, v in found.items()}


def kept_json(source: str, target: str, found: PackageCheck) -> dict[str, Any]:
    """`promote --json` for a kept DST: nothing promoted, DST's digest as it was."""
    return {"schema": 1, "source": source, "target": target, "digest": found.compared_with, "kept": True,
            "build_tag": None, "refresh": found.as_json()}  # fmt: skip
