"""Networks as companies have them: CA bundle, pip indexes, apt mirror; secrets stay secrets.

A CA bundle and pip index settings reach the build only as BuildKit secrets (`cacert`, `pipconf`),
never as a layer, ENV, build-arg or history entry. The apt mirror is a plain build arg and must not
carry credentials.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from builder.core.errors import RenderError
from builder.core.files import read_bytes
from builder.core.safety import check_apt_mirror, check_url, redact

CA_LIMIT = 16 << 20  # a system bundle is about 200 KB
# Host settings picked up by default, in order of precedence.
CA_ENV_VARS = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
INDEX_ENV_VAR = "PIP_INDEX_URL"
EXTRA_INDEX_ENV_VAR = "PIP_EXTRA_INDEX_URL"


@dataclass(frozen=True, kw_only=True)
class Secret:
    id: str
    source: str  # a path on the build host, or "generated" (written by torchyard at build time)
    description: str


@dataclass(frozen=True, kw_only=True)
class Network:
    ca_bundle: Path | None = None
    pip_index_url: str | None = None
    pip_extra_index_urls: tuple[str, ...] = ()
    apt_mirror: str | None = None
    origins: tuple[str, ...] = ()  # where each setting came from, for --dry-run

    def secrets(self) -> tuple[Secret, ...]:
        found = []
        if self.ca_bundle is not None:
            found.append(Secret(id="cacert", source=str(self.ca_bundle), description="CA bundle for pip and apt"))
        if self.pip_index_url or self.pip_extra_index_urls:
            urls = ", ".join(redact(u) for u in self.index_urls())
            found.append(Secret(id="pipconf", source="generated", description=f"pip.conf with index {urls}"))
        return tuple(found)

    def index_urls(self) -> tuple[str, ...]:
        return ((self.pip_index_url,) if self.pip_index_url else ()) + self.pip_extra_index_urls

    def pip_conf(self) -> str:
        """The secret pip.conf (may hold credentials: write it 0600, outside the build context)."""
        lines = ["[global]"]
        if self.pip_index_url:
            lines.append(f"index-url = {self.pip_index_url}")
        if self.pip_extra_index_urls:
            lines.append("extra-index-url = " + " ".join(self.pip_extra_index_urls))
        return "\n".join(lines) + "\n"

    def build_args(self) -> dict[str, str]:
        return {"APT_MIRROR": self.apt_mirror} if self.apt_mirror else {}


@dataclass(frozen=True, kw_only=True)
class NetworkFlags:
    ca_bundle: str | None = None
    pip_index_url: str | None = None
    pip_extra_index_urls: tuple[str, ...] = ()
    apt_mirror: str | None = None
    use_host_settings: bool = True


def resolve_network(flags: NetworkFlags, env: Mapping[str, str] | None = None) -> Network:
    """Flags first; then, unless turned off, the host's usual pip/SSL environment variables."""
    env = os.environ if env is None else env
    origins: list[str] = []
    ca = _pick(
        flags.ca_bundle, "--ca-bundle", env, CA_ENV_VARS if flags.use_host_settings else (), origins, "CA bundle"
    )
    index = _pick(
        flags.pip_index_url,
        "--pip-index-url",
        env,
        (INDEX_ENV_VAR,) if flags.use_host_settings else (),
        origins,
        "pip index",
    )
    if index:
        _check_index(index, "--pip-index-url" if flags.pip_index_url else f"${INDEX_ENV_VAR}")
    extra = flags.pip_extra_index_urls
    extra_from = "--pip-extra-index-url"
    if not extra and flags.use_host_settings and env.get(EXTRA_INDEX_ENV_VAR):
        extra = tuple(env[EXTRA_INDEX_ENV_VAR].split())
        extra_from = f"${EXTRA_INDEX_ENV_VAR}"
        origins.append(f"pip extra index from ${EXTRA_INDEX_ENV_VAR}")
    for url in extra:
        _check_index(url, extra_from)
    mirror = check_apt_mirror("--apt-mirror", flags.apt_mirror) if flags.apt_mirror else None
    return Network(
        ca_bundle=_ca_path(ca) if ca else None,
        pip_index_url=index,
        pip_extra_index_urls=extra,
        apt_mirror=mirror,
        origins=tuple(origins),
    )


def _check_index(url: str, where: str) -> None:
    # Named for where the value came from: a flag, or the host variable that was picked up.
    check_url(where, url, "https://user:token@pypi.example.com/simple")


def _pick(
    flag: str | None, flag_name: str, env: Mapping[str, str], names: tuple[str, ...], origins: list[str], what: str
) -> str | None:
    if flag:
        origins.append(f"{what} from {flag_name}")
        return flag
    for name in names:
        if env.get(name):
            origins.append(f"{what} from ${name}")
            return env[name]
    return None


def _ca_path(text: str) -> Path:
    """A CA bundle BuildKit will read as a secret: a readable regular file of PEM text (never a pipe or device)."""
    data = read_bytes(text, "CA bundle (--ca-bundle, or $PIP_CERT/$SSL_CERT_FILE)", limit=CA_LIMIT, error=RenderError)
    if data and b"-----BEGIN CERTIFICATE-----" not in data:
        raise RenderError(f"CA bundle {text!r} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    return Path(text).resolve()
