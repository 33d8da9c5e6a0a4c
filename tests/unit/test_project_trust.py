"""The project image attested like its base (docs/project.md, "The project image and trust"): with --push and a key,
its SBOM (read inside the project image), its provenance (the base by digest, the project's content id), their
signatures and cosign attestations are written by the base's functions; a rerun writes nothing new; an image held
in the registry only is pulled to read it; verify-image passes on it. The fake engine and the in-memory registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from fake_engine import FakeEngine, FakeRegistry, wall_off_the_engine
from registry_kit import MemoryRegistry
from test_project_image import REPO, engine_for, folder, planned, settings
from test_trust_sbom import INVENTORY
from trust_kit import registry, write_key

from builder.engine import RegistryAuth, RunResult
from builder.image.inventory import INVENTORY_MARK
from builder.oci.refs import parse_ref, parse_repo
from builder.pipeline.pipeline import build
from builder.pipeline.plan import CONTENT_LABEL
from builder.pipeline.project_attest import base_material
from builder.pipeline.project_build import ProjectOutcome, build_project
from builder.pipeline.project_plan import ProjectPlan
from builder.trust.attest import TrustSettings
from builder.trust.keys import public_key, signing_key
from builder.trust.verify import Verdict, verify_image

__all__ = ["folder"]  # the fixture, shared with test_project_image.py

# the project image's packages: the base's and the project's own (its requirements and pip)
EINOPS = {"name": "einops", "version": "0.8.1", "license": "MIT"}
PROJECT_INVENTORY = INVENTORY | {"distributions": [*cast(list[object], INVENTORY["distributions"]), EINOPS]}


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


def _setup(p: ProjectPlan, tmp_path: Path) -> tuple[FakeEngine, MemoryRegistry, TrustSettings]:
    """The fake engine whose pushes also land in the in-memory registry the attestations are written to."""
    memory, client = registry()
    engine = engine_for(p)
    assert isinstance(engine.registry, FakeRegistry)
    fake = engine.registry
    fake.client = client
    engine.scripted["python"] = RunResult(0, INVENTORY_MARK + json.dumps(PROJECT_INVENTORY) + "\n")
    pushed = engine.push

    def push(ref: str, auth: RegistryAuth | None, on_line: object) -> str:
        digest = pushed(ref, auth, lambda line: None)
        repo, tag = ref.rsplit(":", 1)
        memory.add_image(parse_repo(repo).name, tag, labels=fake.refs[ref])
        return digest

    setattr(engine, "push", push)  # noqa: B010 (an instance's method replaced: the dataclass has no hook)
    return engine, memory, TrustSettings(key=signing_key(write_key(tmp_path), {}))


def _run(
    engine: FakeEngine, p: ProjectPlan, tmp_path: Path, trust: TrustSettings | None, log: list[str]
) -> ProjectOutcome:
    """The base, then the project, both with --push (and the trust settings) against the registry."""
    assert engine.registry is not None
    s = settings(tmp_path, push=True, trust=trust, force=True)
    build(engine, p.base, s, log.append, engine.registry)
    return build_project(engine, p, s, log.append, engine.registry)


def _verified(engine: FakeEngine, p: ProjectPlan, tmp_path: Path) -> Verdict:
    assert engine.registry is not None
    verdict = verify_image(engine.registry.client, parse_ref(p.ref(REPO)), public_key(tmp_path / "key.pem.pub"))
    assert verdict.checks and not verdict.failed and not verdict.unchecked, verdict.as_json()
    return verdict


def _documents(verdict: Verdict) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the SBOM, the provenance statement) as verify-image read them back."""
    found = {name: json.loads(text) for (_, name), text in verdict.documents.items()}
    return found["sbom"], found["provenance"]


