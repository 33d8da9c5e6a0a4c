"""Issue 21 item 1's guarantee, checked: can a venv layer installed in place (a RUN per layer, as
bench/inplace_variant.py builds them) be content-only on this Docker's BuildKit?

    .venv/bin/python bench/inplace_digests.py
    .venv/bin/python bench/inplace_digests.py --rewrite-timestamp

Two `--no-cache` builds of a Dockerfile whose two "venv" RUNs carry the mounts an in-place install needs (uv's
cache, uv's binary bound from its stage, the layer script from the context, the CA secret) and write files whose
times they set to 0, as the in-place experiment does. It prints each layer's diff id in both builds, and the
entries of the first build's layers that hold a time other than 0 outside the base: what BuildKit wrote around
the step. Exit 0 when the RUN layers are the same bytes twice, 1 when they differ.

`--rewrite-timestamp` (BuildKit 0.13+, buildx): the same two builds with `SOURCE_DATE_EPOCH=0` and the exporter's
`rewrite-timestamp=true`, written as OCI archives (the image exporter of Docker's own BuildKit refuses the option:
it "conflicts with unpack", the store's unpacking of the image); it prints each layer's blob digest in both.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

DOCKER = "/usr/bin/docker"
CA = "/etc/ssl/certs/ca-certificates.crt"
MOUNTS = (
    "RUN --mount=type=cache,id=torchyard-inplace-digests,target=/root/.cache/uv,sharing=locked \\\n"
    "    --mount=type=bind,from=uv,source=/opt/uv/bin/uv,target=/usr/local/bin/uv \\\n"
    "    --mount=type=bind,source=layer.sh,target=/tmp/layer.sh \\\n"
    "    --mount=type=secret,id=cacert \\\n"
)
DOCKERFILE = f"""FROM debian:bookworm-slim AS uv
RUN mkdir -p /opt/uv/bin && echo uv > /opt/uv/bin/uv && touch -d @0 /opt/uv/bin/uv

FROM debian:bookworm-slim AS venv
RUN mkdir -p /opt/venv && touch -h -d @0 /opt/venv
{MOUNTS}    echo torch > /opt/venv/torch && find /opt/venv -newermt @1 -exec touch -h -d @0 {{}} +
{MOUNTS}    echo cudnn > /opt/venv/cudnn && find /opt/venv -newermt @1 -exec touch -h -d @0 {{}} +
"""


def docker(*args: str) -> str:
    done = subprocess.run([DOCKER, *args], capture_output=True, text=True, check=False,
                          env={"DOCKER_BUILDKIT": "1", "PATH": "/usr/bin:/bin"})  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"docker {' '.join(args[:2])}: {done.stderr[-2000:]}")
    return done.stdout


def timed_entries(saved: Path, diff_ids: list[str]) -> dict[str, list[str]]:
    """Per layer above the base: the entries whose mtime is not 0."""
    found: dict[str, list[str]] = {}
    with tarfile.open(saved) as archive:
        manifest = json.loads(archive.extractfile("manifest.json").read())  # type: ignore[union-attr]
        for diff_id, name in zip(diff_ids[1:], manifest[0]["Layers"][1:], strict=True):
            with tarfile.open(fileobj=archive.extractfile(name)) as layer:
                found[diff_id] = [f"{m.name} {time.strftime('%H:%M:%S', time.gmtime(m.mtime))}"
                                  for m in layer.getmembers() if m.mtime != 0]  # fmt: skip
    return found


def oci_layers(context: Path, name: str) -> list[str]:
    """Build into an OCI archive with rewrite-timestamp; the layer blob digests of its one manifest."""
    archive = context / f"{name}.tar"
    docker("buildx", "build", "-q", "--no-cache", "--provenance=false", "--secret", f"id=cacert,src={CA}",
           "--build-arg", "SOURCE_DATE_EPOCH=0", "--output", f"type=oci,dest={archive},rewrite-timestamp=true",
           str(context))  # fmt: skip
    with tarfile.open(archive) as tar:
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
        digest = index["manifests"][0]["digest"].removeprefix("sha256:")
        manifest = json.loads(tar.extractfile(f"blobs/sha256/{digest}").read())  # type: ignore[union-attr]
    return [str(layer["digest"]) for layer in manifest["layers"]]


def rewritten() -> int:
    with tempfile.TemporaryDirectory(prefix="torchyard-inplace-") as folder:
        context = Path(folder)
        (context / "Dockerfile").write_text(DOCKERFILE)
        (context / "layer.sh").write_text("true\n")
        layers = []
        for name in ("a", "b"):
            layers.append(oci_layers(context, name))
            time.sleep(2)  # another clock
    for i, (a, b) in enumerate(zip(*layers, strict=True)):
        print(f"layer {i}: {a[:19]} {b[:19]} {'same' if a == b else 'DIFFERENT'}")
    return 0 if layers[0] == layers[1] else 1


def main() -> int:
    if sys.argv[1:] == ["--rewrite-timestamp"]:
        return rewritten()
    with tempfile.TemporaryDirectory(prefix="torchyard-inplace-") as folder:
        context = Path(folder)
        (context / "Dockerfile").write_text(DOCKERFILE)
        (context / "layer.sh").write_text("true\n")
        layers = []
        for name in ("a", "b"):
            docker("build", "-q", "--no-cache", "--secret", f"id=cacert,src={CA}", "-t", f"torchyard-inplace:{name}",
                   str(context))  # fmt: skip
            layers.append(json.loads(docker("image", "inspect", "-f", "{{json .RootFS.Layers}}",
                                            f"torchyard-inplace:{name}")))  # fmt: skip
            time.sleep(2)  # another clock
        docker("save", "-o", str(context / "a.tar"), "torchyard-inplace:a")
        timed = timed_entries(context / "a.tar", layers[0])
        docker("rmi", "torchyard-inplace:a", "torchyard-inplace:b")
    for i, (a, b) in enumerate(zip(*layers, strict=True)):
        print(f"layer {i}: {a[:19]} {b[:19]} {'same' if a == b else 'DIFFERENT'}")
        for entry in timed.get(a, []):
            print(f"    {entry}")
    return 0 if layers[0] == layers[1] else 1


if __name__ == "__main__":
    sys.exit(main())
