"""A project's choice: the lock that still fits its torchyard.toml (its combination), or a new lock for the
combination the file resolved to; and the base image digests a lock makes the build use."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builder.core.errors import ProjectError
from builder.core.kinds import Strategy
from builder.lock.resolve_id import find_combination
from builder.matrix.lock import BaseLock, LockedImage, lock_path, read_lock
from builder.matrix.model import Matrix
from builder.project.check import check_project, contradiction
from builder.project.config import CHOICE_KEYS, ProjectConfig, load_project
from builder.project.find import lock_of
from builder.project.lockfile import (
    BaseDigest,
    ProjectLock,
    asked_of,
    changes,
    file_hashes,
    read_project_lock,
)
from builder.project.paths import own_file
from builder.project.read import shown
from builder.resolve.combos import Combination

RE_RESOLVE = "torchyard build --re-resolve"


@dataclass(frozen=True)
class Project:
    config: ProjectConfig
    exact: Combination | None  # the combination torch.id names (None: the file leaves a choice)
    lock_path: Path
    lock: ProjectLock | None  # a lock that fits the file (None: none yet, or --re-resolve)
    locked: Combination | None  # the lock's combination

    @property
    def decided(self) -> Combination | None:
        """The combination fixed before any machine is read: the lock's, else the file's exact id."""
        return self.locked or self.exact

    def describe(self) -> str:
        where = f"project {shown(self.config.file)}"
        if self.lock is not None and self.locked is not None:
            return f"{where}: {shown(self.lock_path)} decides: {self.locked.id} (resolved for {self.lock.resolved_for})"
        if self.exact is not None:
            return f"{where}: torch.id decides: {self.exact.id} (no {self.lock_path.name} yet)"
        return f"{where}: no {self.lock_path.name} yet: chosen from it"


def open_project(m: Matrix, file: Path, *, re_resolve: bool = False) -> Project:
    """Read and check torchyard.toml and, unless `re_resolve`, the lock beside it (refused when it no longer fits)."""
    config = load_project(file)
    exact = check_project(m, config)
    path = lock_of(file)
    own_file(path)  # refused before anything is read or chosen, --re-resolve or not
    lock = None if re_resolve else read_project_lock(path)
    locked = None if lock is None else fitting(m, config, lock, path)
    return Project(config, exact, path, lock, locked)


def fitting(m: Matrix, config: ProjectConfig, lock: ProjectLock, path: Path) -> Combination:
    """The lock's combination, when the lock still fits the file and the matrix; else one line with what changed."""
    name, toml = shown(path), shown(config.file)
    changed = changes(config, lock)
    if changed:
        raise ProjectError(f"{name} no longer fits {toml}: {'; '.join(changed)} ({RE_RESOLVE} resolves it again)")
    c = find_combination(m, lock.combination)
    if c is None:
        raise ProjectError(f"{name}: {lock.combination} is not a combination of this matrix any more ({RE_RESOLVE} "
                           "resolves the file again)")  # fmt: skip
    recorded = (lock.torch, lock.variant, lock.python, lock.os, lock.platform)
    if recorded != (c.local_version, c.variant.name, c.python, c.os.name, c.platform.value):
        raise ProjectError(f"{name}: its fields disagree with its combination {c.id} (edited by hand?): {RE_RESOLVE}")
    if config.torch.id is not None and config.torch.id != c.id:
        raise ProjectError(f"{name} no longer fits {toml}: torch.id is {config.torch.id}, locked {c.id} ({RE_RESOLVE})")
    for key in CHOICE_KEYS:
        found = contradiction(c, key, getattr(config.torch, key))
        if found is not None:
            raise ProjectError(f"{name} no longer fits {toml}: torch.{key} {found}, the locked {key} ({RE_RESOLVE})")
    return c


def lock_for(m: Matrix, config: ProjectConfig, c: Combination, resolved_for: str, strategy: Strategy) -> ProjectLock:
    return ProjectLock(
        combination=c.id,
        torch=c.local_version,
        variant=c.variant.name,
        python=c.python,
        os=c.os.name,
        platform=c.platform.value,
        archs=config.torch.archs,
        resolved_for=resolved_for,
        asked=asked_of(config),
        bases=base_digests(m, c, strategy),
        files=file_hashes(config),
    )


def base_digests(m: Matrix, c: Combination, strategy: Strategy) -> tuple[BaseDigest, ...]:
    """The base images the combination's render names, each with the digest matrix.lock pins it at for the
    combination's platform (None where matrix.lock has none, or there is no matrix.lock)."""
    from builder.render.context import bases

    found = bases(m, c, strategy)
    refs = (found.os_image, *([found.toolchain_image] if found.toolchain_image else []))
    matrix_lock = read_lock(lock_path(m.path))
    pins = dict(matrix_lock.pins(c.platform.value)) if matrix_lock else {}
    return tuple(BaseDigest(ref, pins[ref].partition("@")[2] if ref in pins else None) for ref in refs)


def pinned_bases(project: Project, m: Matrix, c: Combination, strategy: Strategy) -> BaseLock | None:
    """The lock's digests as the render's base lock (FROM image@digest), when it recorded any; a base image the
    build needs that the lock has no digest for is refused (the strategy changed since: --re-resolve)."""
    lock = project.lock
    recorded = {b.ref: b.digest for b in lock.bases if b.digest} if lock else {}
    if lock is None or not recorded:
        return None
    for base in base_digests(m, c, strategy):
        if base.ref not in recorded:
            raise ProjectError(f"{shown(project.lock_path)} records no digest for {base.ref}, which this build "
                               f"uses (another --strategy?): {RE_RESOLVE}")  # fmt: skip
    images = tuple(LockedImage(ref, digest, {c.platform.value: digest}) for ref, digest in recorded.items())
    return BaseLock(str(project.lock_path), "", images)
