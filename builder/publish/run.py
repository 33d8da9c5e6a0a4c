"""torchyard publish: every selected item rendered, built (shared stages once), smoke-tested and pushed
under its immutable tag; aliases move last, and only when every image behind them passed.

One failing item does not stop the others. Items run in groups (one plan per combination + options);
groups run in parallel with --jobs, each with its own log file and engine client.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.engine import DockerEngine, Engine, RegistryAuth
from builder.errors import Interrupted, TorchyardError
from builder.matrix.model import Matrix
from builder.pipeline import BuildSettings, build
from builder.plan import Plan, make_plan
from builder.process import reset_cancel, stop_all
from builder.publish.items import Excluded, Item
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


@dataclass
class ItemResult:
    id: str
    status: str  # built | skipped | failed | excluded
    ref: str = ""
    reason: str = ""
    seconds: float = 0.0
    smoke: dict[str, int] = field(default_factory=dict)
    digest: str = ""


@dataclass
class AliasResult:
    alias: str
    status: str  # moved | unchanged | held
    target: str = ""
    reason: str = ""


@dataclass
class Report:
    items: list[ItemResult]
    aliases: list[AliasResult]
    seconds: float

    @property
    def failed(self) -> bool:
        return any(i.status == "failed" for i in self.items)

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
    m: Matrix,
    items: list[Item],
    excluded: list[Excluded],
    settings: PublishSettings,
    log: Log,
    engine_factory: EngineFactory = DockerEngine,
    registry_factory: RegistryFactory = Registry,
) -> Report:
    start = time.monotonic()
    reset_cancel()
    groups: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        groups[item.group].append(item)
    results: dict[str, ItemResult] = {}
    plans: dict[str, Plan] = {}
    lock = threading.Lock()

    def run_group(name: str, members: list[Item]) -> None:
        done = _run_group(
            m, name, members, settings, engine_factory(), registry_factory(settings.auth), plans, lock, log
        )
        with lock:
            results.update({r.id: r for r in done})

    if settings.aliases_only:
        results.update(_published(m, items, settings, registry_factory(settings.auth), plans, log))
    else:
        _run_all(groups, run_group, settings.jobs, log)
    ordered = [results[i.id] for i in items] + [ItemResult(e.id, "excluded", reason=e.reason) for e in excluded]
    aliases = (
        _move_aliases(items, plans, results, settings, engine_factory(), registry_factory(settings.auth), log)
        if settings.aliases
        else []
    )
    return Report(ordered, aliases, time.monotonic() - start)


def _run_all(groups: dict[str, list[Item]], run_group: Callable[[str, list[Item]], None], jobs: int, log: Log) -> None:
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="publish")
    futures: list[Future[None]] = [pool.submit(run_group, name, members) for name, members in groups.items()]
    try:
        for future in futures:
            future.result()
    except KeyboardInterrupt:
        for future in futures:
            future.cancel()
        stopped = stop_all()
        pool.shutdown(wait=True, cancel_futures=True)
        log(f"interrupted: stopped {stopped} running build(s); no unverified image was tagged or pushed")
        raise Interrupted("interrupted: run the same publish again to finish (finished images are skipped)") from None
    pool.shutdown(wait=True)


def _run_group(
    m: Matrix,
    name: str,
    members: list[Item],
    settings: PublishSettings,
    engine: Engine,
    registry: Registry,
    plans: dict[str, Plan],
    lock: threading.Lock,
    log: Log,
) -> list[ItemResult]:
    first = members[0]
    out_dir = settings.out_root / name.replace("/", "__")
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with (out_dir / "publish.log").open("w", buffering=1) as group_log:
        try:
            plan = make_plan(m, first.combo, first.options)
            with lock:
                plans[name] = plan
            outcomes = build(
                engine,
                plan,
                BuildSettings(
                    repo=settings.repo,
                    flavors=tuple(i.flavor for i in members),
                    out_dir=out_dir,
                    push=settings.push,
                    auth=settings.auth,
                    gpus=settings.gpus,
                    aliases=False,
                    pip_conf=settings.pip_conf,
                    force=True,  # publish made this group folder itself (its publish.log is already there)
                    require_archs=tuple(a.name for a in first.entry.require_archs),
                ),
                lambda line: print(line, file=group_log),
                registry,
            )
        except Interrupted as exc:
            group_log.write(f"INTERRUPTED: {redact(str(exc))}\n")
            return [
                ItemResult(i.id, "failed", reason=redact(str(exc)), seconds=time.monotonic() - started) for i in members
            ]
        except TorchyardError as exc:
            group_log.write(f"FAILED: {redact(str(exc))}\n")
            log(redact(f"FAIL  {name}: {exc}").splitlines()[0])
            return [
                ItemResult(i.id, "failed", reason=redact(str(exc)), seconds=time.monotonic() - started) for i in members
            ]
    results = []
    for item, outcome in zip(members, outcomes, strict=True):
        status = "skipped" if outcome.status == "up-to-date" else "built"
        counts = outcome.smoke.summary if outcome.smoke else {}
        results.append(
            ItemResult(item.id, status, outcome.ref, seconds=outcome.seconds, smoke=dict(counts), digest=outcome.digest)
        )
        log(f"{'SKIP' if status == 'skipped' else 'OK  '}  {item.id}: {status} {outcome.ref}")
    return results


def _published(
    m: Matrix, items: list[Item], settings: PublishSettings, registry: Registry, plans: dict[str, Plan], log: Log
) -> dict[str, ItemResult]:
    """For --aliases-only: which items the registry already holds with their current content."""
    found = {}
    for item in items:
        plan = plans.setdefault(item.group, make_plan(m, item.combo, item.options))
        ref = f"{settings.repo}:{plan.target(item.flavor).tags.immutable}"
        if registry.holds(ref, plan.content_hash):
            found[item.id] = ItemResult(item.id, "skipped", ref)
        else:
            found[item.id] = ItemResult(item.id, "failed", ref, reason="not in the registry with this content")
            log(f"MISS  {ref}: not published with this content")
    return found


def _move_aliases(
    items: list[Item],
    plans: dict[str, Plan],
    results: dict[str, ItemResult],
    settings: PublishSettings,
    engine: Engine,
    registry: Registry,
    log: Log,
) -> list[AliasResult]:
    """An alias moves to its owner's image only when every item carrying it passed (built or skipped)."""
    carriers: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        plan = plans.get(item.group)
        if plan is not None:
            for alias in plan.target(item.flavor).tags.aliases:
                carriers[alias].append(item)
    moved = []
    for alias, members in sorted(carriers.items()):
        ref = f"{settings.repo}:{alias}"
        failed = [i.id for i in members if results[i.id].status not in ("built", "skipped")]
        owner = max(members, key=lambda i: i.combo.torch.version)
        if failed or any(i.group not in plans for i in members):
            moved.append(AliasResult(alias, "held", reason=f"not every image behind it passed: {', '.join(failed)}"))
            log(f"HOLD  {ref}: {', '.join(failed)} failed")
            continue
        moved.append(_move(engine, registry, plans[owner.group], owner, results[owner.id].ref, ref, settings, log))
    return moved


def _move(
    engine: Engine,
    registry: Registry,
    plan: Plan,
    owner: Item,
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
            return AliasResult(alias, "moved", immutable, "locally (no push)")
        if registry.holds(alias_ref, plan.content_hash):
            return AliasResult(alias, "unchanged", immutable)
        image = engine.inspect(immutable) or engine.pull(immutable, settings.auth)
        engine.tag(image.id, alias_ref)
        engine.push(alias_ref, settings.auth, lambda line: None)
    except TorchyardError as exc:
        log(redact(f"FAIL  alias {alias_ref}: {exc}"))
        return AliasResult(alias, "held", immutable, redact(str(exc)))
    log(f"MOVE  {alias_ref} -> {immutable}")
    return AliasResult(alias, "moved", immutable)


def write_report(report: Report, path: Path) -> None:
    path.write_text(redact(json.dumps(report.as_json(), indent=2)) + "\n")
