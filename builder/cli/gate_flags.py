"""The security gate's flags, which build, publish and `matrix ci` share: --security-gate and --allowlist FILE.
The allowlist is read and checked before anything is built, so a bad one stops the run with one line (exit 2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from builder.core.errors import UsageError

if TYPE_CHECKING:  # the gate loads the HTTP stack: only where a command gates
    from builder.pipeline.gate import SecurityGate

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = (
    click.option(
        "--security-gate",
        is_flag=True,
        help="Fail an image with a pending update from its OS's security suite, before any tag "
        "(docs/security-gate.md).",
    ),
    click.option("--allowlist", metavar="FILE", help="The security gate's allowlist (AWS DLC's format, with expiry)."),
)


def gate_options(func: F) -> F:
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def check_gate_flags(security_gate: bool, allowlist: str | None) -> None:
    if allowlist is not None and not security_gate:
        raise UsageError("--allowlist is the security gate's: give --security-gate too")


def security_gate(enabled: bool, allowlist: str | None) -> SecurityGate | None:
    """The gate, its allowlist read (and refused, exit 2) before anything is built; None when not asked for."""
    if not enabled:
        return None
    from builder.cli.upstream_cmd import ca_bundle
    from builder.net.http import Http
    from builder.pipeline.allowlist import read_allowlist
    from builder.pipeline.gate import SecurityGate

    entries = read_allowlist(allowlist) if allowlist else ()
    return SecurityGate(Http(verify=ca_bundle(None)), entries)
