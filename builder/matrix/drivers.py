"""A driver as people type it, read against the driver branches matrix.toml records: the "CUDA Version" that
nvidia-smi prints in its header, given as the driver, is refused with the branch that reports it; a branch newer
than every recorded one is a driver whose facts (the CUDA it reports, the GPUs it supports) are not recorded."""

from __future__ import annotations

from builder.core.errors import UsageError
from builder.core.versions import Driver, cuda_form, parse_driver
from builder.matrix.model import Matrix

READ_DRIVER = "nvidia-smi --query-gpu=driver_version --format=csv,noheader"


def driver_flag(m: Matrix, text: str, what: str = "--driver") -> Driver:
    """A driver flag's value (535, 550.54.15); a CUDA version of a major the matrix records (12.2, 13.0.2, 12) is
    refused in one line that says so, names the branch that reports it and how to read the driver."""
    form = cuda_form(text)
    if form is not None and form[0] in cuda_majors(m):
        raise UsageError(_not_a_driver(m, text.strip(), what, *form))
    return parse_driver(text, what)


def cuda_majors(m: Matrix) -> frozenset[int]:
    """Every CUDA major the matrix records: its minor-version floors, toolkit releases and reported versions."""
    found = {c.major for c in m.cuda_majors} | {c.version.major for c in m.cuda}
    return frozenset(found | {b.reports_cuda[0] for b in m.driver_branches})


def reporting(m: Matrix, major: int, minor: int | None) -> list[int]:
    """The recorded driver branches that report CUDA major.minor (any minor of the major when minor is None)."""
    return sorted(
        b.branch for b in m.driver_branches if b.reports_cuda[0] == major and minor in (None, b.reports_cuda[1])
    )


def _not_a_driver(m: Matrix, text: str, what: str, major: int, minor: int | None) -> str:
    cuda = f"{major}.{minor}" if minor is not None else f"{major}.x"
    branches = reporting(m, major, minor)
    if len(branches) == 1:
        said = f"driver branch {branches[0]} reports CUDA {cuda}: give {what} {branches[0]}, or the exact driver:"
    elif branches:
        said = f"driver branches {branches[0]} to {branches[-1]} report CUDA {cuda}: give the driver:"
    else:
        said = f"no recorded driver branch reports CUDA {cuda}: give the driver:"
    return f'{what}: {text!r} is a CUDA version (nvidia-smi\'s "CUDA Version"), not a driver; {said} {READ_DRIVER}'


def newest_branch(m: Matrix) -> int | None:
    return max((b.branch for b in m.driver_branches), default=None)


def unrecorded_driver(m: Matrix, driver: Driver) -> str | None:
    """Why nothing about this driver can be checked: its branch is newer than every recorded one (None: it is not,
    or no branch is recorded at all). Worded once, for every rule that reads the driver."""
    newest = newest_branch(m)
    if newest is None or driver.branch <= newest:
        return None
    return (
        f"the driver branch {driver.branch} is newer than every recorded one (newest: {newest}); a newer driver "
        "runs older CUDA builds, but what this one reports and supports is not recorded"
    )
