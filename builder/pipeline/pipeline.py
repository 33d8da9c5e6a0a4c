"""build -> verify -> smoke -> tag -> push, for one combination's plan. The only caller of the engine
for builds; a tag is applied only to an image that passed every check, and pushed only after that."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from builder.core.errors import BuildError
from builder.core.kinds import Flavor, Status
from builder.core.process import check_cancelled
from builder.core.progress import BuildProgress, Mode
from builder.core.redact import redact
from builder.core.stage_times import StageTimes
from builder.engine import Engine, RegistryAuth, split_ref
from builder.oci.normalize import normalize_saved, push_normal_counted
from builder.oci.refs import parse_repo
from builder.pipeline.attest import attest_image
from builder.pipeline.context_dir import write_context
from builder.pipeline.gate import SecurityGate
from builder.pipeline.hygiene_allowlist import Accepted
from builder.pipeline.plan import CONTENT_LABEL, Plan, TargetPlan, build_request, tag_refs
from builder.pipeline.push_count import engine_push
from builder.pipeline.refresh import Refresh, after_build, before_build
from builder.pipeline.registry import Registry
from builder.pipeline.replaced import drop_replaced, tagged_before
from builder.pipeline.suite import SmokeOptions, SmokeReport, for_platform, run_smoke
from builder.pipeline.verify import check_extension_code, check_labels, check_tag
from builder.render.tags import member_tag
from builder.trust.attest import Attested, TrustSettings, signing_key_of

Log = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class BuildSettings:
    repo: str
    flavors: tuple[Flavor, ...]
    out_dir: Path
    push: bool = False
    auth: RegistryAuth | None = None
    gpus: str | None = None  # also run the GPU checks, on these GPUs
    verbose: bool = False
    pip_conf: str | None = field(default=None, repr=False)  # content of a generated pip.conf secret
    aliases: bool = True  # tag and push the floating aliases too (publish moves them itself, last)
    require_archs: tuple[str, ...] = ()  # GPUs the image must carry code for, checked inside it
    force: bool = False  # write into a non-empty output folder torchyard did not write
    provenance: tuple[tuple[str, str], ...] = ()  # source/revision/created labels (builder/core/provenance.py)
    progress: Mode = Mode.LINES  # live: a status line redrawn on a terminal (builder/core/progress.py)
    trust: TrustSettings | None = field(default=None, repr=False)  # with --push: SBOM, provenance, signatures
    member: bool = False  # one platform of a multi-platform image: tagged <immutable>-<arch> only (the index
    # under the platform-free tags and its aliases are written after every platform passed: multiplatform.py)
    security_gate: SecurityGate | None = None  # after the smoke suite, before any tag (builder/pipeline/gate.py)
    epoch: int | None = None  # SOURCE_DATE_EPOCH: push the image normalized (builder/oci/normalize.py)
    hygiene: tuple[Accepted, ...] = ()  # --hygiene-allowlist: the hygiene checks' accepted exceptions
    # publish: a refresh whose package set is the published image's pushes nothing (builder/pipeline/refresh.py);
    # off for `build --push`, whose candidate the exported workflow promotes only with the planned content hash
    keep_unchanged: bool = False
    cache: str | None = None  # --cache: a registry build cache repository (plan.py cache_tag: one tag per target)


@dataclass
class Outcome:
    flavor: Flavor
    ref: str
    status: Status = Status.PENDING  # built | up-to-date | failed
    image_id: str = ""
    digest: str = ""
    pushed: list[str] = field(default_factory=list)
    smoke: SmokeReport | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)  # seconds per Dockerfile stage, and the smoke suite
    started: datetime | None = None  # wall clock: the build's start, the smoke suite's end (the provenance's times)
    finished: datetime | None = None
    attested: Attested | None = None  # what builder/trust attached in the registry (with --push and trust)
    security: dict[str, Any] = field(default_factory=dict)  # the security gate's findings (GateResult.as_json)
    refresh: Refresh | None = None  # with a refresh token: the base's security suite, the package changes
    pushed_bytes: int | None = 0  # sent to the registry (blobs, manifests, attachments); None: not recorded (a push
    #                               whose stream does not say what it sent: builder/pipeline/push_count.py)

    @property
    def unchanged_by_refresh(self) -> bool:
        """A refresh built the same package set as the published image: that image stays, nothing is pushed."""
        return self.refresh is not None and self.refresh.unchanged


def build(
    engine: Engine, plan: Plan, settings: BuildSettings, log: Log, registry: Registry | None = None
) -> list[Outcome]:
    targets = [plan.target(flavor) for flavor in settings.flavors]
    write_context(plan, settings.out_dir, force=settings.force)
    native = engine.info().platform  # says exactly what is missing before the first build
    registry = registry or Registry(settings.auth)
    outcomes = [Outcome(t.flavor, _refs(settings, plan, t)[0]) for t in targets]
    todo = []
    for target, outcome in zip(targets, outcomes, strict=True):
        if _up_to_date(engine, registry, plan, target, settings, outcome, log):
            outcome.status = Status.UP_TO_DATE
        else:
            todo.append((target, outcome))
    if settings.push and todo:  # a registry that refuses pushes is found now, not after the builds and smoke suites
        registry.check_push(settings.repo)
    refreshes = before_build(engine, plan, [t.flavor for t, _ in todo], log)  # a base with no security suite: said now
    with secret_files(plan, settings, bool(todo)) as files:
        for target, outcome in todo:
            outcome.refresh = refreshes.get(target.flavor)
            _build_and_verify(engine, plan, target, settings, outcome, log, files, native, registry)
    check_cancelled("tagging")
    todo = [(t, o) for t, o in todo if not o.unchanged_by_refresh]  # the published image stays: no tag, no push
    for target, outcome in todo:  # every requested image passed: only now are tags applied
        previous = tagged_before(engine, _refs(settings, plan, target), outcome.image_id)
        for ref in _refs(settings, plan, target):
            engine.tag(outcome.image_id, ref)
        drop_replaced(engine, previous, log, f"[{target.flavor.value}] ")
        outcome.status = Status.BUILT
        log(f"[{target.flavor.value}] tagged {', '.join(_refs(settings, plan, target))}")
    if settings.push:
        for target, outcome in zip(targets, outcomes, strict=True):
            if outcome.unchanged_by_refresh:
                continue
            check_cancelled("pushing")
            _push(engine, registry, plan, target, settings, outcome, log)
    return outcomes


def _refs(settings: BuildSettings, plan: Plan, target: TargetPlan) -> tuple[str, ...]:
    """The immutable tag first, then the aliases (unless left to the caller)."""
    if settings.member:
        return (f"{settings.repo}:{member_tag(target.tags.immutable, plan.combination.platform)}",)
    refs = tag_refs(settings.repo, target)
    return refs if settings.aliases else refs[:1]


def _up_to_date(
    engine: Engine,
    registry: Registry,
    plan: Plan,
    target: TargetPlan,
    settings: BuildSettings,
    outcome: Outcome,
    log: Log,
) -> bool:
    """Same content hash already under the immutable tag: in the registry (with --push) or locally."""
    if settings.push:
        if registry.holds(outcome.ref, plan.content_hash):
            log(f"[{target.flavor.value}] {outcome.ref} is up to date in the registry: no build, no push")
            return True
        return False
    local = engine.inspect(outcome.ref)
    if local is not None and local.labels.get(CONTENT_LABEL) == plan.content_hash:
        outcome.image_id = local.id
        log(f"[{target.flavor.value}] {outcome.ref} is up to date locally: no build")
        return True
    return False


@contextmanager
def secret_files(plan: Plan, settings: BuildSettings, needed: bool) -> Iterator[dict[str, str]]:
    """Generated secrets (a pip.conf with index credentials) as 0600 files outside the build context,
    removed when the builds end, however they end."""
    generated = [s.id for s in plan.secrets if s.source == "generated"]
    if not generated or not needed:
        yield {}
        return
    if settings.pip_conf is None:
        raise BuildError(f"secret {', '.join(generated)}: no pip.conf content was given to the build")
    with tempfile.TemporaryDirectory(prefix="torchyard-secrets-") as tmp:
        path = Path(tmp) / "pip.conf"
        path.touch(mode=0o600)
        path.write_text(settings.pip_conf)
        yield dict.fromkeys(generated, str(path))


def _build_and_verify(
    engine: Engine,
    plan: Plan,
    target: TargetPlan,
    settings: BuildSettings,
    outcome: Outcome,
    log: Log,
    secret_files: dict[str, str],
    native: str,
    registry: Registry,
) -> None:
    name = target.flavor.value
    start = time.monotonic()
    outcome.started = datetime.now(UTC)
    log_path = settings.out_dir / f"build-{name}.log"
    progress = BuildProgress(name, log, settings.progress)
    times = StageTimes()
    # line-buffered: `tail -f` follows the build
    with log_path.open("w", buffering=1) as build_log, progress:

        def on_line(line: str) -> None:
            line = redact(line)
            build_log.write(line + "\n")
            times.feed(line)
            if settings.verbose:
                log(f"[{name}] {line}")
            else:
                progress.feed(line)  # step headers, and time and bytes inside a long step

        request = build_request(
            plan,
            target.flavor,
            settings.out_dir,
            settings.repo,
            secret_files,
            tags=False,
            provenance=settings.provenance,
            cache=settings.cache,
        )
        log(f"[{name}] building (log: {log_path})")
        try:
            outcome.image_id = engine.build(request, on_line)
        except BuildError as exc:  # the error line names the failing step and its cause; the log has the rest
            raise BuildError(f"{_emulation_hint(str(exc), request.platform, native)}. Log: {log_path}") from None
    outcome.seconds = time.monotonic() - start
    outcome.stages = times.stages()
    image = engine.inspect(outcome.image_id)
    if image is None:
        raise BuildError(f"[{name}] the engine lost the image it just built ({outcome.image_id})")
    check_labels(plan, target, image)
    if outcome.refresh is not None and _same_packages(engine, registry, settings, outcome, log):
        return  # no smoke suite for an image that is not pushed (the published one passed its own)
    smoke_start = time.monotonic()
    outcome.smoke = _smoke(engine, plan, target, settings, outcome, log, native)
    outcome.stages["smoke"] = round(time.monotonic() - smoke_start, 1)
    check_tag(plan, target, outcome.smoke.observed, str(outcome.smoke.data.get("machine") or ""))
    outcome.finished = datetime.now(UTC)
    if settings.security_gate is not None:  # raises BuildError naming what blocks the image: nothing is tagged
        gate = settings.security_gate.check(engine, outcome.image_id, plan.combination.platform.value)
        outcome.security = gate.as_json()
        log(f"[{name}] security gate: OS {gate.os}; Python {gate.python}")
    if target.flavor is Flavor.DEVEL and plan.archs and target.manifest.extensions:
        home = plan.spec.cuda_home or "/usr/local/cuda"
        outcome.notes.append(
            check_extension_code(engine, outcome.image_id, target.manifest.extensions, plan.archs, home)
        )
        log(f"[{name}] extension code: {outcome.notes[-1]}")


def _same_packages(engine: Engine, registry: Registry, settings: BuildSettings, outcome: Outcome, log: Log) -> bool:
    """A refreshed image against the one published under its tag (builder/pipeline/refresh.py): True when the
    package sets are the same (the outcome is then up to date, with the published digest)."""
    assert outcome.refresh is not None
    key = signing_key_of(settings.trust)
    where = registry if settings.push and settings.keep_unchanged else None
    after_build(engine, where, outcome.ref, outcome.image_id, outcome.refresh, key, log, outcome.flavor.value)
    if not outcome.refresh.unchanged:
        return False
    outcome.status, outcome.digest = Status.UP_TO_DATE, outcome.refresh.compared_with
    log(f"[{outcome.flavor.value}] {outcome.ref} unchanged by the refresh: {outcome.digest} kept, nothing pushed")
    return True


def _emulation_hint(message: str, platform: str | None, native: str) -> str:
    """A foreign platform's RUN steps fail with "exec format error" where no emulator is registered."""
    if platform is None or platform == native or "exec format error" not in message:
        return message
    return (
        f"{message} -- {platform} steps cannot run on this {native} engine: register QEMU's binfmt handlers "
        "(Debian/Ubuntu: apt-get install qemu-user-static binfmt-support; scripts/services start does it)"
    )


