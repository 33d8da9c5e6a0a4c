"""Every environment variable torchyard reads, declared once (the CLI binds flags to them; the library reads
the few it needs). docs/cli.md lists them."""

from __future__ import annotations

MATRIX = "TORCHYARD_MATRIX"  # a matrix.toml to use instead of the packaged one (--matrix)
PUBLISH_SET = "TORCHYARD_PUBLISH_SET"  # the publish set's file (--publish-set; default publish.toml beside the matrix)
DEBUG = "TORCHYARD_DEBUG"  # "1": tracebacks (--debug)
REGISTRY_USER = "TORCHYARD_REGISTRY_USER"  # --registry-user
REGISTRY_PASSWORD = "TORCHYARD_REGISTRY_PASSWORD"  # the registry password (never a flag: it would show in ps)
REFRESH = "TORCHYARD_REFRESH"  # --refresh: a token that re-runs the OS package steps
LOCKED = "TORCHYARD_LOCKED"  # "1": renders pin base images to matrix.lock's digests (--locked)
REPO = "TORCHYARD_REPO"  # doctor, lookup --here, run: the team's repository (the chosen image is looked up there)
ANY_HOST = "TORCHYARD_ANY_HOST"  # "1": build/render choose for any machine; devcontainer: GPUs left to its CLI
DOCKER = "TORCHYARD_DOCKER"  # a docker CLI to drive BuildKit builds with
PIPCONF = "TORCHYARD_PIPCONF"  # in printed `docker build` commands: the path of a private pip.conf secret
PROVENANCE = "TORCHYARD_PROVENANCE"  # "0": no source/revision/created labels at build time (builder/core/provenance.py)
REGISTRY_MIRROR = "TORCHYARD_REGISTRY_MIRROR"  # render/build: Docker Hub base images from this registry[/path]
SIGN_KEY = "TORCHYARD_SIGN_KEY"  # the team's signing key itself (PEM), when not in a file (--sign-key PATH)
SIGN_KEY_PASSWORD = "TORCHYARD_SIGN_KEY_PASSWORD"  # the password of an encrypted PEM signing key
TODAY = "TORCHYARD_TODAY"  # YYYY-MM-DD: the day lifecycles (driver branches, OS support) are judged on
SOURCE_DATE_EPOCH = (
    "SOURCE_DATE_EPOCH"  # reproducible builds: the created label, and pushes normalized (docs/reproducible.md)
)
