"""The build's side of attestation: what it knows about one pushed image (its plan, its times, the engine that
holds it) turned into builder/trust's Target and facts, between the immutable tag's push and the aliases'."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime

from builder import __version__
from builder.core.errors import PushError
from builder.engine import Engine, RegistryAuth, split_ref
from builder.oci.refs import parse_repo
from builder.pipeline.plan import Plan, TargetPlan
from builder.pipeline.registry import Registry
from builder.trust.attest import Attested, Target, TrustSettings, attest
from builder.trust.inventory import Inventory, read_inventory, stack_of
from builder.trust.sbom import Subject
from builder.trust.slsa import BuildFacts, Material


def attest_image(
    engine: Engine,
    registry: Registry,
    plan: Plan,
    target: TargetPlan,
    ref: str,
    trust: TrustSettings,
    times: tuple[datetime | None, datetime | None],
    image: str,
    auth: RegistryAuth | None,
    observed: dict[str, object] | None = None,
) -> Attested:
    """SBOM, provenance and signatures for the image the registry holds under `ref` (its immutable tag).
    `image`: the local image (id) to read the contents from; "" when only the registry has it (pulled then).
    `observed`: what the smoke suite read in it this run (its stack is then not asked of torch again)."""
    stack = stack_of(observed) if observed else None
    where = image_target(engine, registry, plan, ref, trust, (image, auth), stack)
    settings = replace(trust, facts=trust.facts | {"combination": plan.id, "flavor": target.flavor.value})
    return attest(where, settings, build_facts(plan, target, trust, times))


def image_target(
    engine: Engine,
    registry: Registry,
    plan: Plan,
    ref: str,
    trust: TrustSettings,
    local: tuple[str, RegistryAuth | None],
    stack: dict[str, str | None] | None = None,
) -> Target:
    """The image under `ref` (one image of `plan`'s platform) as builder/trust reads it: its manifest, its SBOM
    subject, and how to read its contents when its SBOM is missing. `local`: the local image (id; "": pulled
    then) and the pull's credentials. Also the project image's (builder/pipeline/project_attest.py): one way."""
    repo_text, tag = split_ref(ref)
    repo = parse_repo(repo_text)
    manifest = registry.client.manifest(repo, tag)
    if manifest is None or manifest.is_index:
        raise PushError(f"{ref}: the registry holds no image manifest under this tag to attest")
    subject = Subject(repo=str(repo), digest=manifest.digest, platform=plan.combination.platform.value,
                      os_id=re.sub(r"^([a-z]+)(\d)", r"\1-\2", plan.combination.os.name))  # fmt: skip

    def contents() -> Inventory:
        found = read_inventory(engine, local[0] or engine.pull(ref, local[1]).id, stack)
        first = (plan.spec.torch_index,) if plan.spec.torch_index else ()  # the index the venv stage installed from
        return trust.wheel_hashes(found, first) if trust.wheel_hashes else found

    return Target(client=registry.client, repo=repo, manifest=manifest, subject=subject, contents=contents)


def build_facts(
    plan: Plan, target: TargetPlan, trust: TrustSettings, times: tuple[datetime | None, datetime | None]
) -> BuildFacts:
    """The inputs (matrix.toml from the settings, the base images by digest where the lock pinned them, the
    Dockerfile) and the parameters that decide the image."""
    bases = tuple(
        Material(f"docker://{image.split('@')[0]}", _digest(image), "base image") for image in plan.base_images
    )
    dockerfile = Material(f"Dockerfile#{target.flavor.value}", plan.dockerfile_sha256, "Dockerfile")
    parameters = (
        ("combination", plan.id),
        ("flavor", target.flavor.value),
        ("platform", plan.combination.platform.value),
        ("strategy", plan.strategy.value),
        ("archs", ",".join(a.name for a in plan.archs) or "not recorded"),
        ("contentHash", plan.content_hash),
        ("immutableTag", target.tags.immutable),
    )
    return BuildFacts(
        torchyard_version=__version__,
        builder_id=trust.builder_id,
        materials=(*trust.materials, *bases, dockerfile),
        parameters=parameters,
        internal={key: value for key, value in sorted(trust.facts.items()) if value},  # matrix commit and sha256
        started=times[0],
        finished=times[1],
    )


def _digest(image: str) -> str | None:
    """The digest of `name@sha256:...` (a base pinned by matrix.lock, --locked); None for a tag."""
    _, _, digest = image.partition("@")
    return digest or None
