"""A small torch family for the layer tests: wheels built here with the names, versions and Requires-Dist pins of
torch 2.13.0 / 2.14.0 / 2.14.1 cu130 (as their PyPI wheels declare them; matrix.toml records the same cuDNN,
NCCL and CUDA runtime pins), a few hundred KB each, served by a local index next to the real uv and pip wheels
from PyPI. The images built from them carry every layer a real image does, in seconds instead of minutes."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import random
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from index_server import Index
from kit import CI_DIR, docker, torchyard

from builder.core.kinds import Installer
from builder.render.network import Network

LINUX = '; platform_system == "Linux"'
CP311 = "cp311-cp311-manylinux_2_28_x86_64"
ANY = "py3-none-any"
PAYLOAD = 300_000  # incompressible bytes per wheel: layers of a measurable size
REAL_WHEELS = ("uv==0.13.9", "pip", "setuptools")  # the uv stage unpacks uv's wheel; the uv venv gets pip, setuptools


@dataclass(frozen=True)
class Fake:
    project: str
    version: str
    tag: str = ANY
    requires: tuple[str, ...] = ()
    extras: tuple[str, ...] = ()
    script: str | None = None  # a console script in bin/ (RECORD names it ../../../bin/...)


def _torch(version: str, cudnn: str, nccl: str, triton: str) -> Fake:
    return Fake(
        "torch",
        version,
        CP311,
        (
            f"cuda-toolkit[cublas,cudart]==13.0.3{LINUX}",
            f"nvidia-cudnn-cu13=={cudnn}{LINUX}",
            f"nvidia-cusparselt-cu13==0.8.1{LINUX}",
            f"nvidia-nccl-cu13=={nccl}{LINUX}",
            f"triton{triton}{LINUX}",
            "filelock",
            'optree>=0.13.0; extra == "optree"',
        ),
        ("optree",),
        "torchrun",
    )


FAMILY = (
    _torch("2.13.0", "9.20.0.48", "2.29.7", "==3.7.1"),
    _torch("2.14.0", "9.24.0.43", "2.30.7", "~=3.8.0"),
    _torch("2.14.1", "9.24.0.43", "2.30.7", "~=3.8.0"),
    Fake("torchvision", "0.28.0", CP311, ("torch==2.13.0", "filelock")),
    Fake("torchvision", "0.29.0", CP311, ("torch==2.14.0", "filelock")),
    Fake("torchvision", "0.29.1", CP311, ("torch>=2.14.0", "filelock")),
    Fake("torchaudio", "2.11.1", CP311, ("torch>=2.11",)),
    Fake(
        "cuda-toolkit",
        "13.0.3",
        ANY,
        (
            'nvidia-cublas==13.1.1.3.*; extra == "cublas"',
            'nvidia-nvjitlink<14,>=13.0.88; extra == "cublas"',
            'nvidia-cuda-runtime==13.0.96.*; extra == "cudart"',
        ),
        ("cublas", "cudart"),
    ),
    Fake("nvidia-cublas", "13.1.1.3", "py3-none-manylinux_2_27_x86_64"),
    Fake("nvidia-cuda-runtime", "13.0.96", "py3-none-manylinux_2_17_x86_64"),
    Fake("nvidia-nvjitlink", "13.0.88", "py3-none-manylinux_2_12_x86_64"),
    Fake("nvidia-cudnn-cu13", "9.20.0.48", "py3-none-manylinux_2_27_x86_64"),
    Fake("nvidia-cudnn-cu13", "9.24.0.43", "py3-none-manylinux_2_27_x86_64"),
    Fake("nvidia-nccl-cu13", "2.29.7", "py3-none-manylinux_2_18_x86_64"),
    Fake("nvidia-nccl-cu13", "2.30.7", "py3-none-manylinux_2_18_x86_64"),
    Fake("nvidia-cusparselt-cu13", "0.8.1", "py3-none-manylinux_2_17_x86_64"),
    Fake("triton", "3.7.1", CP311),
    Fake("triton", "3.8.0", CP311),
    Fake("filelock", "3.20.0"),
)


def wheel(fake: Fake) -> tuple[str, bytes]:
    """A wheel as installers expect it: modules with source (bytecode to compile), a payload, METADATA with
    Requires-Dist and Provides-Extra, entry points, RECORD with hashes."""
    module = fake.project.replace("-", "_")
    dist = f"{module}-{fake.version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {fake.project}\nVersion: {fake.version}\n"
    metadata += "".join(f"Provides-Extra: {e}\n" for e in fake.extras)
    metadata += "".join(f"Requires-Dist: {r}\n" for r in fake.requires)
    members = [
        (f"{module}/__init__.py", f"__version__ = '{fake.version}'\nKINDS = {{'a', 'b', 'c', 'd'}}\n".encode()),
        (f"{module}/lib/_payload.so", random.Random(f"{fake.project}-{fake.version}").randbytes(PAYLOAD)),
        (f"{dist}/METADATA", metadata.encode()),
        (
            f"{dist}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: torchyard-tests\nRoot-Is-Purelib: false\nTag: {fake.tag}\n".encode(),
        ),
    ]
    if fake.script:
        members.append((f"{module}/cli.py", b"def main():\n    return 0\n"))
        members.append((f"{dist}/entry_points.txt", f"[console_scripts]\n{fake.script} = {module}.cli:main\n".encode()))
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for path, data in members
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in [*members, (f"{dist}/RECORD", (record + f"{dist}/RECORD,,\n").encode())]:
            archive.writestr(path, data)
    return f"{module}-{fake.version}-{fake.tag}.whl", buffer.getvalue()


def real_wheels() -> list[Path]:
    """uv (pinned in builder/render/context.py) and pip from PyPI, downloaded once per machine."""
    folder = CI_DIR / "layer-test-wheels"
    folder.mkdir(parents=True, exist_ok=True)
    for requirement in REAL_WHEELS:
        name = requirement.split("==")[0]
        if not any(p.name.startswith(f"{name}-") for p in folder.glob("*.whl")):
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--platform",
                 "manylinux_2_17_x86_64", "--python-version", "3.11", "-d", str(folder), requirement],
                check=True, capture_output=True, timeout=300,
            )  # fmt: skip
    return sorted(folder.glob("*.whl"))


def family_index() -> Index:
    index = Index()
    for fake in FAMILY:
        filename, data = wheel(fake)
        index.add(fake.project, filename, data)
    for path in real_wheels():
        project = path.name.split("-")[0].replace("_", "-").lower()
        index.add(project, path.name, path.read_bytes())
    return index


@dataclass(frozen=True)
class Built:
    torch: str
    installer: Installer
    ref: str
    context: Path

    def layers(self) -> list[str]:
        """The diff ids of the image's layers, in order."""
        out = docker("image", "inspect", "-f", "{{json .RootFS.Layers}}", self.ref)
        assert out.returncode == 0, out.stderr
        return list(json.loads(out.stdout))

    def venv_layers(self) -> dict[str, str]:
        """Layer name (the io.torchyard.layers label, image order) -> diff id. The venv's layers are the COPYs
        of /layers/NN; counted from the newest history entry, every RUN, COPY and ADD made one layer."""
        label = docker("image", "inspect", "-f", '{{index .Config.Labels "io.torchyard.layers"}}', self.ref).stdout
        names = [token.split("=")[0] for token in label.split()]
        history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", self.ref).stdout.splitlines()
        newer = 0
        for created_by in history:  # newest first
            if created_by.startswith("COPY /layers/"):
                break
            newer += created_by.startswith(("RUN ", "COPY ", "ADD "))
        copies = [line for line in history if line.startswith("COPY /layers/")]
        assert len(copies) == len(names), (names, copies)
        diff_ids = self.layers()
        venv = diff_ids[len(diff_ids) - newer - len(names) : len(diff_ids) - newer]
        return dict(zip(names, venv, strict=True))

    def run(self, *command: str) -> str:
        done = docker("run", "--rm", "--network", "none", "--entrypoint", command[0], self.ref, *command[1:])
        assert done.returncode == 0, done.stderr
        return done.stdout


