"""Error hierarchy: raised deep, caught once by the CLI, each class with its exit code."""

from __future__ import annotations


class TorchyardError(Exception):
    """Base class: a message a user can act on, and the process exit code that goes with it."""

    exit_code = 1


class NoMatchError(TorchyardError):
    """A query is well-formed but nothing in the matrix satisfies it."""

    exit_code = 1


class UsageError(TorchyardError):
    """A flag or argument value is malformed."""

    exit_code = 2


class MatrixError(TorchyardError):
    """matrix.toml (or another data file) is malformed or inconsistent."""

    exit_code = 2


class ProjectError(TorchyardError):
    """torchyard.toml or torchyard.lock is malformed, names a path outside its project, or no longer fits."""

    exit_code = 2


class RenderError(TorchyardError):
    """A combination or option cannot be turned into a Dockerfile."""

    exit_code = 2


class EngineError(TorchyardError):
    """The Docker engine is missing, unreachable or unsuitable."""

    exit_code = 3


class BuildError(TorchyardError):
    """An image build, its verification or its smoke suite failed."""

    exit_code = 4


class UpstreamError(TorchyardError):
    """An index or registry could not be reached, or kept failing after retries."""

    exit_code = 5


class PushError(TorchyardError):
    """The registry refused or could not be reached."""

    exit_code = 5


class Interrupted(TorchyardError):
    """The user interrupted a run (SIGINT); nothing unverified was tagged."""

    exit_code = 130


class TrustError(TorchyardError):
    """An image's signature, SBOM or provenance is missing, or does not match the image (verify-image)."""

    exit_code = 4


class CannotTellError(TorchyardError):
    """A check could not run for an input not given (verify-image without --key): neither yes nor no."""

    exit_code = 6


class NotReadyError(TorchyardError):
    """A container torchyard started in the background never became ready (run --notebook: the server's health
    check did not pass); the container was removed."""

    exit_code = 4


class LockChangedError(TorchyardError):
    """A lock no longer holds: a pinned file is gone from its index, or the index serves it (or a newer build of
    it) with another sha256 (lock check)."""

    exit_code = 4
