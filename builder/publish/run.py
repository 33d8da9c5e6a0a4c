"""torchyard publish: every selected item rendered, built (shared stages once), smoke-tested and pushed
under its immutable tag; aliases move last, and only when every image behind them passed.

One failing item does not stop the others. The set is planned first (publish/plan.py: groups of items
sharing one build plan, and their aliases); groups run in parallel with --jobs, each with its own log
file and engine client, and return their own results.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from builder.core.errors import Interrupted, PushError, TorchyardError
from builder.core.kinds import AliasStatus, Status
from builder.core.process import reset_cancel, stop_all
from builder.core.redact import redact
from builder.engine import DockerEngine, Engine, RegistryAuth
from builder.pipeline.gate import SecurityGate
from builder.pipeline.multiplatform import IndexResult, publish_index
from builder.pipeline.pipeline import BuildSettings, build
from builder.pipeline.registry import Registry
from builder.publish.alias_budget import grown as _grown
from builder.publish.budget import DEFAULT_BUDGET
from builder.publish.build_tags import stamp, today
from builder.publish.plan import Group, IndexMember, IndexPlan, PublishPlan
from builder.publish.policy import GATE_STOPPED, gate_skipped
from builder.publish.refresh_plan import kept_by_refresh
from builder.publish.report import (
    NO_PUSH_INDEX,
    AliasResult,
    ItemResult,
    PublishInterrupted,
    Report,
)
from builder.publish.zstd_copies import ZstdResult, published_tags, write_zstd_copies
from builder.render.tags import ImageTags
from builder.trust.attest import TrustSettings, signing_key_of

Log = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class PublishSettings:
    repo: str
    out_root: Path
    jobs: int = 1
    gpus: str | None = None
    auth: RegistryAuth | None = None
    push: bool = True
    aliases: bool = True
    aliases_only: bool = False  # build nothing: move the aliases of images already published
    pip_conf: str | None = field(default=None, repr=False)
    provenance: tuple[tuple[str, str], ...] = ()  # source/revision/created labels (builder/core/provenance.py)
    trust: TrustSettings | None = field(default=None, repr=False)  # SBOM, provenance, signatures before aliases
    zstd: bool = False  # also a zstd copy of each pushed tag, <tag>-zstd (builder/publish/zstd_copies.py)
    security_gate: SecurityGate | None = None  # --security-gate (builder/pipeline/gate.py)
    epoch: int | None = None  # SOURCE_DATE_EPOCH: images pushed normalized (builder/oci/normalize.py)
    size_budget: float | None = DEFAULT_BUDGET  # percent an alias's image may grow by; None: --allow-growth
    build_tags: bool = True  # a never-rewritten <tag>-<YYYYMMDD> for each pushed image (builder/publish/build_tags.py)
    build_day: str | None = None  # the day build tags carry (None: today, UTC)


STOPPED = "interrupted before it finished"
NOT_STARTED = "interrupted before it started"

EngineFactory = Callable[[], Engine]
RegistryFactory = Callable[[RegistryAuth | None], Registry]  # one per thread: a requests.Session is not shared


def publish(
    pplan: PublishPlan,
    settings: PublishSettings,
    log: Log,
    engine_factory: EngineFactory = DockerEngine,
    registry_factory: RegistryFactory = Registry,
) -> Report:
    """Execute the plan: groups in parallel (each returns its own results: nothing is shared between
    threads), then the aliases whose carriers all passed."""
    start = time.monotonic()
    reset_cancel()
    if settings.push:  # a registry that refuses pushes fails the run now (exit 5), before any group builds
        registry_factory(settings.auth).check_push(settings.repo)
    results: dict[str, ItemResult] = {}
    if settings.aliases_only:
        results.update(_published(pplan, settings, registry_factory(settings.auth), log))
    else:

        def run_group(group: Group) -> list[ItemResult]:
            return _run_group(group, settings, engine_factory(), registry_factory(settings.auth), log)

        try:
            for done in _run_all(pplan.groups, run_group, settings.jobs, log):
                results.update({r.id: r for r in done})
        except _Stopped as stopped:
            for done in stopped.finished:
                results.update({r.id: r for r in done})
            raise PublishInterrupted(str(stopped), _interrupted_report(pplan, results, start)) from None
    if settings.security_gate is not None:  # skipped images too, from what was published (publish/policy.py)
        remote = (registry_factory(settings.auth), signing_key_of(settings.trust)) if settings.push else None
        try:
            gate_skipped(pplan, results, settings.security_gate, remote, engine_factory, log)
        except KeyboardInterrupt:
            raise PublishInterrupted(GATE_STOPPED, _interrupted_report(pplan, results, start)) from None
    ordered = [results[i.id] for i in pplan.items]
    ordered += [ItemResult(e.id, Status.EXCLUDED, reason=e.reason) for e in pplan.excluded]
    indexes: list[IndexResult] = []
    aliases: list[AliasResult] = []
    if settings.aliases:  # --no-aliases (CI fan-out): the last job joins the platforms and moves the aliases
        registry = registry_factory(settings.auth)
        indexes = _write_indexes(pplan, results, settings, registry, log)
        written = {i.tag for i in indexes if i.status is not AliasStatus.HELD}
        aliases = _move_aliases(pplan, results, settings, engine_factory(), registry, log, written)
    report = Report(ordered, aliases, 0.0, indexes)
    if settings.push and settings.build_tags and not settings.aliases_only:
        stamp(report, settings.repo, registry_factory(settings.auth), settings.build_day or today(), log)
    if settings.zstd and settings.push:
        report.zstd = _zstd_copies(pplan, report, settings, registry_factory(settings.auth), log)
    report.seconds = time.monotonic() - start
    return report


def _zstd_copies(
    pplan: PublishPlan, report: Report, settings: PublishSettings, registry: Registry, log: Log
) -> list[ZstdResult]:
    members = {i.id for i in pplan.items if i.entry.multi_platform}
    published = published_tags(
        [(i.ref, i.status, i.id in members) for i in report.items],
        [(i.tag, i.status) for i in report.indexes],
        [(a.alias, a.status, a.target) for a in report.aliases],
    )
    return write_zstd_copies(registry.client, settings.repo, published, log, signing_key_of(settings.trust))


class _Stopped(Exception):
    """_run_all was interrupted; `finished`: the results of the groups that ran (to their end or their stop)."""

    def __init__(self, message: str, finished: list[list[ItemResult]]) -> None:
        super().__init__(message)
        self.finished = finished


def _run_all(
    groups: tuple[Group, ...], run_group: Callable[[Group], list[ItemResult]], jobs: int, log: Log
) -> list[list[ItemResult]]:
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="publish")
    futures: list[Future[list[ItemResult]]] = [pool.submit(run_group, group) for group in groups]
    try:
        done = [future.result() for future in futures]
    except KeyboardInterrupt:
        for future in futures:
            future.cancel()
        stopped = stop_all()
        pool.shutdown(wait=True, cancel_futures=True)  # a running group returns its results once its build stops
        finished = [_ended(group, future) for group, future in zip(groups, futures, strict=True)]
        log(f"interrupted: stopped {stopped} running build(s); no alias was moved (the report lists what was pushed)")
        raise _Stopped(
            "interrupted: run the same publish again to finish (it skips what is published, and with --sign-key or "
            "--attest signs and attests an image pushed just before the stop)",
            finished,
        ) from None
    pool.shutdown(wait=True)
    return done


def _ended(group: Group, future: Future[list[ItemResult]]) -> list[ItemResult]:
    """A group's results after a stop: its own (built, pushed, or failed with the stop's reason) where it returned."""
    if future.cancelled() or not future.done():
        return [ItemResult(i.id, Status.FAILED, reason=NOT_STARTED) for i in group.items]
    if future.exception() is not None:
        return [ItemResult(i.id, Status.FAILED, reason=STOPPED) for i in group.items]
    return future.result()


def _interrupted_report(pplan: PublishPlan, results: dict[str, ItemResult], start: float) -> Report:
    """The report of a stopped run: each item's result as its group left it; every alias held."""
    items = [results.get(i.id) or ItemResult(i.id, Status.FAILED, reason=NOT_STARTED) for i in pplan.items]
    items += [ItemResult(e.id, Status.EXCLUDED, reason=e.reason) for e in pplan.excluded]
    aliases = [AliasResult(a.alias, AliasStatus.HELD, reason=STOPPED) for a in pplan.aliases]
    return Report(items, aliases, time.monotonic() - start)


