"""`torchyard lock check`: a lock `lock export` wrote, judged against recorded index answers (PEP 691 pages
through the fake transport): a pin that holds, one whose sha256 changed, one a newer build shadows, one gone;
requirements.txt's pins; an index that cannot be read; a lock that cannot be read (FILE:LINE)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
from http_kit import Net, json_answer

from builder.cli.main import main
from builder.lock.check import CHANGED, GONE, HOLDS, NOT_CHECKED, UNREACHABLE, check_locks
from builder.lock.locate import PYPI
from builder.lock.model import Artifact, Lock, Locked
from builder.lock.pins import read_lock
from builder.lock.writers import pylock_toml, requirements_txt

TORCH_INDEX = "https://download.pytorch.org/whl/cu128"
TORCH = "torch-2.10.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl"
SIX = "six-1.17.0-py2.py3-none-any.whl"
OLD, NEW, SIX_SHA = "a" * 64, "b" * 64, "c" * 64


def _lock() -> Lock:
    def locked(name: str, version: str, index: str, filename: str, sha: str) -> Locked:
        artifact = Artifact(filename=filename, url=f"https://files/{filename}", size=1, sha256=sha, upload_time=None)
        return Locked(name=name, version=version, index=index, artifact=artifact)

    packages = (locked("six", "1.17.0", PYPI, SIX, SIX_SHA), locked("torch", "2.10.0+cu128", TORCH_INDEX, TORCH, OLD))
    return Lock(source="reg/x:1 (sha256:00)", python="3.11.2", machine="x86_64", packages=packages)


def _page(net: Net, index: str, project: str, *files: tuple[str, str]) -> None:
    entries = [{"filename": f, "url": f"https://files/{f}", "hashes": {"sha256": s}} for f, s in files]
    body = {"meta": {"api-version": "1.1"}, "name": project, "files": entries}
    net.route("GET", f"{index}/{project}/", json_answer(body, {"Content-Type": "application/vnd.pypi.simple.v1+json"}))


def _write(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "pylock.toml").write_text(pylock_toml(_lock()))
    (tmp_path / "requirements.txt").write_text(requirements_txt(_lock()))
    return tmp_path / "pylock.toml", tmp_path / "requirements.txt"


def _check(net: Net, *paths: Path) -> dict[tuple[str, str], Any]:
    found = check_locks(net.http(), [read_lock(p) for p in paths])
    return {(f.pin.where.rsplit("/", 1)[-1].split(":")[0], f.pin.name): f for f in found}


def test_every_pin_holds_while_the_index_serves_the_pinned_files(tmp_path: Path) -> None:
    net = Net()
    _page(net, PYPI, "six", (SIX, SIX_SHA))
    _page(net, TORCH_INDEX, "torch", (TORCH, OLD))
    found = _check(net, *_write(tmp_path))
    assert {key: f.status for key, f in found.items()} == {
        ("pylock.toml", "six"): HOLDS,
        ("pylock.toml", "torch"): HOLDS,
        ("requirements.txt", "six"): HOLDS,
        ("requirements.txt", "torch"): HOLDS,
    }


def test_a_pin_whose_hash_changed_names_the_index_and_both_hashes(tmp_path: Path) -> None:
    net = Net()
    _page(net, PYPI, "six", (SIX, SIX_SHA))
    _page(net, TORCH_INDEX, "torch", (TORCH, NEW), (TORCH.replace("cp311", "cp312"), "d" * 64))
    found = _check(net, *_write(tmp_path))
    torch = found["pylock.toml", "torch"]
    assert (torch.status, torch.index, torch.now) == (CHANGED, TORCH_INDEX, ((TORCH, NEW),))
    assert OLD in torch.detail and NEW in torch.detail and TORCH_INDEX in torch.detail
    assert torch.pin.where == f"{tmp_path}/pylock.toml:{_line(tmp_path / 'pylock.toml', TORCH)}"
    from_requirements = found["requirements.txt", "torch"]
    assert from_requirements.status == CHANGED and from_requirements.now == ((TORCH, NEW),)  # cp312's not shown
    assert found["pylock.toml", "six"].status == HOLDS


def test_an_index_that_gives_no_hashes_leaves_a_requirements_pin_not_checked(tmp_path: Path) -> None:
    net = Net()
    body = {"meta": {"api-version": "1.1"}, "name": "torch", "files": [{"filename": TORCH, "url": "https://f/t"}]}
    net.route(
        "GET", f"{TORCH_INDEX}/torch/", json_answer(body, {"Content-Type": "application/vnd.pypi.simple.v1+json"})
    )
    _page(net, PYPI, "six", (SIX, SIX_SHA))
    found = _check(net, *_write(tmp_path))
    assert found["requirements.txt", "torch"].status == NOT_CHECKED, found["requirements.txt", "torch"].detail
    assert found["pylock.toml", "torch"].status == NOT_CHECKED  # unknown is neither holds nor changed


def _line(path: Path, text: str) -> int:
    lines = path.read_text().splitlines()
    at = next(n for n, line in enumerate(lines) if text in line)
    return max(n for n in range(at + 1) if lines[n] == "[[packages]]") + 1


def test_a_newer_build_of_the_same_wheel_shadows_the_pin_and_a_removed_file_is_gone(tmp_path: Path) -> None:
    net = Net()
    rebuilt = TORCH.replace("cu128-", "cu128-1-")  # a build tag: what installers now take for torch==2.10.0+cu128
    _page(net, TORCH_INDEX, "torch", (TORCH, OLD), (rebuilt, NEW))
    _page(net, PYPI, "six")
    found = _check(net, _write(tmp_path)[0])
    torch, six = found["pylock.toml", "torch"], found["pylock.toml", "six"]
    assert (torch.status, torch.now) == (CHANGED, ((rebuilt, NEW),)) and "newer build" in torch.detail
    assert six.status == GONE and SIX_SHA in six.detail


def test_the_command_exits_4_5_0_and_2_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    pylock, _ = _write(tmp_path)
    net = Net()
    _page(net, PYPI, "six", (SIX, SIX_SHA))
    _page(net, TORCH_INDEX, "torch", (TORCH, NEW))
    monkeypatch.setattr("requests.Session", net.session)
    assert _main("lock", "check", str(pylock)) == 4
    out, err = capsys.readouterr()
    assert (
        f"changed     torch==2.10.0+cu128  {TORCH}: pinned sha256 {OLD}, {TORCH_INDEX} now serves sha256 {NEW}" in out
    )
    assert len(err.splitlines()) == 1 and "1 of 2 pins no longer hold" in err
    net.handlers.clear()
    _page(net, PYPI, "six", (SIX, SIX_SHA))
    _page(net, TORCH_INDEX, "torch", (TORCH, OLD))
    assert _main("lock", "check", str(pylock), "--json") == 0
    assert {f["status"] for f in json.loads(capsys.readouterr().out)["findings"]} == {HOLDS}
    net.handlers.insert(0, lambda sent: requests.ConnectionError("refused") if "pytorch" in sent.url else None)
    assert _main("lock", "check", str(pylock)) == 5
    assert UNREACHABLE in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text(pylock.read_text().replace('version = "2.10.0+cu128"', "version = "))
    assert _main("lock", "check", str(bad)) == 2
    assert f"{bad}:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("six==1.17.0\n", "requirements.txt:1: six: no --hash"),
        ("# c\nsix>=1 --hash=sha256:" + "c" * 64 + "\n", "requirements.txt:2: six: not pinned"),
        ('lock-version = "1.0"\n', "pylock.toml:1: no [[packages]]"),
        ('[[packages]]\nname = "six"\nversion = "1"\nwheels = [{ name = "x.whl" }]\n', "pylock.toml:1: package six"),
    ],
)
def test_a_lock_that_cannot_be_read_names_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    from builder.core.errors import UsageError

    path = tmp_path / message.split(":", 1)[0]
    path.write_text(text)
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_lock(path)


def _main(*argv: str) -> int:
    with pytest.raises(SystemExit) as caught:
        main(list(argv))
    return int(caught.value.code or 0)
