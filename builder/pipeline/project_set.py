"""After the project image passed its checks: the Python set its requirements installed over the base, read from
both images (builder/image/inventory.py, without importing torch), handed to the plan's recorder, which writes it
into torchyard.lock (builder/project/python_set.py). Only when the lock holds no set yet: a build of a recorded
set installs exactly it.

The sha256 of each file is the installer's own record where the image has one; with the build's trust settings
also the index's (the SBOM's hasher, builder/lock/sbom_hashes.py), asked for the project's packages only. A set
that cannot be read leaves the lock as it was, said in one line: the image is built and checked all the same."""

from __future__ import annotations

from dataclasses import replace

from builder.core.errors import TorchyardError
from builder.engine import Engine
from builder.pipeline.pipeline import BuildSettings, Log
from builder.pipeline.project_plan import ProjectPlan
from builder.trust.inventory import Inventory, read_inventory

NO_TORCH: dict[str, str | None] = {}  # read_inventory's stack: torch is not imported (the set needs no torch)


def record_python_set(engine: Engine, plan: ProjectPlan, settings: BuildSettings, image_id: str, log: Log) -> None:
    """The plan's recorder, given the base's and the image's contents (the project's hashed where it can be)."""
    if plan.record_set is None:
        return
    try:
        base = read_inventory(engine, plan.base_ref(settings.repo), NO_TORCH)
        image = _hashed(plan, settings, over(base, read_inventory(engine, image_id, NO_TORCH)))
    except TorchyardError as exc:
        log(f"[project] python_set not recorded in torchyard.lock: {exc}")
        return
    log(f"[project] {plan.record_set(base, image)}")


def over(base: Inventory, image: Inventory) -> Inventory:
    """`image` with only the distributions `base` does not hold (by name and version)."""
    held = {(d.name, d.version) for d in base.distributions}
    return replace(image, distributions=tuple(d for d in image.distributions if (d.name, d.version) not in held))


def _hashed(plan: ProjectPlan, settings: BuildSettings, image: Inventory) -> Inventory:
    hasher = settings.trust.wheel_hashes if settings.trust is not None else None
    if hasher is None:
        return image
    first = (plan.base.spec.torch_index,) if plan.base.spec.torch_index else ()  # the base venv's torch index
    return hasher(image, first)
