"""pushed_bytes for a docker push (issue 44): the engine's push stream says which layers it sent and which the
registry had, the pushed manifest gives their sizes. The streams below were recorded from Docker 26.1.5 with the
containerd image store pushing to a local registry (docs/benchmarks.md, "pushed_bytes of a docker push")."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from publish_kit import (
    PublishFakes,
    _SharedFake,
    fakes_fixture,  # noqa: F401 (the `fakes` fixture)
)
from publish_kit import run_publish as run

from builder.core.errors import PushError
from builder.engine import DockerEngine, RegistryAuth
from builder.engine.push_stream import LayerTally, PushedLayers
from builder.oci.client import DOCKER_MANIFEST, OCI_INDEX, Manifest, digest_of
from builder.pipeline.push_count import engine_push, sent_bytes
from builder.pipeline.registry import Registry
from builder.publish.report import item_json, pushed_text

BASE, BIG, SMALL, CONFIG = "c466a3bcdd0e", "bffaac07bb15", "996134501ade", "d3f93b3c40c8"
SIZES = {BASE: 93_292_343, BIG: 80_024_676, SMALL: 101}
DIGEST_LINE = "c1796463213: digest: sha256:{} size: 896"

# a new image on a base another repository of the registry holds: two layers sent, the base mounted
FIRST: list[dict[str, Any]] = [
    {"status": "The push refers to repository [127.0.0.1:5000/helper-pushprobe/big]"},
    {"status": "Pushed", "progressDetail": {}, "id": SMALL},
    {"status": "Mounted from helper-pushprobe/img", "progressDetail": {}, "id": BASE},
    {"status": "Pushing", "progressDetail": {"current": 10485760, "total": 80024676}, "id": BIG},
    {"status": "Pushing", "progressDetail": {"current": 79691776, "total": 80024676}, "id": BIG},
    {"status": "Pushed", "progressDetail": {}, "id": BIG},
]
# the same image pushed again: every layer already there
AGAIN: list[dict[str, Any]] = [
    {"status": "The push refers to repository [127.0.0.1:5000/helper-pushprobe/big]"},
    {"status": "Layer already exists", "progressDetail": {}, "id": BIG},
    {"status": "Layer already exists", "progressDetail": {}, "id": BASE},
    {"status": "Already exists", "progressDetail": {}, "id": SMALL},
]


def manifest(layers: tuple[str, ...] = (BASE, BIG, SMALL), media_type: str = DOCKER_MANIFEST) -> Manifest:
    data = {
        "schemaVersion": 2,
        "mediaType": media_type,
        "config": {"digest": f"sha256:{CONFIG}{'0' * 52}", "size": 993},
        "layers": [{"digest": f"sha256:{short}{'0' * 52}", "size": SIZES[short]} for short in layers],
    }
    raw = json.dumps(data).encode()
    return Manifest(media_type, digest_of(raw), raw, data)


def tally(events: list[dict[str, Any]]) -> PushedLayers:
    said = LayerTally()
    for event in events:
        said.feed(event)
    return said.layers()


def test_the_stream_settles_each_layer_sent_or_kept() -> None:
    assert tally(FIRST) == PushedLayers(frozenset({SMALL, BIG}), frozenset({BASE}))
    assert tally(AGAIN) == PushedLayers(frozenset(), frozenset({BASE, BIG, SMALL}))


def test_the_layers_sent_count_by_their_manifest_sizes_with_the_manifest() -> None:
    pushed = manifest()
    assert sent_bytes(tally(FIRST), pushed, pushed.digest) == 80_024_676 + 101 + len(pushed.raw)
    assert sent_bytes(tally(AGAIN), pushed, pushed.digest) == len(pushed.raw)  # the manifest is put again
    config_said = PushedLayers(frozenset({CONFIG, BIG, SMALL}), frozenset({BASE}))
    assert sent_bytes(config_said, pushed, pushed.digest) == 80_024_676 + 101 + 993 + len(pushed.raw)


@pytest.mark.parametrize(
    ("said", "pushed", "why"),
    [
        # the graph driver's store names layers by uncompressed diff id: no blob of the manifest
        (PushedLayers(frozenset({"0123456789ab"})), manifest(), "ids that name no layer"),
        (PushedLayers(frozenset({BIG}), frozenset({BASE})), manifest(), "a layer the stream did not settle"),
        (tally(FIRST), manifest(media_type=OCI_INDEX), "an index"),
        (tally(FIRST), None, "no manifest under the tag"),
    ],
)
def test_what_the_stream_does_not_settle_is_not_recorded(said: PushedLayers, pushed: Manifest | None, why: str) -> None:
    assert sent_bytes(said, pushed, pushed.digest if pushed else "sha256:x") is None, why


def test_a_tag_moved_by_another_push_since_is_not_recorded() -> None:
    assert sent_bytes(tally(FIRST), manifest(), "sha256:" + "a" * 64) is None


def test_the_engine_s_push_returns_what_its_stream_said(monkeypatch: pytest.MonkeyPatch) -> None:
    digest = "e" * 64
    events: list[dict[str, Any]] = [*FIRST, {"status": DIGEST_LINE.format(digest)}]

    def push(repo: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        return iter(events)

    monkeypatch.setattr(DockerEngine, "_sdk", lambda self: SimpleNamespace(api=SimpleNamespace(push=push)))
    lines: list[str] = []
    assert DockerEngine().push_said("r/x:c1", None, lines.append) == (f"sha256:{digest}", tally(FIRST))
    assert lines == [FIRST[0]["status"], DIGEST_LINE.format(digest)]  # layer progress is not echoed


class _Read(Registry):
    def __init__(self, found: Manifest | Exception | None) -> None:
        super().__init__(None)
        self.found = found

    def read(self, ref: str) -> Manifest | None:
        if isinstance(self.found, Exception):
            raise self.found
        return self.found


class _Saying:
    def __init__(self, digest: str, said: PushedLayers) -> None:
        self.digest, self.said = digest, said

    def push(self, ref: str, auth: RegistryAuth | None, on_line: Callable[[str], None]) -> str:
        return self.digest

    def push_said(
        self, ref: str, auth: RegistryAuth | None, on_line: Callable[[str], None]
    ) -> tuple[str, PushedLayers]:
        return self.digest, self.said


def test_engine_push_reads_the_manifest_and_a_failed_read_is_not_recorded() -> None:
    pushed = manifest()
    engine: Any = _Saying(pushed.digest, tally(FIRST))
    sent = 80_024_676 + 101 + len(pushed.raw)
    assert engine_push(engine, _Read(pushed), "r/x:c1", None, print) == (pushed.digest, sent)
    assert engine_push(engine, _Read(PushError("registry gone")), "r/x:c1", None, print) == (pushed.digest, None)


def test_publish_counts_a_docker_push_where_the_engine_says_what_it_sent(
    fakes: PublishFakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def push_said(self: _SharedFake, ref: str, auth: Any, on_line: Any) -> tuple[str, PushedLayers]:
        digest = self.push(ref, auth, on_line)
        fakes.registry.sizes[ref] = {f"sha256:{BIG}{'0' * 52}": 5000, f"sha256:{BASE}{'0' * 52}": 7000}
        return digest, PushedLayers(frozenset({BIG}), frozenset({BASE}))

    monkeypatch.setattr(_SharedFake, "push_said", push_said, raising=False)
    report, _ = run(fakes, tmp_path)
    built = [i for i in report.items if i.pushed_bytes is not None]
    assert built and len(built) == len(report.items)
    # the fake registry's manifest bytes are the ref it was read from
    assert all(i.pushed_bytes == 5000 + len(i.ref.encode()) for i in built)
    assert item_json(built[0])["pushed_bytes"] == built[0].pushed_bytes
    assert pushed_text(built[0]) == f"{built[0].pushed_bytes} B"