def build(index: Index, torch: str, installer: Installer, folder: Path, name: str, *extra: str) -> Built:
    """`torchyard render` of the Debian 12 cu130 combination with the family index as the pip index, then the
    runtime target built as `torchyard build` would, but on the host network (the index is on 127.0.0.1) and
    without the smoke suite (these torch wheels hold no torch)."""
    context = folder / f"{name}-ctx"
    url = f"{index.url}/simple"
    run = torchyard(
        "render", "--any-host", "--torch", torch, "--os", "debian12", "--python", "3.11", "--installer",
        installer.value, "--pip-index-url", url, "--no-host-settings", "-o", str(context),
    )  # fmt: skip
    assert run.code == 0, run.text
    pip_conf = folder / f"{name}-pip.conf"
    pip_conf.write_text(Network(pip_index_url=url).pip_conf())
    ref = f"torchyard-layers-test/{name}:{torch}"
    done = subprocess.run(
        ["/usr/bin/docker", "build", "--progress=plain", "--network", "host", "--target", "runtime",
         "--secret", f"id=pipconf,src={pip_conf}", "-t", ref, *extra, str(context)],
        env={**os.environ, "DOCKER_BUILDKIT": "1"}, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    (folder / f"{name}-build.log").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    return Built(torch, installer, ref, context)
