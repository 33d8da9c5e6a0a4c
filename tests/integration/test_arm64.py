"""Issue 15 in the docker tier: arm64 on this x86_64 machine, without an emulated build.

QEMU's binfmt handlers and the multi-platform Debian base in the local registry come from scripts/services
(127.0.0.1:5000/torchyard-base/library/debian:bookworm-slim). A container of the arm64 base runs here as aarch64
(QEMU in a container, seconds). The builds here reach the base through a mirror of this run whose
debian:bookworm-slim is an index of that base's arm64 image alone (--registry-mirror): an amd64 build from it fails
at its FROM, in seconds. The arm64 image a build would push is a stand-in pushed first under the tag and with the
content hash `torchyard render` computes for it (oci_kit.push_image), so `torchyard build` finds it up to date in
the registry: the platform logic (tags, up to date, a held index, the refusal to smoke another platform) runs on the
real engine and registry, without building torch under QEMU.

The emulated build itself (torch 2.5.1's aarch64 CPU wheel, the scaled smoke suite under QEMU, the push, the pull
back by digest and a run as aarch64, a second build found up to date) took 14 of the CI's minutes here: it is
bench/arm64_pipeline.py (docs/benchmarks.md), and the full CUDA arm64 build bench/arm64_build.py.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import RUN_ID
from kit import REGISTRY, ROOT, docker, torchyard
from oci_kit import local_client, push_image

from builder.matrix import load_matrix
from builder.oci.index import IndexEntry, write_index
from builder.oci.refs import parse_repo
from builder.pipeline.plan import CONTENT_LABEL
from builder.publish.items import expand
from builder.publish.plan import plan_publish
from builder.render.network import NetworkFlags, resolve_network

pytestmark = pytest.mark.docker

MIRROR = f"{REGISTRY}/torchyard-base"
BINFMT = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
ARM64_ONLY = f"{REGISTRY}/torchyard-test-{RUN_ID}/arm64only"  # the mirror every build here uses (arm64_only_mirror)
ARM64_FLAGS = ("--platform", "linux/arm64", "--torch", "2.5.1", "--variant", "cpu", "--os", "debian12",
               "--python", "3.11", "--registry-mirror", ARM64_ONLY)  # fmt: skip
TAG = "2.5.1-cpu-py3.11-debian12-runtime-arm64"


@pytest.fixture(scope="module")
def emulation() -> None:
    """What scripts/services sets up: without it these tests fail with the fix, never skip."""
    problems = []
    if platform.machine() == "x86_64" and not BINFMT.exists():
        problems.append(f"no QEMU handler at {BINFMT}")
    base = local_client().platforms(parse_repo(f"{MIRROR}/library/debian"), "bookworm-slim")
    if base is None or not {"linux/amd64", "linux/arm64"} <= set(base):
        problems.append(f"no multi-platform base {MIRROR}/library/debian:bookworm-slim (found: {base})")
    if problems:
        pytest.fail(f"arm64 tests need emulation ({'; '.join(problems)}): run `sudo scripts/services start`", False)


@pytest.fixture(scope="module")
def arm64_only_mirror(emulation: None) -> str:
    """A Docker Hub mirror whose debian:bookworm-slim is an index of the multi-platform base's arm64 image alone."""
    copied = torchyard("promote", f"{MIRROR}/library/debian:bookworm-slim-arm64", f"{ARM64_ONLY}/library/debian:copy")
    assert copied.code == 0, copied.text
    client = local_client()
    repo = parse_repo(f"{ARM64_ONLY}/library/debian")
    digest = client.platforms(repo, "copy")
    assert digest is not None
    write_index(client, repo, "bookworm-slim", [IndexEntry(digest["linux/arm64"], "linux/arm64")])
    return ARM64_ONLY


@dataclass(frozen=True)
class StandIn:
    repo: str
    digest: str


@pytest.fixture(scope="module")
def arm64(arm64_only_mirror: str, tmp_path_factory: pytest.TempPathFactory) -> StandIn:
    """The arm64 image `build` would push, as a stand-in: its tag, and the content hash render computes."""
    out = tmp_path_factory.mktemp("arm64-render")
    rendered = torchyard("render", *ARM64_FLAGS, "-o", str(out))
    assert rendered.code == 0, rendered.text[-2000:]
    content = json.loads((out / "plan.json").read_text())["content_hash"]
    repo = f"{REGISTRY}/torchyard-test-{RUN_ID}/arm64"
    pushed = push_image(local_client(), parse_repo(repo), TAG, arch="arm64", labels={CONTENT_LABEL: content})
    return StandIn(repo, pushed.digest)


def test_a_container_of_the_arm64_base_runs_as_aarch64(emulation: None) -> None:
    ran = docker("run", "--rm", "--platform", "linux/arm64", f"{MIRROR}/library/debian:bookworm-slim-arm64", "uname",
                 "-m")  # fmt: skip
    assert (ran.returncode, ran.stdout.strip()) == (0, "aarch64"), ran.stderr


