"""The project image's SBOM, provenance and signatures (docs/project.md, "The project image and trust"): the base's
way (builder/pipeline/attest.py's image_target, builder/trust/attest.py's attest), with the project's own facts.
Its SBOM is read inside the project image (the project's packages with the base's); its provenance names the base
image it was built FROM by its digest in the registry, and the project's content id among its parameters."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime

from builder import __version__
from builder.engine import Engine, RegistryAuth, split_ref
from builder.oci.refs import parse_repo
from builder.pipeline.attest import image_target
from builder.pipeline.plan import CONTENT_LABEL
from builder.pipeline.project_plan import ProjectPlan
from builder.pipeline.registry import Registry
from builder.trust.attest import Attested, TrustSettings, attest
from builder.trust.slsa import BuildFacts, Material

Times = tuple[datetime | None, datetime | None]  # the build's start and its checks' end; None: not known (not built)


def attest_project(
    engine: Engine,
    registry: Registry,
    plan: ProjectPlan,
    repo: str,
    trust: TrustSettings,
    times: Times,
    local: tuple[str, RegistryAuth | None],
) -> Attested:
    """What the registry lacks of the project image's attachments under plan.ref(repo), written and signed (none
    missing: nothing written). `local`: the local image (id; "": pulled when its SBOM must be read) and the
    pull's credentials. Torch is asked inside the project image itself: its smoke suite is the base's."""
    where = image_target(engine, registry, plan.base, plan.ref(repo), trust, local)
    facts: dict[str, str | None] = {
        "combination": plan.base.id,
        "flavor": plan.flavor.value,
        "project": plan.name,
        "project-content": plan.content_id,
    }
    base = base_material(registry, plan, plan.base_ref(repo))
    return attest(where, replace(trust, facts=trust.facts | facts), project_facts(plan, repo, trust, times, base))


def base_material(registry: Registry, plan: ProjectPlan, base_ref: str) -> Material:
    """The base image as a resolved dependency: the digest of its platform's image under its immutable tag, where
    that image holds the base plan's content (the image the project was built FROM); else "not recorded"."""
    repo_text, tag = split_ref(base_ref)
    found = registry.client.image(parse_repo(repo_text), tag, plan.base.combination.platform.value)
    labels = {} if found is None else (found[1].get("config") or {}).get("Labels") or {}
    same = found is not None and labels.get(CONTENT_LABEL) == plan.base.content_hash
    return Material(f"docker://{base_ref}", found[0].digest if found is not None and same else None, "base image")


def project_facts(plan: ProjectPlan, repo: str, trust: TrustSettings, times: Times, base: Material) -> BuildFacts:
    """The inputs (matrix.toml from the settings, the base image by digest, the project's Dockerfile) and the
    parameters that decide the project image (its content id covers its files and every copied byte)."""
    dockerfile = Material("Dockerfile#project", hashlib.sha256(plan.dockerfile.encode()).hexdigest(), "Dockerfile")
    parameters = (
        ("combination", plan.base.id),
        ("flavor", plan.flavor.value),
        ("platform", plan.base.combination.platform.value),
        ("project", plan.name),
        ("projectContent", plan.content_id),
        ("baseImage", plan.base_ref(repo)),
        ("baseContentHash", plan.base.content_hash),
        ("immutableTag", plan.tag),
    )
    return BuildFacts(
        torchyard_version=__version__,
        builder_id=trust.builder_id,
        materials=(*trust.materials, base, dockerfile),
        parameters=parameters,
        internal={key: value for key, value in sorted(trust.facts.items()) if value},  # matrix commit and sha256
        started=times[0],
        finished=times[1],
    )