def _smoke(
    engine: Engine, plan: Plan, target: TargetPlan, settings: BuildSettings, outcome: Outcome, log: Log, native: str
) -> SmokeReport:
    name = target.flavor.value
    log(f"[{name}] smoke suite ({'GPU checks on ' + settings.gpus if settings.gpus else 'no-GPU checks'})")
    arch = plan.custom_archs[0].name if plan.custom_archs else None
    platform = plan.combination.platform.value
    options = for_platform(
        SmokeOptions(arch=arch, gpus=settings.gpus, require_gpu=bool(settings.gpus), accepted=settings.hygiene),
        platform,
        native,
    )
    if options.small:
        scale = f"timeouts x{options.timeout_scale:g}"
        log(f"[{name}] {platform} runs emulated on this {native} engine: smaller training check, {scale}")
    report = run_smoke(engine, outcome.image_id, options, in_image=True)
    (settings.out_dir / f"smoke-{name}.json").write_text(__import__("json").dumps(report.data, indent=2))
    if settings.gpus is None:
        skipped = [c["name"] for c in report.checks if c["name"].startswith("gpu.") and c["status"] == "skipped"]
        log(f"[{name}] GPU checks skipped (no --gpus): {len(skipped)}")
    if not report.ok:
        raise BuildError(f"[{name}] smoke suite failed, nothing tagged: {'; '.join(report.failures())}")
    for arch in settings.require_archs:
        only = replace(options, arch=arch, gpus=None, require_gpu=False, only=("arch.",))
        required = run_smoke(engine, outcome.image_id, only, in_image=True)
        if not required.ok:
            raise BuildError(f"[{name}] required architecture {arch}: {'; '.join(required.failures())}")
        log(f"[{name}] required architecture {arch}: code present")
    counts = report.summary
    log(f"[{name}] smoke: {counts.get('passed', 0)} passed, {counts.get('skipped', 0)} skipped")
    return report


