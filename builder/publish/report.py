"""What a publish did, item by item, alias by alias: the summary table and `--report`'s JSON (docs/schemas.md),
written on every exit, an interrupted one included (PublishInterrupted carries it)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.core.errors import Interrupted
from builder.core.files import write_report_file
from builder.core.kinds import AliasStatus, Status
from builder.core.progress import human_bytes
from builder.core.redact import redact
from builder.pipeline.multiplatform import IndexResult
from builder.publish.zstd_copies import ZstdResult


@dataclass
class ItemResult:
    id: str
    status: Status  # built | skipped | failed | excluded
    ref: str = ""
    reason: str = ""
    seconds: float = 0.0  # whole: its group's wall time, every step (its images share one build)
    smoke: dict[str, int] = field(default_factory=dict)
    digest: str = ""
    security: dict[str, Any] = field(default_factory=dict)  # the security gate's findings, when it ran
    build_tag: str = ""  # the never-rewritten tag this run gave the pushed image (builder/publish/build_tags.py)
    refresh: dict[str, Any] = field(default_factory=dict)  # --refresh: sources, package changes (pipeline/refresh.py)
    build_seconds: float = 0.0  # its docker build alone
    pushed_bytes: int | None = None  # what this run sent to the registry for it; None: not recorded


NOT_RECORDED = "not recorded"


def item_json(item: ItemResult) -> dict[str, Any]:
    """An item as the report writes it: what was not recorded says so."""
    return vars(item) | {"pushed_bytes": NOT_RECORDED if item.pushed_bytes is None else item.pushed_bytes}


def pushed_text(item: ItemResult) -> str:
    """The summary table's PUSHED column."""
    count = item.pushed_bytes
    if count is None:
        return NOT_RECORDED
    return human_bytes(count) if count >= 1_000_000 else f"{count} B"


NO_PUSH_INDEX = "--no-push: an index lives in a registry"


@dataclass
class AliasResult:
    alias: str
    status: AliasStatus
    target: str = ""
    reason: str = ""
    over_budget: bool = False  # held because its image grew past the size budget: the run fails


@dataclass
class Report:
    items: list[ItemResult]
    aliases: list[AliasResult]
    seconds: float
    indexes: list[IndexResult] = field(
        default_factory=list
    )  # multi-platform images (builder/pipeline/multiplatform.py)
    zstd: list[ZstdResult] = field(default_factory=list)  # --zstd: the zstd copies (builder/publish/zstd_copies.py)
    untagged: dict[str, str] = field(default_factory=dict)  # pushed refs without a build tag: why (fails the run)

    @property
    def failed(self) -> bool:
        # an index held because the run was asked not to push is what was asked for, not a failure
        held = any(i.status is AliasStatus.HELD and i.reason != NO_PUSH_INDEX for i in self.indexes)
        copies = any(z.status == "failed" for z in self.zstd)
        grown = any(a.over_budget for a in self.aliases)
        failed = any(i.status == Status.FAILED for i in self.items)
        return held or copies or grown or failed or bool(self.untagged)

    def as_json(self) -> dict[str, Any]:
        counts: dict[str, int] = defaultdict(int)
        for item in self.items:
            counts[item.status] += 1
        return {
            "schema": 1,
            "total": len(self.items),
            "summary": dict(counts) | {"seconds": round(self.seconds, 1)},
            "items": [item_json(i) for i in self.items],
            "aliases": [vars(a) for a in self.aliases],
            "indexes": [vars(i) for i in self.indexes],
            "zstd": [vars(z) for z in self.zstd],
            "untagged": dict(self.untagged),
        }


class PublishInterrupted(Interrupted):
    """Ctrl-C or SIGTERM during the builds: what had finished (built, pushed, failed) and what had not, so the
    report is written on this exit too; no alias was moved."""

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


def write_report(report: Report, path: Path) -> None:
    write_report_file(path, redact(json.dumps(report.as_json(), indent=2)) + "\n")
