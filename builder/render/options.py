"""The options of a render: what besides the combination shapes the image."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from builder.core.archs import Arch
from builder.core.kinds import Installer, Strategy
from builder.matrix.lock import BaseLock
from builder.render.network import Network
from builder.render.reqtypes import Requirements


@dataclass(frozen=True, kw_only=True)
class Extension:
    """A CUDA extension to build in the devel toolchain: a local directory or a pip requirement."""

    name: str
    kind: Literal["path", "pip"]
    spec: str  # the host directory (path) or the requirement (pip)


@dataclass(frozen=True, kw_only=True)
class RenderOptions:
    strategy: Strategy = Strategy.WHEELS
    installer: Installer = Installer.UV  # what installs the venv (--installer)
    archs: tuple[Arch, ...] = ()  # empty: the torch build's own SASS list
    extra_pip: tuple[str, ...] = ()  # --pip, as given (builder/render/additions.py reads each)
    requirements: Requirements | None = None  # --requirements FILE, read (builder/render/requirements.py)
    user: str | None = None
    labels: tuple[tuple[str, str], ...] = ()  # --label: part of the tags (tags.extras_id)
    family_labels: tuple[tuple[str, str], ...] = ()  # a [[publish]] entry's labels: in the image, not the tags
    torch_index_url: str | None = None
    extensions: tuple[Extension, ...] = ()
    network: Network = field(default_factory=Network)
    refresh: str = ""  # a token (e.g. 2026-W48): a new one re-runs the OS package steps
    base_lock: BaseLock | None = field(default=None, hash=False)  # --locked: FROM image@digest (matrix.lock)
    registry_mirror: str | None = None  # --registry-mirror: Docker Hub's base images from this registry[/path]
