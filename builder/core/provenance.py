"""Where an image came from: the OCI labels `org.opencontainers.image.source`, `revision` and `created`.

They are given at build time (`docker build --label`), never written into the Dockerfile, so they change
neither the content hash nor the immutable tag: a rebuild from a later commit of the same content is still
"up to date", and a registry that holds the content is not pushed to again. In GitHub Actions they come from
GITHUB_SERVER_URL / GITHUB_REPOSITORY / GITHUB_SHA; elsewhere from the git checkout the matrix file lives in
(credentials in a remote URL are dropped). `created` honours SOURCE_DATE_EPOCH (reproducible builds).
A value that could not be read, or that a label may not carry, is left out rather than guessed;
TORCHYARD_PROVENANCE=0 leaves all three out.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from builder.core.env import PROVENANCE as PROVENANCE_ENV
from builder.core.env import SOURCE_DATE_EPOCH as SOURCE_DATE_EPOCH_ENV
from builder.core.errors import UsageError

SOURCE = "org.opencontainers.image.source"
REVISION = "org.opencontainers.image.revision"
CREATED = "org.opencontainers.image.created"
_VALUE = re.compile(r"^[A-Za-z0-9._\-/:@+=,]{1,512}$")  # the --label value rule (builder/core/safety.py)
_SCP_LIKE = re.compile(r"^(?:[A-Za-z0-9._-]+@)?([A-Za-z0-9.-]+):(?!//)(.+)$")  # git@github.com:org/repo.git
_COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def provenance_labels(checkout: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    if env.get(PROVENANCE_ENV) == "0":
        return {}
    found = {
        SOURCE: _source(checkout, env),
        REVISION: _revision(checkout, env),
        CREATED: _created(env),
    }
    return {key: value for key, value in found.items() if value and _VALUE.match(value)}


def _source(checkout: Path, env: Mapping[str, str]) -> str | None:
    if env.get("GITHUB_REPOSITORY"):
        return public_url(f"{env.get('GITHUB_SERVER_URL') or 'https://github.com'}/{env['GITHUB_REPOSITORY']}")
    remote = _git(checkout, "config", "--get", "remote.origin.url")
    return public_url(remote) if remote else None


def _revision(checkout: Path, env: Mapping[str, str]) -> str | None:
    sha = env.get("GITHUB_SHA") or _git(checkout, "rev-parse", "HEAD")
    return sha if sha and _COMMIT.match(sha) else None


def _created(env: Mapping[str, str]) -> str | None:
    epoch = env.get("SOURCE_DATE_EPOCH")
    if epoch is not None and not (epoch.isascii() and epoch.isdigit()):
        return None
    moment = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def source_date_epoch(env: Mapping[str, str] | None = None) -> int | None:
    """SOURCE_DATE_EPOCH as seconds; None when unset; UsageError (exit 2) when it is not a number of seconds."""
    value = (os.environ if env is None else env).get(SOURCE_DATE_EPOCH_ENV)
    if value is None or value == "":
        return None
    if not (value.isascii() and value.isdigit()):
        raise UsageError(f"SOURCE_DATE_EPOCH {value!r}: expected seconds since 1970 (git log -1 --format=%ct)")
    return int(value)


def public_url(remote: str) -> str | None:
    """A browsable https URL of a git remote, without user, password or token; None for local paths."""
    scp = _SCP_LIKE.match(remote)
    if scp and "/" not in scp[1]:
        remote = f"https://{scp[1]}/{scp[2]}"
    parts = urlsplit(remote)
    if parts.scheme not in ("https", "http", "ssh", "git") or not parts.hostname:
        return None
    host = parts.hostname + (f":{parts.port}" if parts.port and parts.scheme in ("https", "http") else "")
    path = parts.path.removesuffix("/").removesuffix(".git")
    return urlunsplit(("https" if parts.scheme != "http" else "http", host, path, "", ""))


def _git(checkout: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(checkout), *args], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
