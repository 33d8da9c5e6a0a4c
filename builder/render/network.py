"""Networks as companies have them: CA bundle, pip indexes, apt mirror; secrets stay secrets.

A CA bundle and pip index settings reach the build only as BuildKit secrets (`cacert`, `pipconf`),
never as a layer, ENV, build-arg or history entry. The apt mirror is a plain build arg and must not
carry credentials. The index options of a requirements file (`--index-url`, `--find-links` ...)
join these settings (`with_indexes`), so they too travel in the secret and never in the file the image keeps.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
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
    find_links: tuple[str, ...] = ()  # URLs of pages of links to files (a requirements file's --find-links)
    trusted_hosts: tuple[str, ...] = ()  # hosts pip may reach over plain http or without a valid certificate
    origins: tuple[str, ...] = ()  # where each setting came from, for --dry-run

    def secrets(self) -> tuple[Secret, ...]:
        found = []
        if self.ca_bundle is not None:
            found.append(Secret(id="cacert", source=str(self.ca_bundle), description="CA bundle for pip and apt"))
        if self.wants_pip_conf():
            urls = ", ".join(redact(u) for u in self.index_urls() + self.find_links)
            found.append(Secret(id="pipconf", source="generated", description=f"pip.conf with index {urls}"))
        return tuple(found)

    def wants_pip_conf(self) -> bool:
        """Whether the build needs the generated pip.conf secret (an index, links or trusted hosts to set)."""
        return bool(self.index_urls() or self.find_links or self.trusted_hosts)

    def index_urls(self) -> tuple[str, ...]:
        return ((self.pip_index_url,) if self.pip_index_url else ()) + self.pip_extra_index_urls

    def pip_conf(self) -> str:
        """The secret pip.conf (may hold credentials: write it 0600, outside the build context)."""
        lines = ["[global]"]
        if self.pip_index_url:
            lines.append(f"index-url = {self.pip_index_url}")
        if self.pip_extra_index_urls:
            lines.append("extra-index-url = " + " ".join(self.pip_extra_index_urls))
        if self.find_links:
            lines.append("find-links = " + " ".join(self.find_links))
        if self.trusted_hosts:
            lines.append("trusted-host = " + " ".join(self.trusted_hosts))
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


@dataclass(frozen=True, kw_only=True)
class Indexes:
    """The index options a requirements file names (each checked as a URL when it was read)."""

    where: str  # the file (and line) that set index_url, for messages: reqs.txt:2
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] = ()


def with_indexes(network: Network, found: Indexes, *, flag_index: str | None) -> Network:
    """The build's settings with a file's index options added. pip's rule: the file's --index-url replaces the
    default and the host's $PIP_INDEX_URL; one that differs from an --pip-index-url flag is refused (two answers
    to one question). Extra indexes, links and trusted hosts are added, each once."""
    index = network.pip_index_url
    origins = list(network.origins)
    if found.index_url and found.index_url != index:
        if flag_index:
            raise RenderError(
                f"--requirements {found.where}: --index-url {redact(found.index_url)!r} differs from --pip-index-url "
                f"{redact(flag_index)!r}; give one of them"
            )
        origins = [o for o in origins if not o.startswith("pip index from")]
        origins.append(f"pip index from --requirements {found.where}")
        index = found.index_url
    elif found.extra_index_urls or found.find_links:
        origins.append(f"pip extra index from --requirements {found.where}")
    return replace(
        network,
        pip_index_url=index,
        pip_extra_index_urls=_added(network.pip_extra_index_urls, found.extra_index_urls),
        find_links=_added(network.find_links, found.find_links),
        trusted_hosts=_added(network.trusted_hosts, found.trusted_hosts),
        origins=tuple(origins),
    )


def _added(have: tuple[str, ...], more: tuple[str, ...]) -> tuple[str, ...]:
    return have + tuple(dict.fromkeys(u for u in more if u not in have))
