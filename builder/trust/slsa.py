"""An image's provenance: an in-toto Statement v1 with a SLSA v1 provenance predicate
(https://slsa.dev/provenance/v1): who built it (torchyard, its version), from what (matrix.toml at its commit
with its sha256, the base images by digest where the lock pins them, the Dockerfile's sha256, the wheels'
sha256 where the image records them), with which parameters, and when the build started and finished.

An input whose digest was not known is listed with the annotation "not recorded" rather than left out or
given a made-up digest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from builder.trust.intoto import STATEMENT_TYPE, subject
from builder.trust.inventory import Inventory

PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
MEDIA_TYPE = "application/vnd.in-toto+json"
BUILD_TYPE = "urn:torchyard:build-type:v1"  # its parameters are described in docs/trust.md
LOCAL_BUILDER = "urn:torchyard:builder:local"  # no source repository known (a build outside a git checkout)


@dataclass(frozen=True)
class Material:
    uri: str
    sha256: str | None  # None: not recorded
    name: str = ""


@dataclass(frozen=True, kw_only=True)
class BuildFacts:
    """What the build knew about itself: torchyard's version, the inputs and parameters, the times."""

    torchyard_version: str
    builder_id: str = LOCAL_BUILDER  # the source repository's URL where known (builder/core/provenance.py)
    materials: tuple[Material, ...] = ()
    parameters: tuple[tuple[str, str], ...] = ()
    started: datetime | None = None
    finished: datetime | None = None
    invocation: str = ""  # an id of this run (the output folder, a CI run URL)
    internal: dict[str, str] = field(default_factory=dict)  # builder-side facts (the engine's version)


def make_statement(image_name: str, digest: str, facts: BuildFacts, inventory: Inventory | None) -> str:
    """The statement as compact JSON with sorted keys (the same facts give the same bytes)."""
    wheels = [Material(f"pkg:pypi/{d.name.lower()}@{d.version}", d.sha256) for d in inventory.distributions
              if d.sha256] if inventory else []  # fmt: skip
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": subject(image_name, digest),
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": dict(facts.parameters),
                "internalParameters": dict(facts.internal),
                "resolvedDependencies": [_descriptor(m) for m in (*facts.materials, *wheels)],
            },
            "runDetails": {
                "builder": {"id": facts.builder_id, "version": {"torchyard": facts.torchyard_version}},
                "metadata": _metadata(facts),
            },
        },
    }
    return json.dumps(statement, sort_keys=True, separators=(",", ":"))


def _descriptor(material: Material) -> dict[str, Any]:
    found: dict[str, Any] = {"uri": material.uri}
    if material.name:
        found["name"] = material.name
    if material.sha256:
        found["digest"] = {"sha256": material.sha256.removeprefix("sha256:")}
    else:
        found["annotations"] = {"digest": "not recorded"}
    return found


def _metadata(facts: BuildFacts) -> dict[str, str]:
    found = {"invocationId": facts.invocation} if facts.invocation else {}
    for key, moment in (("startedOn", facts.started), ("finishedOn", facts.finished)):
        if moment is not None:
            found[key] = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return found


def problem(predicate: object) -> str | None:
    """What keeps `predicate` from being a SLSA v1 provenance predicate (None: nothing): a buildDefinition with a
    string buildType and an object externalParameters, a runDetails whose builder has a string id."""
    if not isinstance(predicate, dict):
        return "no predicate object"
    definition, details = predicate.get("buildDefinition"), predicate.get("runDetails")
    if not isinstance(definition, dict) or not isinstance(definition.get("buildType"), str):
        return "no buildDefinition.buildType"
    if not isinstance(definition.get("externalParameters"), dict):
        return "no buildDefinition.externalParameters object"
    if not isinstance(definition.get("resolvedDependencies", []), list):
        return "buildDefinition.resolvedDependencies is not a list"
    builder = details.get("builder") if isinstance(details, dict) else None
    if not isinstance(builder, dict) or not isinstance(builder.get("id"), str) or not builder["id"]:
        return "no runDetails.builder.id"
    return None