def _push(
    engine: Engine,
    registry: Registry,
    plan: Plan,
    target: TargetPlan,
    settings: BuildSettings,
    outcome: Outcome,
    log: Log,
) -> None:
    """The immutable tag first, then its SBOM, provenance and signatures (with settings.trust), then the aliases;
    refs already holding this content are left alone, and so are attachments already there."""
    refs = _refs(settings, plan, target)
    _push_ref(engine, registry, plan, settings, outcome, refs[0], log)
    if settings.trust is not None:
        check_cancelled("attesting")
        times = (outcome.started, outcome.finished)
        observed = outcome.smoke.observed.to_dict() if outcome.smoke else None
        outcome.attested = attest_image(
            engine, registry, plan, target, refs[0], settings.trust, times, outcome.image_id, settings.auth, observed
        )
        outcome.pushed_bytes = _plus(outcome.pushed_bytes, outcome.attested.bytes)
        log(f"[{target.flavor.value}] {_attested(outcome.attested)}")
    for ref in refs[1:]:  # registry-side, by manifest: each alias is the signed image's digest, never a re-push
        check_cancelled("moving the aliases")
        digest, changed = registry.retag(refs[0], ref)
        if changed:
            outcome.pushed.append(ref)
            log(f"[{outcome.flavor.value}] moved {ref} to {refs[0]} ({digest})")