def _run_group(
    group: Group, settings: PublishSettings, engine: Engine, registry: Registry, log: Log
) -> list[ItemResult]:
    out_dir = settings.out_root / group.folder
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def failed(reason: str) -> list[ItemResult]:
        return [ItemResult(i.id, Status.FAILED, reason=reason, seconds=time.monotonic() - started) for i in group.items]

    with (out_dir / "publish.log").open("w", buffering=1) as group_log:
        try:
            if group.plan is None:
                raise TorchyardError(group.problem)
            outcomes = build(
                engine,
                group.plan,
                _build_settings(group, settings, out_dir),
                lambda line: print(line, file=group_log),
                registry,
            )
        except Interrupted as exc:
            group_log.write(f"INTERRUPTED: {redact(str(exc))}\n")
            return failed(redact(str(exc)))
        except TorchyardError as exc:
            group_log.write(f"FAILED: {redact(str(exc))}\n")
            log(redact(f"FAIL  {group.name}: {exc}").splitlines()[0])
            return failed(redact(str(exc)))
    results = []
    for item, outcome in zip(group.items, outcomes, strict=True):
        status = Status.SKIPPED if outcome.status is Status.UP_TO_DATE else Status.BUILT
        counts = outcome.smoke.summary if outcome.smoke else {}
        results.append(
            ItemResult(
                item.id,
                status,
                outcome.ref,
                seconds=time.monotonic() - started,
                smoke=dict(counts),
                digest=outcome.digest,
                security=outcome.security,
                refresh=outcome.refresh.as_json() if outcome.refresh else {},
                build_seconds=outcome.seconds,
                pushed_bytes=outcome.pushed_bytes,
            )
        )
        log(f"{'SKIP' if status is Status.SKIPPED else 'OK  '}  {item.id}: {status} {outcome.ref}")
        for line in outcome.refresh.lines(item.id) if outcome.refresh else ():
            log(line)
    return results


