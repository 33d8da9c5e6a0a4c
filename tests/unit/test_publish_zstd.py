"""publish --zstd (builder/publish/zstd_copies.py): after the gzip images are pushed and the aliases moved, a
zstd copy of each published tag; an alias's copy is its image's, written again; a copy that fails fails the
run and leaves the gzip tags alone. Fake engines at the seam (publish_kit), the in-memory registry behind the
OCI client (registry_kit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_engine import wall_off_the_engine
from http_kit import Net
from publish_kit import REPO, SET, PublishFakes, fakes_for
from publish_kit import run_publish as run
from registry_kit import MemoryRegistry, tar_of
from test_publish_run import ALIASES, IMMUTABLES
from trust_kit import write_key

from builder.core.kinds import AliasStatus, Status
from builder.oci.client import Distribution
from builder.oci.refs import parse_repo
from builder.publish.zstd_copies import Published, published_tags, write_zstd_copies
from builder.trust import cosign
from builder.trust.keys import public_key, signing_key

HOST, NAME = REPO.split("/", 1)


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


def _registry(fakes: PublishFakes, tags: set[str]) -> tuple[Net, MemoryRegistry]:
    """The in-memory registry holding a gzip image under each tag and its aliases (what the fake engines'
    pushes would have left there)."""
    net = Net()
    registry = MemoryRegistry(HOST).attach(net)
    for ref in sorted(tags):
        registry.add_gzip_image(NAME, ref.rsplit(":", 1)[1], [tar_of("torch", 40_000), tar_of(ref, 500)])
    for alias, owner in ALIASES.items():
        if owner in tags:
            registry.manifests[NAME, alias] = registry.manifests[NAME, owner.rsplit(":", 1)[1]]
    fakes.registry.client = Distribution(net.http(), docker_login=False)
    return net, registry


def test_every_pushed_tag_and_alias_gets_its_zstd_copy_after_the_aliases_moved(tmp_path: Path) -> None:
    fakes = fakes_for(SET, tmp_path)
    _, registry = _registry(fakes, IMMUTABLES)
    report, log = run(fakes, tmp_path, zstd=True)
    copied = {z.tag: z.status for z in report.zstd}
    assert copied == dict.fromkeys({r.rsplit(":", 1)[1] for r in IMMUTABLES} | set(ALIASES), "written")
    assert not report.failed and report.as_json()["zstd"][0]["target"].endswith("-zstd")
    for alias, owner in ALIASES.items():  # the alias's copy is the image's copy, byte for byte
        assert registry.manifests[NAME, f"{alias}-zstd"] == registry.manifests[NAME, owner.rsplit(":", 1)[1] + "-zstd"]
    assert len(registry.uploads) == 1 + len(IMMUTABLES)  # the shared torch layer once, each image's own once
    first_zstd = next(i for i, line in enumerate(log) if line.startswith("ZSTD"))
    assert all(not line.startswith("MOVE") for line in log[first_zstd:])  # copies come after the aliases


def test_without_the_flag_nothing_is_copied(tmp_path: Path) -> None:
    fakes = fakes_for(SET, tmp_path)
    net, _ = _registry(fakes, IMMUTABLES)
    report, _ = run(fakes, tmp_path)
    assert report.zstd == [] and net.sent == []


def test_a_copy_that_fails_fails_the_run_and_holds_its_aliases_copies(tmp_path: Path) -> None:
    fakes = fakes_for(SET, tmp_path)
    missing = next(r for r in IMMUTABLES if r.endswith("13.2-cudnn9-py3.11-debian12-runtime"))
    _registry(fakes, IMMUTABLES - {missing})
    report, _ = run(fakes, tmp_path, zstd=True)
    failed = {z.tag: z.reason for z in report.zstd if z.status == "failed"}
    tag = missing.rsplit(":", 1)[1]
    assert failed == {
        tag: f"{missing} does not exist: nothing to copy",
        "2.15-cuda13.2-py3.11-debian12-runtime": f"the zstd copy of {tag} was not written",  # SET is on Debian 12
    }
    assert report.failed and all(i.status is Status.BUILT for i in report.items)


def test_published_tags_are_the_passed_images_the_written_indexes_and_the_aliases_that_name_them() -> None:
    found = published_tags(
        [("r:built", Status.BUILT, False), ("r:skip", Status.SKIPPED, False), ("r:bad", Status.FAILED, False),
         ("r:x-amd64", Status.BUILT, True)],
        [("x", AliasStatus.MOVED), ("y", AliasStatus.HELD)],
        [("latest", AliasStatus.UNCHANGED, "r:built"), ("held", AliasStatus.HELD, "r:bad"),
         ("2.1", AliasStatus.MOVED, "r:x")],
    )  # fmt: skip
    assert found == Published(("built", "skip", "x"), (("latest", "built"), ("2.1", "x")))


def test_an_alias_whose_image_has_no_copy_is_not_copied() -> None:
    net = Net()
    MemoryRegistry(HOST).attach(net)
    client = Distribution(net.http(), docker_login=False)
    results = write_zstd_copies(client, REPO, Published((), (("latest", "gone"),)), lambda line: None)
    assert [(r.tag, r.status, r.reason) for r in results] == [
        ("latest", "failed", "the zstd copy of gone was not written")
    ]
    assert net.sent == []


def test_with_a_key_each_copy_is_signed_in_the_published_repository(tmp_path: Path) -> None:
    net = Net()
    memory = MemoryRegistry(HOST).attach(net)
    client = Distribution(net.http(), docker_login=False)
    memory.add_gzip_image(NAME, "1.0", [tar_of("a", 700)])
    key = signing_key(write_key(tmp_path), {})
    lines: list[str] = []
    [copy, alias] = write_zstd_copies(client, REPO, Published(("1.0",), (("latest", "1.0"),)), lines.append, key)
    assert copy.status == "written" and copy.signed == [copy.digest]
    assert alias.signed == []  # the alias's copy is the same manifest: signed once, by the image's copy
    assert cosign.signed_by(client, parse_repo(REPO), copy.digest, public_key(tmp_path / "key.pem.pub")) is None
    assert lines[0].endswith("; 1 signature(s) written")
