"""The lock as text: PEP 751's pylock.toml and a requirements.txt for `pip install --require-hashes`.

Both list the same distributions with the same sha256; pure functions of the Lock, so the same set always
gives the same bytes (sorted by name, no time of export in them).
"""

from __future__ import annotations

import json
import re

from builder import __version__
from builder.lock.model import Artifact, Lock, Locked

LOCK_VERSION = "1.0"  # PEP 751
# PEP 700 upload times as the indexes write them; TOML takes RFC 3339 date-times bare. Anything else is left out
# rather than written as a string PEP 751 readers would refuse.
_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def toml_string(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's (\\uXXXX for controls, \\" and \\\\)."""
    return json.dumps(value, ensure_ascii=False)


def environment(lock: Lock) -> str:
    return (
        f'sys_platform == "linux" and platform_machine == "{lock.machine}" '
        f'and python_version == "{_minor(lock.python)}"'
    )


def _minor(python: str) -> str:
    return ".".join(python.split(".")[:2])


def pylock_toml(lock: Lock) -> str:
    lines = [
        f"# The exact distribution set of {lock.source}, written by torchyard {__version__} (torchyard lock export).",
        f"lock-version = {toml_string(LOCK_VERSION)}",
        f"environments = [{toml_string(environment(lock))}]",
        f"requires-python = {toml_string('==' + _minor(lock.python) + '.*')}",
        f"created-by = {toml_string('torchyard')}",
        "",
    ]
    for package in lock.packages:
        lines += _package(package)
    lines += ["[tool.torchyard]", f"source = {toml_string(lock.source)}", f"python = {toml_string(lock.python)}"]
    left = ", ".join(
        f"{{ name = {toml_string(x.name)}, version = {toml_string(x.version)}, why = {toml_string(x.why)} }}"
        for x in lock.left_out
    )
    lines += [f"left-out = [{left}]", ""]
    return "\n".join(lines)


def _package(package: Locked) -> list[str]:
    head = [
        "[[packages]]",
        f"name = {toml_string(package.name)}",
        f"version = {toml_string(package.version)}",
        f"index = {toml_string(package.index)}",
    ]
    if package.is_wheel:
        return [*head, f"wheels = [{_artifact(package.artifact, with_name=True)}]", ""]
    return [*head, f"sdist = {_artifact(package.artifact, with_name=True)}", ""]


def _artifact(artifact: Artifact, *, with_name: bool) -> str:
    fields = [f"name = {toml_string(artifact.filename)}"] if with_name else []
    if artifact.upload_time and _RFC3339.match(artifact.upload_time):
        fields.append(f"upload-time = {artifact.upload_time}")
    fields.append(f"url = {toml_string(artifact.url)}")
    if artifact.size is not None:
        fields.append(f"size = {artifact.size}")
    fields.append(f"hashes = {{ sha256 = {toml_string(artifact.sha256)} }}")
    return "{ " + ", ".join(fields) + " }"


def requirements_txt(lock: Lock) -> str:
    """Every package `name==version` with its file's sha256: pip installs it with --require-hashes (all or
    nothing: a hash that does not match, or a dependency the file lacks, stops the install)."""
    indexes = sorted({p.index for p in lock.packages})
    lines = [
        f"# The exact distribution set of {lock.source}, written by torchyard {__version__} (torchyard lock export).",
        f"# Python {_minor(lock.python)} on linux {lock.machine}: pip install --require-hashes -r requirements.txt",
    ]
    lines += [f"# left out: {x.name}=={x.version}: {x.why}" for x in lock.left_out]
    if indexes:
        lines.append(f"--index-url {indexes[0]}")
        lines += [f"--extra-index-url {index}" for index in indexes[1:]]
    for package in lock.packages:
        lines += [f"{package.name}=={package.version} \\", f"    --hash=sha256:{package.artifact.sha256}"]
    return "\n".join(lines) + "\n"