def _write_indexes(
    pplan: PublishPlan, results: dict[str, ItemResult], settings: PublishSettings, registry: Registry, log: Log
) -> list[IndexResult]:
    """Each multi-platform image's index under its immutable tag, once every platform's image passed (its
    aliases move with the others, last). A member this run did not build (--only) must already be published."""
    found = []
    for index in pplan.indexes:
        if index.tags is None:
            found.append(IndexResult(index.id, AliasStatus.HELD, reason=index.problem))
            continue
        if not settings.push:
            log(f"LOCAL {index.tags.immutable}: no --push, no index (each platform is tagged <tag>-<arch> here)")
            found.append(IndexResult(index.tags.immutable, AliasStatus.HELD, reason=NO_PUSH_INDEX))
            continue
        members = {m.item.combo.platform: m.tag for m in index.members}
        problems = {m.item.combo.platform: _member_problem(m, results, registry, settings.repo) for m in index.members}
        failed = {p: why for p, why in problems.items() if why}
        immutable = ImageTags(index.tags.immutable, ())
        key = signing_key_of(settings.trust)
        found.append(
            publish_index(registry, settings.repo, immutable, members, index.content_hash, log, failed, key=key)
        )
    return found


def _member_problem(member: IndexMember, results: dict[str, ItemResult], registry: Registry, repo: str) -> str:
    """Why this platform's image cannot join its index ("" when it can): it failed in this run, or this run did
    not build it (--only, one platform per CI job) and the registry does not hold it with its content."""
    result = results.get(member.item.id)
    if result is not None:
        if result.status in (Status.BUILT, Status.SKIPPED):
            return ""
        return (result.reason.splitlines() or [str(result.status)])[0]  # a failure without a reason still holds
    if registry.holds(f"{repo}:{member.tag}", member.content_hash, member.item.combo.platform.value):
        return ""
    return f"{repo}:{member.tag} is not published with its current content (this run did not build it)"


def _build_settings(group: Group, settings: PublishSettings, out_dir: Path) -> BuildSettings:
    return BuildSettings(
        member=group.items[0].entry.multi_platform,  # one platform of a multi-platform image: <tag>-<arch>
        repo=settings.repo,
        flavors=tuple(i.flavor for i in group.items),
        out_dir=out_dir,
        push=settings.push,
        auth=settings.auth,
        gpus=settings.gpus,
        aliases=False,
        pip_conf=settings.pip_conf,
        force=True,  # publish made this group folder itself (its publish.log is already there)
        require_archs=group.require_archs,
        provenance=settings.provenance,
        trust=settings.trust,
        security_gate=settings.security_gate,
        epoch=settings.epoch,
        keep_unchanged=True,  # a refresh that changed no package leaves the published image (pipeline/refresh.py)
    )


