"""Attestation in the build pipeline and the CLI: between the immutable tag's push and the aliases'; a refused
upload stops the aliases and a rerun finishes without rebuilding; a bad key stops the run before anything is
built, in one line; the key is never printed, logged or written to the output folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_engine import FakeEngine, FakeRegistry, contents_of, wall_off_the_engine
from registry_kit import MemoryRegistry
from render_kit import plan
from test_pipeline import ALIAS, IDENT, IMMUTABLE, REPO, RUNTIME_TAG
from test_trust_sbom import INVENTORY
from trust_kit import registry, write_key

from builder.cli.main import main
from builder.core.env import SIGN_KEY
from builder.core.errors import PushError
from builder.core.kinds import Flavor
from builder.engine import RegistryAuth, RunResult
from builder.image.inventory import INVENTORY_MARK
from builder.oci.refs import ImageRef, parse_ref, parse_repo
from builder.pipeline.pipeline import BuildSettings, Outcome, build
from builder.pipeline.plan import Plan
from builder.pipeline.registry import Registry
from builder.trust.attest import TrustSettings
from builder.trust.keys import public_key, signing_key
from builder.trust.verify import verify_image

NAME = "team/torch"


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


@pytest.fixture
def wheels_plan() -> Plan:
    return plan(IDENT)


def _engine(p: Plan, memory: MemoryRegistry, fake_registry: FakeRegistry) -> FakeEngine:
    """The fake engine, whose pushes also land in the in-memory registry the attestations are written to."""
    engine = FakeEngine(contents_of(p), registry=fake_registry)
    engine.scripted["python"] = RunResult(0, INVENTORY_MARK + json.dumps(INVENTORY) + "\n")
    pushed = engine.push

    def push(ref: str, auth: RegistryAuth | None, on_line: object) -> str:
        digest = pushed(ref, auth, lambda line: None)
        memory.add_image(NAME, ref.rsplit(":", 1)[1], labels=fake_registry.refs[ref])
        return digest

    setattr(engine, "push", push)  # noqa: B010 (an instance's method replaced: the dataclass has no hook)
    return engine


def _run(engine: FakeEngine, p: Plan, tmp_path: Path, trust: TrustSettings) -> tuple[list[Outcome], list[str]]:
    log: list[str] = []
    settings = BuildSettings(repo=REPO, flavors=(Flavor.RUNTIME,), out_dir=tmp_path / "ctx", push=True, trust=trust,
                             force=True)  # fmt: skip
    assert engine.registry is not None
    return build(engine, p, settings, log.append, engine.registry), log


def _setup(tmp_path: Path) -> tuple[MemoryRegistry, FakeRegistry, TrustSettings]:
    memory, client = registry()
    fake_registry = FakeRegistry()
    fake_registry.client = client

    def retag(source: str, target: str) -> tuple[str, bool]:  # aliases move in the in-memory registry, as for real
        return Registry.retag(fake_registry, source, target)

    setattr(fake_registry, "retag", retag)  # noqa: B010 (an instance's method replaced)
    return memory, fake_registry, TrustSettings(key=signing_key(write_key(tmp_path), {}))


def test_the_image_is_attested_and_signed_between_its_immutable_tag_and_its_aliases(
    tmp_path: Path, wheels_plan: Plan
) -> None:
    memory, fake_registry, trust = _setup(tmp_path)
    engine = _engine(wheels_plan, memory, fake_registry)
    [outcome], log = _run(engine, wheels_plan, tmp_path, trust)
    assert engine.ops() == ["info", "build", "inspect", "run", "inspect", "inspect", "tag", "tag", "push", "run"]
    inventory = engine.of("run")[1].args
    assert inventory[1:3] == ("python", "-c")  # the inventory, after the immutable push
    assert inventory[-1] == "--no-torch"  # the stack comes from this run's smoke suite: torch is not imported again
    assert engine.pushed() == [IMMUTABLE] and outcome.pushed == [IMMUTABLE, ALIAS]  # the alias: registry-side
    assert outcome.attested is not None and outcome.attested.written == [
        "sbom",
        "provenance",
        "signature",
        "attestation",
    ]
    assert any(line.startswith(f"[runtime] attested {outcome.attested.digest}: sbom ") for line in log)
    for ref in (_ref(), parse_ref(ALIAS)):  # the alias is the signed manifest itself: it verifies as well
        verdict = verify_image(fake_registry.client, ref, public_key(tmp_path / "key.pem.pub"))
        assert verdict.checks and not verdict.failed and not verdict.unchecked, ref


def _ref() -> ImageRef:
    return parse_ref(IMMUTABLE)


def test_a_refused_upload_holds_the_aliases_and_a_rerun_finishes_without_building(
    tmp_path: Path, wheels_plan: Plan
) -> None:
    memory, fake_registry, trust = _setup(tmp_path)
    engine = _engine(wheels_plan, memory, fake_registry)
    memory.refuse_puts = True  # the image's own push goes through the engine; the registry API refuses the rest
    with pytest.raises(PushError) as refused:
        _run(engine, wheels_plan, tmp_path, trust)
    assert refused.value.exit_code == 5 and "refused to write" in str(refused.value)
    assert engine.pushed() == [IMMUTABLE]  # no alias moved
    memory.refuse_puts = False
    first = len(engine.calls)
    [outcome], _ = _run(engine, wheels_plan, tmp_path, trust)
    ops = [c.op for c in engine.calls[first:]]
    assert "build" not in ops and "push" not in ops and outcome.pushed == [ALIAS]  # moved registry-side
    assert engine.of("run")[-1].args[-1] != "--no-torch"  # no smoke suite this run: torch answers itself
    assert outcome.status == "up-to-date" and outcome.attested is not None
    assert verify_image(fake_registry.client, _ref(), public_key(tmp_path / "key.pem.pub")).failed == []
    assert verify_image(fake_registry.client, parse_ref(ALIAS), public_key(tmp_path / "key.pem.pub")).failed == []


def test_a_second_run_writes_nothing_new(tmp_path: Path, wheels_plan: Plan) -> None:
    memory, fake_registry, trust = _setup(tmp_path)
    engine = _engine(wheels_plan, memory, fake_registry)
    _run(engine, wheels_plan, tmp_path, trust)
    [outcome], log = _run(engine, wheels_plan, tmp_path, trust)
    assert outcome.attested is not None and outcome.attested.written == []
    assert any("(attached before); wrote nothing new (already attached)" in line for line in log)
    assert not any("referrers" in line for line in log if " attested " in line)  # where they are: not asked


# --- the CLI: the key is checked before anything is built ---------------------------------------------------

BUILD = ["build", "--torch", "2.14.1", "--os", "debian12", "--python", "3.11", "--any-host", "--repo", REPO]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    out, err = capsys.readouterr()
    return int(caught.value.code or 0), out, err


@pytest.mark.parametrize("command", ["build", "publish"])
def test_a_key_others_may_read_stops_the_run_in_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = write_key(tmp_path, mode=0o644)
    argv = BUILD if command == "build" else ["publish", "--repo", REPO]
    code, out, err = _cli([*argv, "--push", "--sign-key", str(key)] if command == "build" else
                          [*argv, "--sign-key", str(key)], capsys)  # fmt: skip
    assert code == 2
    assert err == f"torchyard: error: --sign-key {key}: others may read or change it (mode 0644): chmod 600 {key}\n"
    assert key.read_text().splitlines()[1] not in out + err


def test_a_key_without_push_or_missing_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = write_key(tmp_path)
    code, _, err = _cli([*BUILD, "--sign-key", str(key)], capsys)
    assert (code, err) == (2, f"torchyard: error: --sign-key {key}: needs --push (attestations live in the registry)\n")
    code, _, err = _cli([*BUILD, "--push", "--sign-key", str(tmp_path / "none.pem")], capsys)
    assert (code, err) == (2, f"torchyard: error: --sign-key {tmp_path / 'none.pem'}: no such file\n")


def test_a_bad_key_in_the_environment_is_refused_without_showing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SIGN_KEY, "-----BEGIN PRIVATE KEY-----\nCANARYc2VjcmV0\n-----END PRIVATE KEY-----\n")
    code, out, err = _cli([*BUILD, "--push"], capsys)
    assert code == 2 and err == f"torchyard: error: ${SIGN_KEY}: not a PEM private key (or a wrong " \
        "$TORCHYARD_SIGN_KEY_PASSWORD)\n"  # fmt: skip
    assert "CANARY" not in out + err


def test_the_key_reaches_no_log_output_folder_or_attachment(tmp_path: Path, wheels_plan: Plan) -> None:
    memory, fake_registry, trust = _setup(tmp_path)
    engine = _engine(wheels_plan, memory, fake_registry)
    _, log = _run(engine, wheels_plan, tmp_path, trust)
    secret = (tmp_path / "key.pem").read_text().splitlines()[1]
    written = [p.read_text(errors="replace") for p in (tmp_path / "ctx").rglob("*") if p.is_file()]
    stored = [blob.decode(errors="replace") for blob in memory.blobs.values()]
    assert not [text for text in (*log, *written, *stored) if secret in text]
    assert all(secret not in " ".join(c.args) for c in engine.calls)  # nor any engine call (build args, runs)
    assert parse_repo(REPO).name == NAME and RUNTIME_TAG in IMMUTABLE
