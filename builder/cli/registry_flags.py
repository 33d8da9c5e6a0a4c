"""The registry credentials flags build and publish share: a user by flag or environment, the password by
environment or stdin (never a flag: it would show in `ps`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from builder.core import env
from builder.core.errors import UsageError
from builder.engine import RegistryAuth

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = (
    click.option(
        "--registry-user",
        envvar=env.REGISTRY_USER,
        metavar="USER",
        help=f"Registry user (${env.REGISTRY_USER}); the password comes from ${env.REGISTRY_PASSWORD}"
        " or --registry-password-stdin.",
    ),
    click.option("--registry-password-stdin", is_flag=True, help="Read the registry password from stdin."),
)


def registry_options(func: F) -> F:
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def registry_auth(user: str | None, from_stdin: bool) -> RegistryAuth | None:
    """The credentials given, checked the same in a dry run as in a real one."""
    password = sys.stdin.readline().rstrip("\n") if from_stdin else os.environ.get(env.REGISTRY_PASSWORD)
    if user is not None and not user:
        raise UsageError("--registry-user: empty")
    if user and not password:
        raise UsageError(
            f"--registry-user {user}: no password (set ${env.REGISTRY_PASSWORD} or use --registry-password-stdin)"
        )
    if password and not user:
        raise UsageError("a registry password without --registry-user")
    return RegistryAuth(user, password) if user and password else None