def test_the_project_image_is_attested_signed_and_verifies(folder: Path, tmp_path: Path) -> None:
    p, log = planned(folder), list[str]()
    engine, memory, trust = _setup(p, tmp_path)
    outcome = _run(engine, p, tmp_path, trust, log)
    assert outcome.attested is not None
    assert outcome.attested.written == ["sbom", "provenance", "signature", "attestation"]
    assert log[-1].startswith(f"[project] attested {outcome.attested.digest}: sbom sha256:")
    inventory = [c.args for c in engine.of("run") if INVENTORY_MARK in " ".join(c.args)]
    project_id = engine.tags[p.ref(REPO)]
    assert inventory[-1][0] == project_id and inventory[-1][-1] != "--no-torch"  # read inside the project image
    sbom, provenance = _documents(_verified(engine, p, tmp_path))
    assert "einops" in {c["name"] for c in sbom["components"]}
    properties = {prop["name"]: prop["value"] for prop in sbom["metadata"]["properties"]}
    assert (properties["torchyard:project"], properties["torchyard:project-content"]) == ("my-model", p.content_id)
    definition = provenance["predicate"]["buildDefinition"]
    assert definition["externalParameters"]["projectContent"] == p.content_id
    assert definition["externalParameters"]["baseImage"] == p.base_ref(REPO)
    base_tag = p.base_ref(REPO).rsplit(":", 1)[1]  # the base: its digest in the registry, under its immutable tag
    base = {
        "uri": f"docker://{p.base_ref(REPO)}",
        "name": "base image",
        "digest": {"sha256": _digest(memory, base_tag)},
    }
    assert base in definition["resolvedDependencies"]
    assert "startedOn" in provenance["predicate"]["runDetails"]["metadata"]


def _digest(memory: MemoryRegistry, tag: str) -> str:
    from builder.oci.client import digest_of

    return digest_of(memory.manifests["team", tag][0]).removeprefix("sha256:")


def test_a_second_run_writes_nothing_and_reads_nothing(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    engine, _, trust = _setup(p, tmp_path)
    _run(engine, p, tmp_path, trust, [])
    engine.calls.clear()
    log: list[str] = []
    outcome = _run(engine, p, tmp_path, trust, log)
    assert outcome.attested is not None and outcome.attested.written == [] and engine.of("run") == []
    assert log[-1].endswith("; wrote nothing new (already attached)")


def test_an_image_held_unsigned_in_the_registry_is_pulled_read_and_signed(folder: Path, tmp_path: Path) -> None:
    """Pushed before without a key, from another machine: this one builds nothing and finishes the evidence."""
    p = planned(folder)
    engine, _, trust = _setup(p, tmp_path)
    _run(engine, p, tmp_path, None, [])
    del engine.tags[p.ref(REPO)]
    engine.calls.clear()
    outcome = _run(engine, p, tmp_path, trust, [])
    assert outcome.status == "up-to-date" and engine.of("build") == [] and engine.pushed() == []
    assert [c.args for c in engine.of("pull")][-1] == (p.ref(REPO),)  # its contents, for the SBOM
    assert outcome.attested is not None and "signature" in outcome.attested.written
    _verified(engine, p, tmp_path)


def test_without_trust_settings_nothing_is_attested(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    engine, memory, _ = _setup(p, tmp_path)
    outcome = _run(engine, p, tmp_path, None, [])
    assert outcome.attested is None and not [ref for _, ref in memory.manifests if ref.endswith((".sig", ".att"))]


def test_a_base_with_another_content_is_not_recorded_as_the_base(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    engine, memory, _ = _setup(p, tmp_path)
    assert engine.registry is not None
    base_tag = p.base_ref(REPO).rsplit(":", 1)[1]
    memory.add_image("team", base_tag, labels={CONTENT_LABEL: "0" * 64})  # the tag moved on since the build
    assert base_material(engine.registry, p, p.base_ref(REPO)).sha256 is None
    digest = memory.add_image("team", base_tag, labels={CONTENT_LABEL: p.base.content_hash})
    assert base_material(engine.registry, p, p.base_ref(REPO)).sha256 == digest


def test_the_key_reaches_no_log_output_folder_or_attachment(folder: Path, tmp_path: Path) -> None:
    p, log = planned(folder), list[str]()
    engine, memory, trust = _setup(p, tmp_path)
    _run(engine, p, tmp_path, trust, log)
    secret = (tmp_path / "key.pem").read_text().splitlines()[1]
    written = [f.read_text(errors="replace") for f in (tmp_path / "ctx").rglob("*") if f.is_file()]
    stored = [blob.decode(errors="replace") for blob in memory.blobs.values()]
    assert not [text for text in (*log, *written, *stored) if secret in text]
    assert all(secret not in " ".join(c.args) for c in engine.calls)
