"""--requirements and --pip as pip reads them, read once at the edge: a requirements file with its includes
(builder/render/reqfile.py) or a lock (builder/render/uvlock.py, pylock.py), a --pip value that names a local path
or a URL (builder/render/reqline.py). A file's index options join the build's index settings
(builder/render/network.py: with_indexes), a BuildKit secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from builder.core.errors import UsageError
from builder.render.network import Network, with_indexes
from builder.render.pylock import is_pylock, read_pylock
from builder.render.reqfile import read_requirements_file, read_requirements_files
from builder.render.reqline import Place, Sources, read_entry
from builder.render.reqtypes import Entry, Requirements
from builder.render.uvlock import read_uv_lock

_URL_OR_PATH = re.compile(r"://|^(git\+|\.|/)|\.(whl|tar\.gz|tgz|zip)$")


def read_requirements(path: str, env: Mapping[str, str]) -> Requirements:
    """--requirements FILE: the file and its includes, each requirement with its file:line; a lock by its name
    (uv.lock; pylock.toml, pylock.NAME.toml) as the hashed requirements set it pins."""
    name = Path(path).name
    if name == "uv.lock":
        return read_uv_lock(Path(path), path)
    if is_pylock(name):
        return read_pylock(Path(path), path)
    return read_requirements_file(Path(path), path, env)


def read_requirements_set(paths: Sequence[str], env: Mapping[str, str]) -> Requirements:
    """A project's requirements files (torchyard.toml's dependencies.requirements) as one `pip install -r A -r B`
    reads them (builder/render/reqfile.py: read_requirements_files); one path is read as --requirements reads it.
    A lock is installed alone (its own hashed set): beside other files it is refused."""
    if len(paths) == 1:
        return read_requirements(paths[0], env)
    for path in paths:
        name = Path(path).name
        if name == "uv.lock" or is_pylock(name):
            raise UsageError(f"{path}: a lockfile is installed alone, not beside other requirements files")
    return read_requirements_files(tuple((Path(p), p) for p in paths), env)


def with_file_indexes(network: Network, requirements: Requirements | None, flag_index: str | None) -> Network:
    """The build's index settings with the file's (`flag_index`: the --pip-index-url flag, which a different
    --index-url in the file contradicts)."""
    if requirements is None or requirements.indexes is None:
        return network
    return with_indexes(network, requirements.indexes, flag_index=flag_index)


def is_source(value: str) -> bool:
    """Whether a --pip value names a local path or a URL (`./proj`, `/abs/path`, `x-1.0.whl`, `git+https://...`,
    `name @ https://...`), written into the build's requirements file, rather than a requirement of an index
    (written into the RUN line, checked like every other flag)."""
    return bool(_URL_OR_PATH.search(value.split(";", 1)[0].strip()))


def pip_sources(values: tuple[str, ...], cwd: Path) -> tuple[Entry, ...]:
    """The --pip values that name a local path (anywhere: the user named it) or a URL, read as pip reads them."""
    place = Place("--pip", "--pip", cwd, None)
    sources = Sources(prefix="pip-")
    return tuple(read_entry(v, place, sources) for v in values if is_source(v))
