"""builder/image/os_delta.sh in a real build (issue 21: the os layer the same bytes on every rebuild): a step on
debian:bookworm-slim between `begin` and `end` writes, changes and removes files, no network; the final stage
copies the tree onto the base, as templates/partials/os.j2 does. What the tree holds, what the copy keeps, and
that a --no-cache rebuild gives the same layer. The rendered images' os stage: test_reproducible.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from kit import ROOT, docker

pytestmark = pytest.mark.docker

RUN = uuid.uuid4().hex[:8]
DOCKERFILE = """FROM debian:bookworm-slim AS files
RUN --mount=type=bind,source=os_delta.sh,target=/tmp/os_delta.sh \\
    set -eu; \\
    echo before > /etc/torchyard-before; \\
    touch -d @4102444800 /etc/torchyard-before; \\
    sh /tmp/os_delta.sh begin; \\
    rm /etc/debian_version; \\
    mkdir -p /opt/new/deep; \\
    echo content > /opt/new/deep/file; \\
    touch -d @1000000000 /opt/new/deep/file; \\
    ln -s deep/file /opt/new/link; \\
    chmod 750 /opt/new; \\
    echo appended >> /etc/issue; \\
    echo scratch > /tmp/scratch; \\
    echo log > /var/log/torchyard.log; \\
    sh /tmp/os_delta.sh end /tmp/torchyard-os-tree

FROM debian:bookworm-slim
COPY --from=files /tmp/torchyard-os-tree/ /
"""
LISTING = (
    "find /opt/new /etc/issue /etc/debian_version /etc/torchyard-before /var/log/torchyard.log /tmp/scratch "
    "-printf '%p %y %m %U:%G %T@ %l\\n' 2>/dev/null | sort; true"
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], list[str], str, str]]:
    context = tmp_path_factory.mktemp("os-tree")
    (context / "Dockerfile").write_text(DOCKERFILE)
    shutil.copy2(ROOT / "builder" / "image" / "os_delta.sh", context / "os_delta.sh")
    refs = [f"torchyard-os-tree-test/{RUN}:{name}" for name in ("a", "b")]
    logs = []
    for ref in refs:
        done = subprocess.run(
            ["/usr/bin/docker", "build", "--progress=plain", "--no-cache", "-t", ref, str(context)],
            env={**os.environ, "DOCKER_BUILDKIT": "1"}, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        logs.append(done.stderr)
    try:
        layers = [json.loads(docker("image", "inspect", "-f", "{{json .RootFS.Layers}}", ref).stdout) for ref in refs]
        listing = docker("run", "--rm", "--network", "none", refs[0], "sh", "-c", LISTING).stdout
        yield layers[0], layers[1], listing, logs[0]
    finally:
        docker("rmi", *refs)


def test_a_rebuild_copies_the_same_layer(built: tuple[list[str], list[str], str, str]) -> None:
    a, b, _, _ = built
    assert len(a) == 2  # the base and the tree: nothing else
    assert a == b


def test_the_tree_holds_what_the_step_wrote_with_owners_modes_and_package_times(
    built: tuple[list[str], list[str], str, str],
) -> None:
    _, _, listing, _ = built
    lines = listing.splitlines()
    assert "/opt/new d 750 0:0 0.0000000000 " in lines  # its mode kept, its time (the build's) made 0
    assert "/opt/new/deep d 755 0:0 0.0000000000 " in lines
    assert "/opt/new/deep/file f 644 0:0 1000000000.0000000000 " in lines  # a time before the mark is kept
    assert "/opt/new/link l 777 0:0 0.0000000000 deep/file" in lines
    issue = next(line for line in lines if line.startswith("/etc/issue "))
    assert issue.split()[4] == "0.0000000000"  # changed by the step: in the tree, its time 0


def test_what_the_tree_leaves_out(built: tuple[list[str], list[str], str, str]) -> None:
    _, _, listing, _ = built
    paths = {line.split()[0] for line in listing.splitlines()}
    assert "/tmp/scratch" not in paths  # /tmp is the step's, not the image's
    assert "/var/log/torchyard.log" not in paths  # logs hold the time of the install
    # written before the mark (a build setting, not the packages'), with a time in the future: not the install's
    assert "/etc/torchyard-before" not in paths


def test_a_file_the_step_removed_stays_and_is_named(built: tuple[list[str], list[str], str, str]) -> None:
    _, _, listing, log = built
    assert "/etc/debian_version" in {line.split()[0] for line in listing.splitlines()}  # a copy cannot remove
    assert "torchyard: the install removed 1 file(s) of the base image; a copied layer keeps them:" in log
    assert "/etc/debian_version" in log.split("a copied layer keeps them:", 1)[1].splitlines()[1]
