"""`torchyard matrix sync`, one call per kind of entry: read upstream, place the entries in the file's text, check
that the whole file still passes `matrix check`, and say what to print and what was done. Nothing is written here:
the command writes the text (with --write) only after the check passed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from builder.core.errors import UsageError
from builder.core.kinds import did_you_mean
from builder.matrix.model import Matrix
from builder.net.http import Http
from builder.upstream.sync_toml import check


@dataclass(frozen=True)
class Outcome:
    updated: str | None  # the file's text with the entries; None: nothing to add
    shown: str  # what sync prints without --write (the entries, with where they were read)
    done: str  # the line --write prints
    refused: str = ""  # what could not be read: the command exits 2 with it, after printing `shown`


def sync_torch(m: Matrix, http: Http, version: Version, pypi: str, pytorch_index: str) -> Outcome:
    from builder.upstream.sync import propose
    from builder.upstream.sync_toml import insert, render

    proposal = propose(m, http, version, pypi, pytorch_index)
    updated = _checked(m, insert(_text(m), proposal, set(m.sources)))
    done = f"torch {version} added; review the diff, then torchyard matrix verify --torch {version}"
    return Outcome(updated, render(proposal, set(m.sources)), done)


def sync_nvidia_wheel(m: Matrix, http: Http, package: str, pypi: str) -> Outcome:
    from builder.upstream.sync_wheels import REFUSED, SYNCED, propose_wheels
    from builder.upstream.sync_wheels_toml import wheel_edits

    if package in REFUSED:
        return _refused(m, http, package, pypi)
    if package not in SYNCED:
        raise UsageError(
            f"--nvidia-wheel {package}: sync reads {', '.join(SYNCED)} ({', '.join(REFUSED)}: by hand, its tags come "
            f"from its components){did_you_mean(package, SYNCED)}"
        )
    proposal = propose_wheels(m, http, package, pypi)
    if not proposal.added:
        return _nothing(package, proposal.page, proposal.newest)
    updated, shown = wheel_edits(_text(m), proposal, set(m.sources))
    added = ", ".join(map(str, proposal.added))
    return Outcome(_checked(m, updated), "\n".join(shown), f"{package} {added} added; review the diff")


def sync_onnxruntime(
    m: Matrix, http: Http, package: str, version: Version, pypi: str, wheel_dir: Path | None
) -> Outcome:
    from builder.upstream.sync_ort import propose_ort
    from builder.upstream.sync_ort_toml import insert_ort, kept_sources, ort_text, source_texts

    proposal = propose_ort(m, http, package, version, pypi, wheel_dir)
    updated = _checked(m, insert_ort(_text(m), proposal, set(m.sources)))
    kept = [
        f"# [sources.{sid}] is in the file already: kept as it is\n" for sid in kept_sources(proposal, set(m.sources))
    ]
    shown = "\n".join([*source_texts(proposal, set(m.sources)), *kept, ort_text(proposal)])
    return Outcome(updated, shown, f"{package} {version} added; review the diff, then torchyard matrix check")


def _refused(m: Matrix, http: Http, package: str, pypi: str) -> Outcome:
    from builder.upstream.sync_wheels import newer_versions

    newest, found = newer_versions(m, http, package, pypi)
    if not found:
        return _nothing(package, f"{pypi}/{package}/", newest)
    holder = next(w for w in m.nvidia_wheels if w.package == package and newest in w.versions)
    shown = "".join(f"# {package} {v}: newer than {newest}, platform tags not read\n" for v in found)
    refused = (
        f"--nvidia-wheel {package}: platform tags not read: read the components (via {holder.via or 'its extras'}): "
        "its wheel is py2.py3-none-any, its floor the highest of the component wheels the extras torch names pin "
        "(docs/matrix.md, [[nvidia_wheel]])"
    )
    return Outcome(None, shown, "", refused)


def _nothing(package: str, page: str, newest: Version) -> Outcome:
    said = f"# {package}: nothing on {page} newer than {newest}, the newest matrix.toml records\n"
    return Outcome(None, said, said.removeprefix("# ").rstrip())


def _text(m: Matrix) -> str:
    return Path(m.path).read_text()


def _checked(m: Matrix, updated: str) -> str:
    check(updated, Path(m.path).name)
    return updated
