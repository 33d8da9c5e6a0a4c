"""torchyard publish: every selected item rendered, built (shared stages once), smoke-tested and pushed
under its immutable tag; aliases move last, and only when every image behind them passed.

One failing item does not stop the others. The set is planned first (publish/plan.py: groups of items
sharing one build plan, and their aliases); groups run in parallel with --jobs, each with its own log
file and engine client, and return their own results.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.engine import DockerEngine, Engine, RegistryAuth
from builder.errors import Interrupted, TorchyardError
from builder.files import write_report_file
from builder.kinds import AliasStatus, Status
from builder.pipeline import BuildSettings, build
from builder.plan import Plan
from builder.process import reset_cancel, stop_all
from builder.publish.plan import Group, PublishPlan
from builder.redact import redact
from builder.registry import Registry

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
    provenance: tuple[tuple[str, str], ...] = ()  # source/revision/created labels (builder/provenance.py)


@dataclass
class ItemResult:
    id: str
    status: Status  # built | skipped | failed | excluded
    ref: str = ""
    reason: str = ""
    seconds: float = 0.0
    smoke: dict[str, int] = field(default_factory=dict)
    digest: str = ""


@dataclass
class AliasResult:
    alias: str
    status: AliasStatus
    target: str = ""
    reason: str = ""


@dataclass
class Report:
    items: list[ItemResult]
    aliases: list[AliasResult]
    seconds: float

    @property
    def failed(self) -> bool:
        return any(i.status == Status.FAILED for i in self.items)

    def as_json(self) -> dict[str, Any]:
        counts: dict[str, int] = defaultdict(int)
        for item in self.items:
            counts[item.status] += 1
        return {
            "schema": 1,
            "total": len(self.items),
            "summary": dict(counts) | {"seconds": round(self.seconds, 1)},
            "items": [vars(i) for i in self.items],
            "aliases": [vars(a) for a in self.aliases],
        }


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
    results: dict[str, ItemResult] = {}
    if settings.aliases_only:
        results.update(_published(pplan, settings, registry_factory(settings.auth), log))
    else:

        def run_group(group: Group) -> list[ItemResult]:
            return _run_group(group, settings, engine_factory(), registry_factory(settings.auth), log)

        for done in _run_all(pplan.groups, run_group, settings.jobs, log):
            results.update({r.id: r for r in done})
    ordered = [results[i.id] for i in pplan.items]
    ordered += [ItemResult(e.id, Status.EXCLUDED, reason=e.reason) for e in pplan.excluded]
    aliases = (
        _move_aliases(pplan, results, settings, engine_factory(), registry_factory(settings.auth), log)
        if settings.aliases
        else []
    )
    return Report(ordered, aliases, time.monotonic() - start)


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
        pool.shutdown(wait=True, cancel_futures=True)
        log(f"interrupted: stopped {stopped} running build(s); no unverified image was tagged or pushed")
        raise Interrupted("interrupted: run the same publish again to finish (finished images are skipped)") from None
    pool.shutdown(wait=True)
    return done


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
            ItemResult(item.id, status, outcome.ref, seconds=outcome.seconds, smoke=dict(counts), digest=outcome.digest)
        )
        log(f"{'SKIP' if status is Status.SKIPPED else 'OK  '}  {item.id}: {status} {outcome.ref}")
    return results


def _build_settings(group: Group, settings: PublishSettings, out_dir: Path) -> BuildSettings:
    return BuildSettings(
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
            if registry.holds(ref, group.plan.content_hash):
                found[item.id] = ItemResult(item.id, Status.SKIPPED, ref)
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
) -> list[AliasResult]:
    """An alias moves to its owner's image only when every item carrying it passed (built or skipped)."""
    moved = []
    for move in pplan.aliases:
        ref = f"{settings.repo}:{move.alias}"
        failed = [i.id for i in move.carriers if results[i.id].status not in (Status.BUILT, Status.SKIPPED)]
        if failed:
            reason = f"not every image behind it passed: {', '.join(failed)}"
            moved.append(AliasResult(move.alias, AliasStatus.HELD, reason=reason))
            log(f"HOLD  {ref}: {', '.join(failed)} failed")
            continue
        owner_plan = pplan.group_of(move.owner).plan
        assert owner_plan is not None, "aliases come from planned groups only"
        moved.append(_move(engine, registry, owner_plan, results[move.owner.id].ref, ref, settings, log))
    return moved


def _move(
    engine: Engine,
    registry: Registry,
    plan: Plan,
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
        if registry.holds(alias_ref, plan.content_hash):
            return AliasResult(alias, AliasStatus.UNCHANGED, immutable)
        image = engine.inspect(immutable) or engine.pull(immutable, settings.auth)
        engine.tag(image.id, alias_ref)
        engine.push(alias_ref, settings.auth, lambda line: None)
    except TorchyardError as exc:
        log(redact(f"FAIL  alias {alias_ref}: {exc}"))
        return AliasResult(alias, AliasStatus.HELD, immutable, redact(str(exc)))
    log(f"MOVE  {alias_ref} -> {immutable}")
    return AliasResult(alias, AliasStatus.MOVED, immutable)


def write_report(report: Report, path: Path) -> None:
    write_report_file(path, redact(json.dumps(report.as_json(), indent=2)) + "\n")
