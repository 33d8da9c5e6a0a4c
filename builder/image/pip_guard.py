"""The image's installed set as pip / uv constraints, and a pip that names them when they stop an install.

Runs in the build stage with the venv's own interpreter, after the install and before the layer split:

    python pip_guard.py constrain VENV DIR    DIR/image-constraints.txt: every distribution of VENV pinned
                                              (name==version), but the installers; this file as DIR/pip_guard.py;
                                              VENV's pip launchers run pip through it

The image sets PIP_CONSTRAINT and UV_CONSTRAINT to DIR/image-constraints.txt (templates/partials/macros.j2), so
`pip install X` or `uv pip install X` in the image cannot replace torch, an NVIDIA library or any other
distribution the smoke suite ran with. pip's own message names no file ("The user requested (constraint)
torch==2.14.1"), so the launchers add one line naming the file and how to lift it for one command.
`python -m pip` is still constrained, without the added line.

Standard library only, Python 3.8 and later: it runs with the Python of the image being built.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import sys
from typing import Any, Callable, TextIO

CONSTRAINTS = "image-constraints.txt"
# Installers stay free: a venv brings its own pip, and PIP_CONSTRAINT also reaches the build environments of
# source distributions, whose build requirements (setuptools>=X, wheel) must not be held to the venv's.
FREE = ("pip", "setuptools", "wheel")
LAUNCHERS = re.compile(r"^pip(3(\.\d+)?)?$")
HEADER = """\
# The distributions this image was built and smoke-tested with, pinned: PIP_CONSTRAINT and UV_CONSTRAINT
# name this file, so an install that would replace one of them fails. To replace one deliberately, lift
# the constraints for that one command: PIP_CONSTRAINT= pip install ...  (uv: UV_CONSTRAINT= uv pip install ...)
"""
LAUNCHER = """\
#!{python}
# torchyard: pip, naming the image's constraints when they stop an install (pip_guard.py)
import importlib.util, sys
spec = importlib.util.spec_from_file_location("pip_guard", {guard!r})
guard = importlib.util.module_from_spec(spec)
spec.loader.exec_module(guard)
sys.exit(guard.run())
"""
HINT = (
    "torchyard: this image pins its verified packages in {path} (PIP_CONSTRAINT); the install above "
    "conflicts with it. To replace a pinned package deliberately, lift it for one command: "
    "PIP_CONSTRAINT= pip install ... (docs/lock.md)"
)
_NAME = re.compile(r"[-_.]+")


def canonical(name: str) -> str:
    return _NAME.sub("-", name).lower()


def installed(site: str) -> list[str]:
    """`name==version` of every distribution in a site-packages folder, sorted by name."""
    pins: dict[str, str] = {}
    for entry in sorted(os.listdir(site)):
        if entry.endswith(".dist-info"):
            with open(os.path.join(site, entry, "METADATA"), encoding="utf-8", errors="replace") as handle:
                meta = email.parser.Parser().parsestr(handle.read(), headersonly=True)
            pins.setdefault(canonical(str(meta["Name"])), str(meta["Version"]))
    return [f"{name}=={version}" for name, version in sorted(pins.items()) if name not in FREE]


def constrain(venv: str, folder: str, site: str) -> str:
    """Write the constraints and this guard into `folder`, point the venv's pip launchers at the guard;
    the path of the constraints."""
    path = os.path.join(folder, CONSTRAINTS)
    os.makedirs(folder, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(HEADER + "".join(line + "\n" for line in installed(site)))
    guard = os.path.join(folder, "pip_guard.py")
    if os.path.abspath(__file__) != os.path.abspath(guard):
        shutil.copyfile(__file__, guard)
    python = os.path.join(venv, "bin", "python")
    bindir = os.path.join(venv, "bin")
    for name in sorted(os.listdir(bindir)):
        if LAUNCHERS.match(name) and not os.path.islink(os.path.join(bindir, name)):
            with open(os.path.join(bindir, name), "w", encoding="utf-8") as handle:
                handle.write(LAUNCHER.format(python=python, guard=guard))
    for written in (path, guard):  # content-only files: their layer depends on what they say (docs/reproducible.md)
        os.utime(written, (0, 0))
    return path


class Watch:
    """A stream that passes everything through and notes whether pip reported a constraint in a conflict."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.seen = False

    def write(self, text: str) -> int:
        self.seen = self.seen or "(constraint)" in text
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def run(pip_main: Callable[[], int] | None = None) -> int:
    """pip's main; one more line when it failed on a constraint and PIP_CONSTRAINT names one."""
    out, err = Watch(sys.stdout), Watch(sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        code = (pip_main or _pip_main())()
    finally:
        sys.stdout, sys.stderr = out.stream, err.stream
    path = os.environ.get("PIP_CONSTRAINT", "")
    if code and path and (out.seen or err.seen):
        print(HINT.format(path=path), file=sys.stderr)
    return code


def _pip_main() -> Callable[[], int]:
    from pip._internal.cli.main import main  # the venv's pip, imported only when the launcher runs

    return main


def site_of(venv: str) -> str:
    lib = os.path.join(venv, "lib")
    found = [os.path.join(lib, d, "site-packages") for d in sorted(os.listdir(lib)) if d.startswith("python")]
    if len(found) != 1:
        raise SystemExit(f"pip_guard: expected one {lib}/python*/site-packages, found {found}")
    return found[0]


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "constrain":
        print(f"pip_guard: constraints in {constrain(argv[1], argv[2], site_of(argv[1]))}")
        return 0
    print("usage: pip_guard.py constrain VENV DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