def _published(pplan: PublishPlan, settings: PublishSettings, registry: Registry, log: Log) -> dict[str, ItemResult]:
    """For --aliases-only: which items the registry already holds with their current content."""
    found = {}
    for group in pplan.groups:
        for item in group.items:
            if group.plan is None:
                found[item.id] = ItemResult(item.id, Status.FAILED, reason=group.problem)
                continue
            ref = f"{settings.repo}:{group.immutable(item)}"
            if registry.holds(ref, group.plan.content_hash) or kept_by_refresh(registry, ref, group.plan, log):
                found[item.id] = ItemResult(item.id, Status.SKIPPED, ref, pushed_bytes=0)
            else:
                found[item.id] = ItemResult(item.id, Status.FAILED, ref, reason="not in the registry with this content")
                log(f"MISS  {ref}: not published with this content")
    return found


def _move_aliases(
    pplan: PublishPlan,
    results: dict[str, ItemResult],
    settings: PublishSettings,
    engine: Engine,
    registry: Registry,
    log: Log,
    indexes: set[str],
) -> list[AliasResult]:
    """An alias moves to its owner's image only when every item carrying it passed (built or skipped); an
    alias of a multi-platform image names its index, and moves only when that index was written."""
    moved = []
    for move in pplan.aliases:
        ref = f"{settings.repo}:{move.alias}"
        failed = [i.id for i in move.carriers if results[i.id].status not in (Status.BUILT, Status.SKIPPED)]
        if failed:
            reason = f"not every image behind it passed: {', '.join(failed)}"
            moved.append(AliasResult(move.alias, AliasStatus.HELD, reason=reason))
            log(f"HOLD  {ref}: {', '.join(failed)} failed")
            continue
        if move.index is not None:
            moved.append(_move_index_alias(move.index, move.alias, registry, settings, log, indexes))
            continue
        moved.append(_move(engine, registry, results[move.owner.id].ref, ref, settings, log))
    return moved


def _move_index_alias(
    index: IndexPlan, alias: str, registry: Registry, settings: PublishSettings, log: Log, written: set[str]
) -> AliasResult:
    """The alias names the same index as the immutable tag (written again under the alias: no pull, no push)."""
    assert index.tags is not None, "aliases come from planned indexes only"
    target = f"{settings.repo}:{index.tags.immutable}"
    if index.tags.immutable not in written:
        log(f"HOLD  {settings.repo}:{alias}: its index {target} was not written")
        return AliasResult(alias, AliasStatus.HELD, target, f"its index {index.tags.immutable} was held")
    members = {m.item.combo.platform: m.tag for m in index.members}
    done = publish_index(registry, settings.repo, ImageTags(alias, ()), members, index.content_hash, log)
    return AliasResult(alias, done.status, target, done.reason)


def _move(
    engine: Engine,
    registry: Registry,
    immutable: str,
    alias_ref: str,
    settings: PublishSettings,
    log: Log,
) -> AliasResult:
    alias = alias_ref.rsplit(":", 1)[1]
    try:
        if not settings.push:
            local = engine.inspect(immutable)
            if local is None:
                raise TorchyardError(f"{immutable} is not in the local engine")
            engine.tag(local.id, alias_ref)
            log(f"MOVE  {alias_ref} -> {immutable} (local only)")
            return AliasResult(alias, AliasStatus.MOVED, immutable, "locally (no push)")
        # one read of each tag: the digests compared, the sizes for the budget, the bytes the alias gets
        will = registry.read(immutable)
        if will is None:
            raise PushError(f"{immutable} is not in the registry: nothing to move {alias} to")
        was = registry.read(alias_ref)
        if was is not None and was.digest == will.digest:
            return AliasResult(alias, AliasStatus.UNCHANGED, immutable)
        held = _grown(was, will, alias_ref, immutable, settings.size_budget, log)
        if held is not None:
            return held
        # registry-side, by manifest: the alias gets the immutable tag's digest (signed, with its SBOM), and an
        # alias left on another digest, even one with the same content label, is repaired
        digest = registry.put(alias_ref, will)
    except TorchyardError as exc:
        log(redact(f"FAIL  alias {alias_ref}: {exc}"))
        return AliasResult(alias, AliasStatus.HELD, immutable, redact(str(exc)))
    log(f"MOVE  {alias_ref} -> {immutable} ({digest})")
    return AliasResult(alias, AliasStatus.MOVED, immutable)