def _push_ref(
    engine: Engine, registry: Registry, plan: Plan, settings: BuildSettings, outcome: Outcome, ref: str, log: Log
) -> None:
    """One ref: the engine's push, or with SOURCE_DATE_EPOCH the normalized image through torchyard's client."""
    if registry.holds(ref, plan.content_hash):
        return
    if not outcome.image_id:  # up to date remotely under the immutable tag, an alias is behind
        outcome.image_id = engine.pull(f"{outcome.ref}", settings.auth).id
        engine.tag(outcome.image_id, ref)
    if settings.epoch is None:
        digest, sent = engine_push(engine, registry, ref, settings.auth, lambda line: None)
    else:
        digest, sent = _push_normal(engine, registry, outcome.image_id, ref, settings.epoch)
    outcome.pushed_bytes = None if sent is None else _plus(outcome.pushed_bytes, sent)
    outcome.pushed.append(ref)
    outcome.digest = outcome.digest or digest
    log(f"[{outcome.flavor.value}] pushed {ref} ({digest})")


def _attested(done: Attested) -> str:
    where = "(attached before)"  # found, not written: how the registry lists them was not asked
    if done.fallback is not None:
        where = "under the sha256-<hex> tag (no referrers API)" if done.fallback else "as OCI referrers"
    wrote = ", ".join(done.written) or "nothing new (already attached)"
    cost = f"{done.bytes} bytes, {done.seconds:.1f} s of which {done.read_seconds:.1f} s reading the image"
    return f"attested {done.digest}: sbom {done.sbom}, provenance {done.provenance} {where}; wrote {wrote} ({cost})"


def _plus(count: int | None, more: int) -> int | None:
    return None if count is None else count + more


def _push_normal(engine: Engine, registry: Registry, image_id: str, ref: str, epoch: int) -> tuple[str, int]:
    """The image as the engine saved it, normalized to its content and the epoch, pushed by torchyard's own
    registry client (docs/reproducible.md); its digest and the bytes sent."""
    with tempfile.TemporaryDirectory(prefix="torchyard-normal-") as folder:
        saved = Path(folder) / "image.tar"
        engine.save(image_id, saved)
        image = normalize_saved(saved, Path(folder) / "oci", epoch)
        repo, tag = split_ref(ref)
        return push_normal_counted(registry.client, parse_repo(repo), tag, image)
