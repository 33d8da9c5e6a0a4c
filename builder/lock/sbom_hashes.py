"""The SBOM's wheel hashes from the build's own resolution: each distribution the image installed from an index,
located on the indexes the build installed from (the torch index its venv stage named, then PyPI) by exactly
the name, version and wheel tags its WHEEL file records, as `lock export` locates it (builder/lock/locate.py).

Read right after the build, before the image is attested: the file the installer took minutes before, with the
sha256 that index serves for it. An installer's own record (PEP 610's direct_url.json) wins: it is the hash the
installer checked. What no index has (a wheel built in the image from a local source, an index that cannot be
read) stays None: "not recorded" in the SBOM, counted in its summary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from builder.core.errors import UpstreamError
from builder.lock.locate import PYPI, locate
from builder.lock.model import Installed, Locked
from builder.net.http import Http, Policy
from builder.trust.inventory import Distribution, Inventory

TIMEOUT = 30.0
Hasher = Callable[[Inventory, tuple[str, ...]], Inventory]


def with_index_hashes(http: Http, inventory: Inventory, first: tuple[str, ...]) -> Inventory:
    """The inventory with a sha256 for every distribution an index of `first` (the build's torch index), then
    PyPI, serves the exact file of; the others as they were."""
    indexes = tuple(dict.fromkeys((*first, PYPI)))
    found = http.map(lambda d: _hashed(http, d, indexes), list(inventory.distributions))
    return replace(inventory, distributions=tuple(found))


def _hashed(http: Http, dist: Distribution, indexes: tuple[str, ...]) -> Distribution:
    if dist.sha256 or dist.local:
        return dist
    wanted = Installed(name=dist.name, version=dist.version, tags=dist.tags, installer=None, local=None)
    try:
        found = locate(http, wanted, indexes)
    except UpstreamError:  # an index unreachable or unreadable: this hash is not recorded, the build goes on
        return dist
    if not isinstance(found, Locked):
        return dist
    return replace(dist, sha256=found.artifact.sha256, sha256_from=found.index, sha256_file=found.artifact.filename)


def index_hasher(verify: str | bool) -> Hasher:
    """The hasher a build attests with: its own HTTP client (the CA bundle `verify`), fresh answers."""
    http = Http(Policy(timeout=TIMEOUT, retries=2, connect_retries=0), verify=verify)
    return lambda inventory, first: with_index_hashes(http, inventory, first)