def test_a_build_finds_the_arm64_image_up_to_date_in_the_registry(arm64: StandIn, tmp_path: Path) -> None:
    again = torchyard("build", *ARM64_FLAGS, "--repo", arm64.repo, "--push", "-o", str(tmp_path / "ctx"))
    assert again.code == 0, again.text[-2000:]
    assert "chose torch2.5.1-cpu-py3.11-debian12-arm64" in again.out
    assert f"{arm64.repo}:{TAG} is up to date in the registry: no build, no push" in again.out
    assert "building" not in again.out
    assert local_client().platforms(parse_repo(arm64.repo), TAG) == {"linux/arm64": arm64.digest}  # nothing rewritten


def test_smoke_refuses_the_arm64_image_as_this_machines_platform(arm64: StandIn) -> None:
    # Run with --platform linux/arm64 it takes the build's path (for_platform: --small, timeouts x10), which
    # bench/arm64_pipeline.py runs for real; the refusal comes before any container starts.
    ref = f"{arm64.repo}:{TAG}"
    pulled = docker("pull", ref)
    assert pulled.returncode == 0, pulled.stderr
    refused = torchyard("smoke", ref)
    assert refused.code == 2
    assert refused.err == (
        f"torchyard: error: smoke: {ref} is a linux/arm64 image, not linux/amd64 (--platform (default: this "
        "machine's))\n"
    )


# --- multi-platform (issue 15.2) -----------------------------------------------------------------------------


def test_a_platform_that_fails_holds_the_index_and_the_other_stays_addressable(arm64: StandIn, tmp_path: Path) -> None:
    flags = list(ARM64_FLAGS)
    flags[flags.index("linux/arm64")] = "linux/amd64,linux/arm64"
    run = torchyard("build", *flags, "--repo", arm64.repo, "--push", "-o", str(tmp_path / "ctx"))
    assert run.code == 4, run.text[-3000:]
    held = TAG.removesuffix("-arm64")
    assert run.err == f"torchyard: error: linux/amd64 failed; held: {held}\n"
    index_line = next(line for line in run.out.splitlines() if line.startswith("index "))
    assert index_line.startswith(f"index        held        {arm64.repo}:{held} linux/amd64 failed: ")
    assert f"[arm64] [runtime] {arm64.repo}:{TAG} is up to date in the registry: no build, no push" in run.out
    client = local_client()
    assert client.manifest(parse_repo(arm64.repo), held) is None  # nothing under the held tag
    assert client.platforms(parse_repo(arm64.repo), TAG) == {"linux/arm64": arm64.digest}  # still addressable
    pulled = docker("pull", f"{arm64.repo}@{arm64.digest}")
    assert pulled.returncode == 0, pulled.stderr


BOTH_ENTRY = """
[[publish]]
name = "both"
torch = "==2.14.1"
os = ["debian12"]
flavors = ["runtime"]
platforms = ["linux/amd64", "linux/arm64"]
"""


def test_publish_joins_the_published_platforms_into_one_index_pulled_back_per_platform(tmp_path: Path) -> None:
    """The step the GitHub `aliases` job runs (`publish --aliases-only`) against the real registry: both
    platforms' images are in the registry with their plans' content (small stand-ins here: building the arm64
    CUDA image emulated takes the better part of an hour, bench/arm64_build.py), so the index is written under
    the tag and its alias, pulled back per platform by digest, and found unchanged by a rerun."""
    text = (ROOT / "matrix.toml").read_text()
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(text[: text.index("[[publish]]")] + BOTH_ENTRY)
    m = load_matrix(matrix)
    items, _ = expand(m, resolve_network(NetworkFlags()))
    [index] = plan_publish(m, items, []).indexes
    assert index.tags is not None
    repo = f"{REGISTRY}/torchyard-test-{RUN_ID}/joined"
    client, where = local_client(), parse_repo(repo)
    pushed = {
        member.item.combo.platform.value: push_image(client, where, member.tag, arch=member.item.combo.platform.arch,
                                                     labels={CONTENT_LABEL: member.content_hash}).digest
        for member in index.members
    }  # fmt: skip
    run = torchyard("--matrix", str(matrix), "publish", "--aliases-only", "--repo", repo, "-o", str(tmp_path / "w"))
    assert run.code == 0, run.text[-3000:]
    tag, alias = index.tags.immutable, index.tags.aliases[0]
    assert f"index {tag}: moved" in run.out and f"alias {alias}: moved -> {repo}:{tag}" in run.out
    written = client.manifest(where, tag)
    assert written is not None and written.media_type == "application/vnd.oci.image.index.v1+json"
    assert written.data["annotations"] == {"io.torchyard.content-hash": index.content_hash}
    assert client.platforms(where, tag) == pushed and client.manifest(where, alias) == written
    for expected, digest in pushed.items():
        ref = f"{repo}@{digest}"
        pulled = docker("pull", ref)
        assert pulled.returncode == 0, pulled.stderr
        arch = docker("image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", ref).stdout.strip()
        assert arch == expected
    again = torchyard("--matrix", str(matrix), "publish", "--aliases-only", "--repo", repo, "-o", str(tmp_path / "w"))
    assert again.code == 0, again.text[-2000:]
    assert f"index {tag}: unchanged" in again.out and f"alias {alias}: unchanged" in again.out
    assert client.manifest(where, tag) == written
