"""Registry credentials from the command line: --registry-user, the password from the environment or
stdin. (The same variables build and publish read; one place for them is planned in cli/env.py.)"""

from __future__ import annotations

import os
import sys

from builder.engine import RegistryAuth
from builder.errors import UsageError

ENV_REGISTRY_USER = "TORCHYARD_REGISTRY_USER"
ENV_REGISTRY_PASSWORD = "TORCHYARD_REGISTRY_PASSWORD"


def registry_auth(user: str | None, from_stdin: bool) -> RegistryAuth | None:
    password = sys.stdin.readline().rstrip("\n") if from_stdin else os.environ.get(ENV_REGISTRY_PASSWORD)
    if user and not password:
        raise UsageError(
            f"--registry-user {user}: no password (set ${ENV_REGISTRY_PASSWORD} or use --registry-password-stdin)"
        )
    if password and not user:
        raise UsageError("a registry password without --registry-user")
    return RegistryAuth(user, password) if user and password else None
