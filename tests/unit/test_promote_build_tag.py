"""`torchyard promote`'s build tag (issue 44 item 2, builder/publish/promote_tag.py): DST's `<tag>-<YYYYMMDD>`
written from the promoted manifest before DST names it; a second promotion that day gets `.2`; an unchanged
promotion writes none; a refused build tag leaves DST where it was and the rerun writes both. In-memory registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from http_kit import Net
from registry_kit import MemoryRegistry

from builder.cli.main import main
from builder.core.errors import PushError
from builder.oci.client import Distribution
from builder.oci.promote import promote
from builder.oci.refs import parse_ref
from builder.publish.promote_tag import BuildTagStamp

HOST = "127.0.0.1:5000"
SRC, DST = f"{HOST}/team/cand:t1", f"{HOST}/team/pub:t1"


def _setup() -> tuple[Net, MemoryRegistry, Distribution]:
    net = Net()
    memory = MemoryRegistry(HOST).attach(net)
    return net, memory, Distribution(net.http(), docker_login=False)


def _promote(client: Distribution, day: str = "20261205") -> BuildTagStamp:
    stamp = BuildTagStamp(client, parse_ref(DST), None, day)
    promote(client, parse_ref(SRC), parse_ref(DST), None, stamp)
    return stamp


def test_each_new_digest_gets_a_build_tag_and_an_unchanged_promotion_none() -> None:
    _, memory, client = _setup()
    first = memory.add_image("team/cand", "t1", labels={"v": "1"})
    assert _promote(client).written == f"{HOST}/team/pub:t1-20261205"
    assert _promote(client, "20261206").written is None  # DST already names it: no second build tag
    second = memory.add_image("team/cand", "t1", labels={"v": "2"})
    assert _promote(client).written == f"{HOST}/team/pub:t1-20261205.2"
    digests = {tag: _digest(client, tag) for tag in ("t1-20261205", "t1-20261205.2", "t1")}
    assert digests == {"t1-20261205": first, "t1-20261205.2": second, "t1": second}


def _digest(client: Distribution, tag: str) -> str:
    found = client.manifest(parse_ref(DST).repo, tag)
    assert found is not None
    return found.digest


def test_a_refused_build_tag_leaves_dst_where_it_was_and_the_rerun_writes_both(monkeypatch: pytest.MonkeyPatch) -> None:
    _, memory, client = _setup()
    memory.add_image("team/cand", "t1")
    real = client.put_manifest

    def refuse(repo: object, reference: str, raw: bytes, media_type: str) -> str:
        if reference.startswith("t1-"):
            raise PushError("denied: build tags")
        return real(repo, reference, raw, media_type)  # type: ignore[arg-type]

    monkeypatch.setattr(client, "put_manifest", refuse)
    with pytest.raises(PushError, match="denied"):
        _promote(client)
    assert ("team/pub", "t1") not in memory.manifests
    monkeypatch.setattr(client, "put_manifest", real)
    assert _promote(client).written == f"{HOST}/team/pub:t1-20261205"
    assert ("team/pub", "t1") in memory.manifests


def test_the_command_prints_the_build_tag_and_no_build_tag_writes_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    net, memory, _ = _setup()
    memory.add_image("team/cand", "t1")
    import docker  # the SDK's APIClient subclasses requests.Session: imported before the fake replaces it

    assert docker
    monkeypatch.setattr("requests.Session", net.session)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        main(["promote", SRC, f"{HOST}/team/pub:t2", "--no-build-tag", "--json"])
    assert exited.value.code in (0, None)
    assert json.loads(capsys.readouterr().out)["build_tag"] is None
    assert not [tag for repo, tag in memory.manifests if repo == "team/pub" and tag.startswith("t2-")]
    with pytest.raises(SystemExit) as exited:
        main(["promote", SRC, DST])
    assert exited.value.code in (0, None)
    out = capsys.readouterr().out
    assert "build tag 127.0.0.1:5000/team/pub:t1-2" in out and "(never rewritten) = " + DST in out
