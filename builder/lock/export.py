"""`torchyard lock export IMAGE` (and ID): the image's distributions (read in it), each located on the indexes by its
exact wheel, written as pylock.toml and requirements.txt."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builder.core.files import check_writable, write_report_file
from builder.engine import Engine
from builder.lock.locate import PYPI, locate
from builder.lock.model import Left, Lock, Locked
from builder.lock.writers import pylock_toml, requirements_txt
from builder.net.http import Http
from builder.pipeline.image_set import ImageSet, read_image_set

PYTORCH_INDEX = "https://download.pytorch.org/whl"
FILES = ("pylock.toml", "requirements.txt")


@dataclass(frozen=True)
class Exported:
    lock: Lock
    written: tuple[Path, ...]
    indexes: tuple[str, ...]


def default_indexes(image: ImageSet) -> tuple[str, ...]:
    """PyTorch's index of the torch build the image holds (2.5.1+cu124: .../whl/cu124), then PyPI. The local
    part of the version says which index such a build comes from; a torch without one is PyPI's."""
    torch = next((d for d in image.dists if d.name == "torch"), None)
    local = torch.version.partition("+")[2] if torch else ""
    return ((f"{PYTORCH_INDEX}/{local}",) if local else ()) + (PYPI,)


def export_image(engine: Engine, http: Http, ref: str, out: Path, indexes: tuple[str, ...] = ()) -> Exported:
    targets = tuple(check_writable(out / name, "-o") for name in FILES)  # before any work
    image = read_image_set(engine, ref)
    searched = indexes or default_indexes(image)
    found = http.map(lambda dist: locate(http, dist, searched), list(image.dists))
    lock = Lock(
        source=f"{ref} ({image.image_id})",
        python=image.python,
        machine=image.machine,
        packages=tuple(x for x in found if isinstance(x, Locked)),
        left_out=tuple(x for x in found if isinstance(x, Left)),
    )
    return Exported(lock, _write(targets, lock), searched)


def export_lock(lock: Lock, out: Path, indexes: tuple[str, ...]) -> Exported:
    """An already made lock (`lock export ID`: builder/lock/resolve_id.py) written out."""
    targets = tuple(check_writable(out / name, "-o") for name in FILES)
    return Exported(lock, _write(targets, lock), indexes)


def _write(targets: tuple[Path, ...], lock: Lock) -> tuple[Path, ...]:
    for target, text in zip(targets, (pylock_toml(lock), requirements_txt(lock)), strict=True):
        write_report_file(target, text)
    return targets
