"""The lock, enforced in the image and exported from it (issue 19, item 6): on the layer tests' small torch
family image (wheels of a few hundred KB from a local index: the whole exported set is installed), and on the
e2e runtime image (the real CUDA 13 torch).

Installing the exported set in full writes some 6 GB (torch and the CUDA 13 libraries), so the test splits what it
proves: pip, asked to resolve the exported pins afresh from PyPI (`--dry-run --report`), chooses exactly the files
the lock names (same sha256) and nothing more; and the distributions under 3 MB are really installed from
requirements.txt with `--require-hashes` into a fresh folder, whose `pip freeze --path` is then the image's for those
distributions. Both run on the host for the image's Python and platform (pip's --python-version, --platform).
(The dry run still downloads the wheels, about 2 min here: PyPI's PEP 658 metadata files are not
served on this network, so pip reads each wheel for its dependencies.)

On the e2e image, `pip freeze` names the extension built in the image as `addone @ file:///tmp/wheels/...` (a direct
install): it is neither pinned (built after the pins) nor locked (on no index).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import E2E, HOST_CA
from index_server import Index, serving
from kit import docker, torchyard
from layer_kit import Built, build, family_index
from packaging.version import Version

from builder.core.kinds import Installer
from builder.upstream.wheels import linux_platforms

pytestmark = pytest.mark.docker

CONSTRAINTS = "/opt/torchyard/image-constraints.txt"
SMALL = 3_000_000  # bytes: the files the test really downloads and installs


def _in_image(ref: str, *command: str, env: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    flags = [item for pair in (("-e", e) for e in env) for item in pair]
    return docker("run", "--rm", "--network", "none", *flags, "--entrypoint", command[0], ref, *command[1:])


def _freeze(ref: str) -> set[str]:
    """`pip freeze --all`, names normalised as the lock writes them (typing_extensions -> typing-extensions)."""
    done = _in_image(ref, "pip", "freeze", "--all")
    assert done.returncode == 0, done.stderr
    return {_normal(line) for line in done.stdout.splitlines() if line.strip()}


def _normal(line: str) -> str:
    """name==version with the name canonical; a direct install (`addone @ file:///...`) keeps its URL."""
    if " @ " in line:
        name, _, url = line.strip().partition(" @ ")
        return f"{re.sub(r'[-_.]+', '-', name).lower()} @ {url}"
    name, _, version = line.strip().partition("==")
    return f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}"


def _name(line: str) -> str:
    return re.split(r"==| @ ", line, maxsplit=1)[0]


RUN = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Built, Index, Path]]:
    folder = tmp_path_factory.mktemp("lock-small")
    with serving(family_index()) as index:
        image = build(index, "2.14.1", Installer.UV, folder, f"lock-small-{RUN}")
        try:
            yield image, index, folder
        finally:
            docker("rmi", image.ref)


def test_in_a_small_image_a_conflicting_install_names_the_constraints(small: tuple[Built, Index, Path]) -> None:
    image, _, _ = small
    refused = _in_image(image.ref, "pip", "install", "--no-index", "torch==2.13.0")
    text = refused.stdout + refused.stderr
    assert refused.returncode == 1, text
    assert "The user requested (constraint) torch==2.14.1" in text
    assert f"pins its verified packages in {CONSTRAINTS} (PIP_CONSTRAINT)" in text


def test_lock_export_of_a_small_image_installs_its_exact_pip_freeze(
    small: tuple[Built, Index, Path], tmp_path: Path
) -> None:
    image, index, _ = small
    run = torchyard("lock", "export", image.ref, "-o", str(tmp_path / "lock"), "--index-url", f"{index.url}/simple")
    assert run.code == 0, run.text[-3000:]
    assert "left out" not in run.out
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "pip"), "--isolated", "--disable-pip-version-check"]
    done = subprocess.run(
        [*pip, "install", "--quiet", "--require-hashes", "-r", str(tmp_path / "lock" / "requirements.txt")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    fresh = subprocess.run([*pip, "freeze", "--all"], capture_output=True, text=True, check=True).stdout
    assert {_normal(line) for line in fresh.split()} == _freeze(image.ref)


def test_a_conflicting_pip_install_names_the_image_constraints(e2e: E2E) -> None:
    ref = e2e.ref("runtime")
    # --no-index: the conflict is found without asking an index (and the container has no network)
    refused = _in_image(ref, "pip", "install", "--no-index", "torch==2.5.1")
    text = refused.stdout + refused.stderr
    assert refused.returncode == 1, text
    assert "The user requested (constraint) torch==2.15.0" in text
    assert f"pins its verified packages in {CONSTRAINTS} (PIP_CONSTRAINT)" in text
    assert "PIP_CONSTRAINT= pip install" in text
    lifted = _in_image(ref, "pip", "install", "--no-index", "torch==2.5.1", env=("PIP_CONSTRAINT=",))
    assert lifted.returncode == 1 and "(constraint)" not in lifted.stdout + lifted.stderr  # no index, no torch
    env = _in_image(ref, "sh", "-c", 'echo "$PIP_CONSTRAINT $UV_CONSTRAINT"').stdout.split()
    assert env == [CONSTRAINTS, CONSTRAINTS]


def test_the_constraints_pin_everything_the_image_installed_but_the_installers(e2e: E2E) -> None:
    ref = e2e.ref("runtime")
    pinned = _in_image(ref, "cat", CONSTRAINTS).stdout
    lines = {line for line in pinned.splitlines() if line and not line.startswith("#")}
    installed = {line for line in _freeze(ref) if _name(line) not in ("pip", "setuptools", "wheel")}
    assert lines == {line for line in installed if _name(line) != "addone"}  # built after the pins
    assert {line for line in installed if _name(line) == "addone"} != set()  # (freeze: `addone @ file://...`)
    assert "torch==2.15.0" in lines and any(line.startswith("nvidia-cudnn-cu13==") for line in lines)


def test_lock_export_reproduces_the_image_pip_freeze(e2e: E2E, tmp_path: Path) -> None:
    ref = e2e.ref("runtime")
    out = tmp_path / "lock"
    run = torchyard("lock", "export", ref, "-o", str(out))
    assert run.code == 0, run.text[-3000:]
    lock = tomllib.loads((out / "pylock.toml").read_text())
    locked = {p["name"]: p for p in lock["packages"]}
    left = {x["name"] for x in lock["tool"]["torchyard"]["left-out"]}
    assert left == {"addone"}  # built in the image from examples/addone: on no index
    freeze = _freeze(ref)
    assert {f"{name}=={p['version']}" for name, p in locked.items()} == {
        line for line in freeze if _name(line) != "addone"
    }
    assert "torchaudio" in locked  # its PyPI wheel records a linux_x86_64 tag (docs/lock.md)
    pip = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check", "--cert", str(HOST_CA)]
    _pip_chooses_the_locked_files(pip, _as_the_image(ref), lock, locked, tmp_path)
    _small_ones_install_with_their_hashes(pip, _as_the_image(ref), tmp_path / "target", out, locked, freeze)


def _as_the_image(ref: str) -> list[str]:
    """pip's flags for the image's Python and platform: the image's Python (3.13) is not the host's (3.11), and
    pip resolves and installs for another Python only from wheels, into --target or as a dry run."""
    asked = _in_image(ref, "python", "-c", "import sys, os; print(sys.version_info[0], sys.version_info[1])")
    major, minor = asked.stdout.split()
    glibc = _in_image(ref, "python", "-c", "import platform; print(platform.libc_ver()[1])").stdout.strip()
    platforms = linux_platforms("linux/amd64", Version(glibc))
    return [
        "--only-binary=:all:", "--python-version", f"{major}.{minor}", "--implementation", "cp",
        "--abi", f"cp{major}{minor}", *[f for p in platforms for f in ("--platform", p)],
    ]  # fmt: skip


def _pip_chooses_the_locked_files(pip: list[str], image: list[str], lock: dict, locked: dict, tmp_path: Path) -> None:  # type: ignore[type-arg]
    report = tmp_path / "report.json"
    indexes = sorted({p["index"] for p in lock["packages"]})
    flags = ["--index-url", indexes[0], *[f for i in indexes[1:] for f in ("--extra-index-url", i)]]
    pins = [f"{name}=={p['version']}" for name, p in locked.items()]
    done = subprocess.run(
        [*pip, "install", *image, "--dry-run", "--ignore-installed", "-q", "--report", str(report), *flags, *pins],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    chosen = {
        _normal(f"{item['metadata']['name']}==").split("==")[0]: item["download_info"]["archive_info"]["hashes"][
            "sha256"
        ]
        for item in json.loads(report.read_text())["install"]
    }
    assert chosen == {name: p["wheels"][0]["hashes"]["sha256"] for name, p in locked.items()}


def _small_ones_install_with_their_hashes(
    pip: list[str],
    image: list[str],
    target: Path,
    out: Path,
    locked: dict,  # type: ignore[type-arg]
    freeze: set[str],
) -> None:
    small = {name for name, p in locked.items() if p["wheels"][0]["size"] < SMALL and name not in ("pip",)}
    assert len(small) >= 5, small
    text = (out / "requirements.txt").read_text()
    kept = [block for block in text.split("\n") if block.startswith("--")]  # the index lines
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.split("==")[0] in small:
            kept += [line, lines[i + 1]]
    subset = out / "small.txt"
    subset.write_text("\n".join(kept) + "\n")
    done = subprocess.run(
        [
            *pip,
            "install",
            *image,
            "--target",
            str(target),
            "--require-hashes",
            "--no-deps",
            "--quiet",
            "-r",
            str(subset),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    fresh = subprocess.run([*pip, "freeze", "--all", "--path", str(target)], capture_output=True, text=True, check=True)
    got = {_normal(line) for line in fresh.stdout.splitlines() if _name(_normal(line)) in small}
    assert got == {line for line in freeze if _name(line) in small}
