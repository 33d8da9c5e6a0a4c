"""`matrix outdated` against PyPI's pages as recorded on 2026-12-04 (tests/unit/data/upstream/outdated) and a
registry served by the fake network: the real matrix is current on that day, a release taken out of it is
listed with how to add it back, a registry that cannot be reached is "not checked", never up to date."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import requests
from http_kit import Answer, Net, Sent, json_answer

from builder.cli.main import main
from builder.core.resources import default_matrix_path
from builder.matrix import load_matrix
from builder.net.http import Policy
from builder.oci.client import Distribution
from builder.oci.refs import parse_repo
from builder.upstream.index import PYPI
from builder.upstream.outdated import State, outdated

DATA = Path(__file__).resolve().parent / "data" / "upstream" / "outdated"
MIRROR = "127.0.0.1:5999"
REAL = default_matrix_path().read_text()
CUDNN = '"9.24.0.43", "9.26.0.51", "9.28.1.4"]'


def pypi(sent: Sent) -> Answer | None:
    if not sent.url.startswith(f"{PYPI}/"):
        return None
    page = DATA / f"pypi-{sent.url.removeprefix(f'{PYPI}/').strip('/')}.json"
    if not page.is_file():
        return None
    return Answer(200, page.read_bytes(), {"Content-Type": "application/vnd.pypi.simple.v1+json"})


def hub_down(sent: Sent) -> Exception | None:
    return requests.ConnectionError("no route to host") if "docker.io" in sent.url else None


def tags_of(tags: list[str]) -> Net:
    """A registry at MIRROR serving nvidia/cuda's tags a page at a time, as the distribution spec pages them."""

    def serve(sent: Sent) -> Answer | None:
        if not sent.url.startswith(f"http://{MIRROR}/v2/nvidia/cuda/tags/list"):
            return None
        n, last = int(sent.query["n"][0]), sent.query.get("last", [""])[0]
        rest = [t for t in sorted(tags) if t > last]
        page = rest[:n]
        more = {"Link": f'</v2/nvidia/cuda/tags/list?n={n}&last={page[-1]}>; rel="next"'} if len(rest) > n else {}
        return json_answer({"name": "nvidia/cuda", "tags": page}, more)

    return Net().on(pypi).on(serve)


def run(matrix: str, net: Net, tmp_path: Path, mirror: str | None = None) -> dict[str, State]:
    path = tmp_path / "matrix.toml"
    path.write_text(matrix)
    http = net.http(Policy(workers=1, retries=0))
    found = outdated(load_matrix(path), http, Distribution(http), PYPI, mirror)
    return {f.tracked.name: f.state for f in found}


