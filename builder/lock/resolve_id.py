"""`torchyard lock export ID`: the distribution set a build of the combination would install, resolved now from
the matrix's pins (torch, torchvision, torchaudio ==, the combination's index) by pip itself, for the image's
Python, platform and glibc (`pip install --dry-run --report`: metadata only, nothing downloaded in full, nothing
installed). pip's report names each file with its sha256; the lock is made from it.

Unpinned dependencies (filelock, sympy ...) resolve to what the index offers today: the lock of an image that
was built is `lock export IMAGE`, which reads what the image holds.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from builder.core.errors import UpstreamError, UsageError
from builder.core.kinds import Platform
from builder.core.process import run_command
from builder.lock.locate import PYPI
from builder.lock.model import Artifact, Left, Lock, Locked
from builder.matrix.model import Matrix
from builder.resolve.combos import Combination, enumerate_combinations
from builder.resolve.query import Query
from builder.resolve.report import index_url
from builder.upstream.wheels import cp, linux_platforms

MACHINE = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}


def find_combination(m: Matrix, ident: str) -> Combination | None:
    for platform in Platform:
        for c in enumerate_combinations(m, Query(platform=platform)):
            if c.id == ident:
                return c
    return None


def pip_argv(c: Combination, target: Path, report: Path, ca_bundle: str | None) -> list[str]:
    """pip, asked as the build asks it (the constraints of constraints.txt, the combination's index), for the
    image's interpreter and platform."""
    platforms = [flag for tag in linux_platforms(c.platform.value, c.os.glibc) for flag in ("--platform", tag)]
    cert = ["--cert", ca_bundle] if ca_bundle else []
    return [
        sys.executable, "-m", "pip", "install", "--isolated", "--disable-pip-version-check", "--quiet",
        "--dry-run", "--ignore-installed", "--target", str(target), "--report", str(report),
        "--only-binary=:all:", *platforms, "--python-version", c.python, "--implementation", "cp",
        "--abi", cp(c.python), "--index-url", index_url(c) or PYPI, *cert,
        f"torch=={c.torch.version}", f"torchvision=={c.torch.torchvision}", f"torchaudio=={c.torch.torchaudio}",
    ]  # fmt: skip


def resolve_combination(m: Matrix, ident: str, ca_bundle: str | None) -> Lock:
    """The lock of a combination ID; UsageError for an unknown ID, UpstreamError when pip could not resolve."""
    c = find_combination(m, ident)
    if c is None:
        raise UsageError(f"lock export: {ident!r} is neither a combination of the matrix nor an image in the engine")
    with tempfile.TemporaryDirectory(prefix="torchyard-lock-") as folder:
        report = Path(folder) / "report.json"
        done = run_command(pip_argv(c, Path(folder) / "nothing", report, ca_bundle))
        if done.returncode != 0 or not report.exists():
            raise UpstreamError(f"lock export {ident}: pip could not resolve the pins: {' '.join(done.tail[-3:])}")
        data = json.loads(report.read_text())
    return from_report(data, f"{ident} (resolved from matrix.toml's pins)", c.python, MACHINE[c.platform.value],
                       index_url(c) or PYPI)  # fmt: skip


def from_report(report: dict[str, Any], source: str, python: str, machine: str, index: str) -> Lock:
    """A pip installation report (https://pip.pypa.io/en/stable/reference/installation-report/) as a lock."""
    packages, left = [], []
    for item in report.get("install", []):
        meta, info = item["metadata"], item.get("download_info") or {}
        name, version = _canonical(str(meta["name"])), str(meta["version"])
        sha = ((info.get("archive_info") or {}).get("hashes") or {}).get("sha256")
        url = str(info.get("url") or "")
        if not sha or not url.startswith(("https://", "http://")):
            left.append(Left(name=name, version=version, why=f"pip named no file with a sha256 ({url or 'no URL'})"))
            continue
        artifact = Artifact(filename=url.rsplit("/", 1)[-1], url=url, size=None, sha256=str(sha), upload_time=None)
        packages.append(Locked(name=name, version=version, index=index, artifact=artifact))
    return Lock(
        source=source,
        python=python,
        machine=machine,
        packages=tuple(sorted(packages, key=lambda p: p.name)),
        left_out=tuple(left),
    )


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))
