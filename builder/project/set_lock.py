"""The project's Python set between torchyard.lock and its image's plan: a lock that records the set pins the
install to it (a constraints file beside the base's, builder/project/python_set.py says why); a lock without one
gets a recorder the build calls after the image passed its checks (builder/pipeline/project_set.py).

The pins are a file of the build context, so they are in the project's content id: a build of the same set is the
same image on every machine, a set --re-resolve changed builds again, and what only describes the set (its
sha256s, the machine it was resolved for) changes nothing. The build that records a set was made without pins,
so the next build, pinned, is a new content id once; every machine that builds the lock builds that one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from builder.core.errors import ProjectError
from builder.pipeline.project_plan import SetRecorder
from builder.project.config import ProjectConfig
from builder.project.find import lock_of
from builder.project.lockfile import ProjectLock, changes, read_project_lock, write_project_lock
from builder.project.python_set import PINS_FILE, installed_over, pins_text
from builder.project.read import shown
from builder.render.additions import IMAGE_DIR, Additions
from builder.trust.inventory import Inventory


def locked_deps(config: ProjectConfig, deps: Additions) -> tuple[Additions, SetRecorder | None]:
    """`deps` pinned to the lock's set, or as they are with the recorder of a lock that has none. Neither where
    there is no lock, or one that cannot be read or no longer fits: the command refused it already, unless
    --re-resolve, and a dry run of that writes no new lock (a build would, holding no set)."""
    path = lock_of(config.file)
    try:
        lock = read_project_lock(path)
        if lock is None or changes(config, lock):
            return deps, None
    except ProjectError:
        return deps, None
    if isinstance(lock.python_set, str):
        return deps, _recorder(path, lock)
    return pinned(deps, pins_text(lock.python_set)), None


def pinned(deps: Additions, pins: str) -> Additions:
    """Each install under the pins too (`-c` before its own arguments); nothing to pin, or nothing installed: as
    it was (no file: the content id stays that of the unpinned layer)."""
    if not pins or not deps.installs:
        return deps
    arg = f" -c {IMAGE_DIR}/{PINS_FILE}"
    return replace(deps, files=(*deps.files, (PINS_FILE, pins)), installs=tuple(arg + a for a in deps.installs))


def _recorder(path: Path, planned: ProjectLock) -> SetRecorder:
    def record(base: Inventory, image: Inventory) -> str:
        """The set into the lock, when the lock is still the one the plan read (else it is left alone)."""
        name = shown(path)
        if read_project_lock(path) != planned:
            return f"python_set not recorded: {name} changed during the build"
        packages = installed_over(base.distributions, image.distributions)
        write_project_lock(path, replace(planned, python_set=packages))
        unhashed = sum(1 for p in packages if p.sha256.startswith("not recorded"))
        hashes = f"; {unhashed} sha256 not recorded" if unhashed else ""
        return f"recorded {len(packages)} package(s) over the base in {name}'s python_set{hashes}"

    return record
