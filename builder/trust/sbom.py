"""An image's SBOM: CycloneDX 1.6 JSON (cyclonedx-python-lib) from its Inventory: every Debian package of the
dpkg status database and every Python distribution, each with its version and license (a Debian package's from
its copyright file, builder/trust/licenses.py), for distributions the sha256 of the file it was installed from
(the installer's record, else the file the build's own indexes serve for exactly its name, version and wheel tags,
builder/lock/sbom_hashes.py), the image as the described component, and the stack as properties; how many
distributions have a sha256 and how many components a license, and how many not, as summary properties.

A fact the image did not give is the property value "not recorded", never an empty or invented one. The SBOM is
checked against the CycloneDX 1.6 JSON schema before it leaves (`validate`), and so is one read back by
verify-image.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from builder.core.errors import BuildError
from builder.image.inventory import debian_license
from builder.trust.inventory import INSTALLER, DebianPackage, Distribution, Inventory
from builder.trust.licenses import debian_component_license, python_component_license, spdx_expression

if TYPE_CHECKING:  # cyclonedx's model takes a fifth of a second to import: only where an SBOM is made
    from cyclonedx.model.component import Component

MEDIA_TYPE = "application/vnd.cyclonedx+json"
NOT_RECORDED = "not recorded"
STACK_KEYS = ("torch", "cuda", "cudnn", "nccl", "archs")  # as torch reports them inside the image


@dataclass(frozen=True, kw_only=True)
class Subject:
    """The image an SBOM or provenance statement is about."""

    repo: str  # host/name
    digest: str  # sha256:... of the image manifest
    platform: str  # linux/amd64
    os_id: str | None = None  # debian12: the purl distro qualifier of its Debian packages


def make_sbom(inventory: Inventory, subject: Subject, facts: Mapping[str, str | None], when: datetime) -> str:
    """The SBOM as compact JSON. `facts`: what the build adds (matrix commit, combination id, flavor)."""
    from cyclonedx.model import Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.output.json import JsonV1Dot6

    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"{subject.repo}@{subject.digest}"))
    bom.metadata.timestamp = when
    root = _image_component(subject)
    bom.metadata.component = root
    components = [*_debian(inventory.dpkg or (), subject), *_python(inventory.distributions)]
    for component in components:
        bom.components.add(component)
    bom.register_dependency(root, components)
    for name, value in _properties(inventory, facts):
        bom.metadata.properties.add(Property(name=name, value=value))
    with warnings.catch_warnings():  # the library warns about graph details on stderr: the checks below decide
        warnings.simplefilter("ignore")
        text = str(JsonV1Dot6(bom).output_as_string(indent=None))
    validate(text)
    return text


def validate(text: str) -> None:
    """BuildError naming the first schema violation (CycloneDX 1.6 JSON schema, strict)."""
    from cyclonedx.schema import SchemaVersion  # jsonschema's import takes a second: only where an SBOM is checked
    from cyclonedx.validation.json import JsonStrictValidator

    problem = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if problem is not None:
        message = str(getattr(problem.data, "message", problem)).splitlines()[0][:300]
        raise BuildError(f"the SBOM does not validate against the CycloneDX 1.6 schema: {message}")


def _image_component(subject: Subject) -> Component:
    from cyclonedx.model.component import Component, ComponentType
    from packageurl import PackageURL

    host_name = subject.repo
    purl = PackageURL(
        type="oci",
        name=host_name.rsplit("/", 1)[-1],
        version=subject.digest,
        qualifiers={"repository_url": host_name, "platform": subject.platform},
    )
    return Component(
        name=host_name, version=subject.digest, type=ComponentType.CONTAINER, purl=purl, bom_ref=purl.to_string()
    )


def _debian(packages: Iterable[DebianPackage], subject: Subject) -> list[Component]:
    from cyclonedx.model import Property
    from cyclonedx.model.component import Component, ComponentType
    from packageurl import PackageURL

    found = []
    for p in packages:
        qualifiers = {"arch": p.architecture} | ({"distro": subject.os_id} if subject.os_id else {})
        purl = PackageURL(type="deb", namespace="debian", name=p.name, version=p.version, qualifiers=qualifiers)
        component = Component(
            name=p.name, version=p.version, type=ComponentType.LIBRARY, purl=purl, bom_ref=purl.to_string()
        )
        if p.source:
            component.properties.add(Property(name="torchyard:dpkg:source", value=p.source))
        _debian_license(component, p.licenses)
        found.append(component)
    return found


def _debian_license(component: Component, names: tuple[str, ...] | None) -> None:
    """The license its copyright file names; Debian's own words as a property where the SBOM's are SPDX's."""
    from cyclonedx.model import Property

    if not names:
        component.properties.add(Property(name="torchyard:license", value=NOT_RECORDED))
        return
    component.licenses.add(debian_component_license(names))
    expression, words = spdx_expression(names), str(debian_license(list(names)))
    if expression is not None and expression != words:  # GPL-2+ became GPL-2.0-or-later: what Debian wrote
        component.properties.add(Property(name="torchyard:license:debian", value=words))


def _python(dists: Iterable[Distribution]) -> list[Component]:
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.component import Component, ComponentType
    from packageurl import PackageURL

    found = []
    for d in dists:
        purl = PackageURL(type="pypi", name=d.name.lower().replace("_", "-"), version=d.version)
        component = Component(
            name=d.name, version=d.version, type=ComponentType.LIBRARY, purl=purl, bom_ref=purl.to_string()
        )
        if d.license:
            component.licenses.add(python_component_license(d.license))
        else:
            component.properties.add(Property(name="torchyard:license", value=NOT_RECORDED))
        if d.sha256:
            component.hashes.add(HashType(alg=HashAlgorithm.SHA_256, content=d.sha256))
            component.properties.add(Property(name="torchyard:wheel-sha256:source", value=d.sha256_from or INSTALLER))
            if d.sha256_file:
                component.properties.add(Property(name="torchyard:wheel-sha256:file", value=d.sha256_file))
        else:
            component.properties.add(Property(name="torchyard:wheel-sha256", value=NOT_RECORDED))
        found.append(component)
    return found


def _properties(inventory: Inventory, facts: Mapping[str, str | None]) -> list[tuple[str, str]]:
    stack = [(f"torchyard:stack:{key}", inventory.stack.get(key) or NOT_RECORDED) for key in STACK_KEYS]
    added = [(f"torchyard:{key}", value or NOT_RECORDED) for key, value in sorted(facts.items())]
    dpkg = [] if inventory.dpkg is not None else [("torchyard:dpkg", "no dpkg status database in the image")]
    hashed = sum(1 for d in inventory.distributions if d.sha256)
    counts = [("torchyard:wheel-sha256:recorded", str(hashed)),
              ("torchyard:wheel-sha256:not-recorded", str(len(inventory.distributions) - hashed))]  # fmt: skip
    return [*stack, *added, *dpkg, *counts, *_license_counts(inventory),
            ("torchyard:python", inventory.python or NOT_RECORDED)]  # fmt: skip


def _license_counts(inventory: Inventory) -> list[tuple[str, str]]:
    """How many components (Debian packages and distributions) name a license, and how many not."""
    known = [bool(p.licenses) for p in inventory.dpkg or ()] + [bool(d.license) for d in inventory.distributions]
    return [("torchyard:license:recorded", str(sum(known))),
            ("torchyard:license:not-recorded", str(len(known) - sum(known)))]  # fmt: skip