def cli(matrix: str, net: Net, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    path = tmp_path / "matrix.toml"
    path.write_text(matrix)
    monkeypatch.setattr("requests.Session", net.session)
    monkeypatch.setattr("builder.net.http.time.sleep", net.waits.append)
    monkeypatch.setattr("builder.oci.auth.docker_login", lambda host: None)  # no docker login on a test host
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", str(path), "matrix", "outdated", *args])
    code = exit_.value.code
    assert isinstance(code, int)
    return code


def test_the_real_matrix_is_current_on_the_day_and_the_hub_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli(REAL, Net().on(pypi).on(hub_down), tmp_path, monkeypatch)
    out = capsys.readouterr().out
    assert code == 5  # nothing missing, but one source could not be read: not "up to date"
    assert "torch ([[torch]], every release from 1.13.0): up to date" in out
    assert "onnxruntime-gpu ([[onnxruntime]], newer than 1.31.1): up to date" in out
    assert "nvidia/cuda ([[cuda_image]], newer than 13.1.0): not checked: registry registry-1.docker.io" in out
    assert out.endswith("matrix outdated: 0 release(s) missing, 1 source(s) not checked\n")


def test_a_torch_release_taken_out_is_listed_with_its_sync_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    start = REAL.index('[[torch]]\nversion = "2.0.0"')
    without = REAL[:start] + REAL[REAL.index("[[torch]]", start + 1) :]
    code = cli(without, Net().on(pypi).on(hub_down), tmp_path, monkeypatch, "--only", "torch")
    out = capsys.readouterr().out
    assert code == 7
    assert out.splitlines()[:2] == [
        "torch ([[torch]], every release from 1.13.0): 1 missing",
        "  2.0.0 (uploaded 2023-03-15): torchyard matrix sync --torch 2.0.0",
    ]


def test_the_newest_cudnn_taken_out_is_listed_and_json_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    older = REAL.replace(CUDNN, '"9.24.0.43", "9.26.0.51"]')
    assert older != REAL
    code = cli(older, Net().on(pypi).on(hub_down), tmp_path, monkeypatch, "--only", "nvidia-cudnn-cu13", "--json")
    data = json.loads(capsys.readouterr().out)
    assert code == 7 and data["schema"] == 1 and data["missing"] == 4
    (finding,) = data["findings"]
    # Newer than 9.26.0.51: its patch 9.26.1.1 and the releases since; dev builds (9.27.0.21.dev...) never count.
    assert [m["version"] for m in finding["missing"]] == ["9.26.1.1", "9.27.0.42", "9.28.0.42", "9.28.1.4"]
    assert finding["window"] == "newer than 9.26.0.51" and finding["state"] == "missing"


def test_a_missing_nvidia_wheel_is_added_by_the_sync_line_outdated_prints_run_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    older = REAL.replace('versions = ["2.32.3", "2.32.6"]', 'versions = ["2.32.3"]')
    assert older != REAL
    code = cli(older, Net().on(pypi).on(hub_down), tmp_path, monkeypatch, "--only", "nvidia-nccl-cu13", "--json")
    (finding,) = json.loads(capsys.readouterr().out)["findings"]
    (missing,) = finding["missing"]
    assert code == 7 and missing["add"] == "torchyard matrix sync --nvidia-wheel nvidia-nccl-cu13"
    with pytest.raises(SystemExit) as synced:
        main(["--matrix", str(tmp_path / "matrix.toml"), *shlex.split(missing["add"])[1:], "--write"])
    assert synced.value.code == 0 and (tmp_path / "matrix.toml").read_text() == REAL


def test_a_missing_onnx_runtime_release_names_its_sync_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    older = REAL.replace('version = "1.32.0"\npython', 'version = "1.31.1"\npython')
    assert older != REAL
    code = cli(older, Net().on(pypi).on(hub_down), tmp_path, monkeypatch, "--only", "onnxruntime")
    lines = capsys.readouterr().out.splitlines()
    assert code == 7 and lines[0] == "onnxruntime ([[onnxruntime]], newer than 1.31.1): 1 missing"
    assert lines[1].endswith("): torchyard matrix sync --onnxruntime 1.32.0 --package onnxruntime")


def test_image_tags_are_read_across_pages_and_a_newer_cuda_is_listed(tmp_path: Path) -> None:
    tags = [f"{v}-{kind}-ubuntu24.04" for v in ("12.8.1", "13.0.2", "13.1.0") for kind in ("base", "devel")]
    tags += [f"13.1.{n}-runtime-ubuntu24.04" for n in range(1, 2500)] + ["latest", "13.2-beta"]
    net = tags_of(tags)
    http = net.http(Policy(workers=1, retries=0))
    assert len(Distribution(http).every_tag(parse_repo(f"{MIRROR}/nvidia/cuda"))) == len(tags)
    assert len([s for s in net.sent if "tags/list" in s.url]) == 3  # 1000 a page
    path = tmp_path / "matrix.toml"
    path.write_text(REAL)
    (found,) = [f for f in outdated(load_matrix(path), http, Distribution(http), PYPI, MIRROR) if f.tracked.image]
    assert found.state is State.MISSING and len(found.missing) == 2499
    assert str(found.missing[0].version) == "13.1.1" and found.missing[0].uploaded is None


def test_an_image_repository_without_newer_tags_is_current(tmp_path: Path) -> None:
    states = run(REAL, tags_of(["13.0.2-base-ubuntu24.04", "13.1.0-base-ubuntu24.04"]), tmp_path, MIRROR)
    assert states["nvidia/cuda"] is State.CURRENT


def test_a_registry_that_lists_without_end_is_refused_not_truncated() -> None:
    def endless(sent: Sent) -> Answer | None:
        last = sent.query.get("last", ["a"])[0]
        return json_answer({"tags": [last + "x", last + "y"]}, {"Link": '<...>; rel="next"'})

    http = Net().on(endless).http(Policy(workers=1, retries=0))
    from builder.core.errors import PushError

    with pytest.raises(PushError, match="lists more than 6 tags"):
        Distribution(http).every_tag(parse_repo(f"{MIRROR}/nvidia/cuda"), page=2, pages=3)


def test_an_index_that_fails_is_not_checked_and_others_still_answer(tmp_path: Path) -> None:
    broken = Net().on(lambda s: Answer(500, b"") if "onnxruntime-gpu" in s.url else None).on(pypi).on(hub_down)
    states = run(REAL, broken, tmp_path)
    assert states["onnxruntime-gpu"] is State.NOT_CHECKED
    assert states["torch"] is State.CURRENT and states["onnxruntime"] is State.CURRENT


def test_an_unknown_project_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli(REAL, Net(), tmp_path, monkeypatch, "--only", "tensorflow")
    assert code == 2
    assert capsys.readouterr().err == (
        "torchyard: error: --only tensorflow: not tracked (one of torch, cuda-toolkit, nvidia-cudnn-cu13, "
        "nvidia-nccl-cu13, onnxruntime-gpu, onnxruntime, nvidia/cuda)\n"
    )
