"""`torchyard lock export`: the writers (pylock.toml read back with tomllib and checked field by field against
PEP 751; requirements.txt as pip reads it), the file each installed distribution came from, the image read
through the engine seam, and the command's bad input."""

from __future__ import annotations

import datetime
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from fake_engine import FakeEngine
from http_kit import Net, json_answer
from packaging.requirements import Requirement
from upstream_kit import build_wheel, serve_range

from builder.cli.main import main
from builder.core.errors import UsageError
from builder.engine import ImageInfo, RunResult
from builder.lock.export import default_indexes, export_image
from builder.lock.locate import PYPI, locate
from builder.lock.model import Artifact, Installed, Left, Lock, Locked
from builder.lock.writers import pylock_toml, requirements_txt
from builder.pipeline.image_set import ImageSet

SHA = {name: (name * 64)[:64] for name in "abcdef"}
TORCH_TAGS = ("cp311-cp311-manylinux_2_28_x86_64",)
TIME = "2025-11-12T17:45:30.123456Z"


def _lock(**changes: Any) -> Lock:
    wheel = Artifact(
        filename="torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        url="https://files/t.whl",
        size=900_000_000,
        sha256=SHA["a"],
        upload_time=TIME,
    )
    sdist = Artifact(
        filename="antlr4-python3-runtime-4.9.3.tar.gz",
        url="https://files/a.tar.gz",
        size=117_034,
        sha256=SHA["b"],
        upload_time=None,
    )
    values: dict[str, Any] = {
        "source": 'reg/x:1 "quoted" \\ (sha256:00)',
        "python": "3.11.2",
        "machine": "x86_64",
        "packages": (
            Locked(name="antlr4-python3-runtime", version="4.9.3", index=PYPI, artifact=sdist),
            Locked(name="torch", version="2.14.1", index="https://download.pytorch.org/whl/cu130", artifact=wheel),
        ),
        "left_out": (Left(name="addone", version="0.1.0", why="installed from file:///tmp/wheels/addone.whl"),),
    }
    return Lock(**(values | changes))


# -- pylock.toml (PEP 751) -------------------------------------------------------------------------------------


def test_pylock_toml_has_the_fields_pep_751_requires_with_their_types() -> None:
    doc = tomllib.loads(pylock_toml(_lock()))
    assert doc["lock-version"] == "1.0"
    assert doc["created-by"] == "torchyard"
    assert doc["requires-python"] == "==3.11.*"
    assert doc["environments"] == [
        'sys_platform == "linux" and platform_machine == "x86_64" and python_version == "3.11"'
    ]
    names = [p["name"] for p in doc["packages"]]
    assert names == sorted(names) == ["antlr4-python3-runtime", "torch"]
    for package in doc["packages"]:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", package["name"])  # normalised, as PEP 751 asks
        assert set(package) <= {"name", "version", "index", "wheels", "sdist"}
        files = package.get("wheels") or [package["sdist"]]
        assert len(files) == 1 and set(files[0]) <= {"name", "upload-time", "url", "size", "hashes"}
        assert re.fullmatch(r"[0-9a-f]{64}", files[0]["hashes"]["sha256"])


def test_a_wheel_is_an_array_of_tables_an_sdist_one_table_with_the_index_and_the_upload_time() -> None:
    doc = tomllib.loads(pylock_toml(_lock()))
    antlr, torch = doc["packages"]
    assert antlr["sdist"] == {
        "name": "antlr4-python3-runtime-4.9.3.tar.gz",
        "url": "https://files/a.tar.gz",
        "size": 117_034,
        "hashes": {"sha256": SHA["b"]},
    }
    assert torch["index"] == "https://download.pytorch.org/whl/cu130" and torch["version"] == "2.14.1"
    (wheel,) = torch["wheels"]
    assert wheel["upload-time"] == datetime.datetime(2025, 11, 12, 17, 45, 30, 123456, tzinfo=datetime.UTC)
    assert (wheel["name"], wheel["size"], wheel["hashes"]) == (
        "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        900_000_000,
        {"sha256": SHA["a"]},
    )


def test_what_is_left_out_and_the_source_are_in_the_tool_table_strings_escaped() -> None:
    doc = tomllib.loads(pylock_toml(_lock()))
    assert doc["tool"]["torchyard"]["source"] == 'reg/x:1 "quoted" \\ (sha256:00)'
    assert doc["tool"]["torchyard"]["left-out"] == [
        {"name": "addone", "version": "0.1.0", "why": "installed from file:///tmp/wheels/addone.whl"}
    ]


def test_an_upload_time_toml_cannot_hold_bare_is_left_out_not_quoted() -> None:
    odd = Artifact(
        filename="x-1-py3-none-any.whl", url="https://f/x.whl", size=None, sha256=SHA["c"], upload_time="yesterday"
    )
    doc = tomllib.loads(pylock_toml(_lock(packages=(Locked(name="x", version="1", index=PYPI, artifact=odd),))))
    assert doc["packages"][0]["wheels"][0] == {
        "name": "x-1-py3-none-any.whl",
        "url": "https://f/x.whl",
        "hashes": {"sha256": SHA["c"]},
    }


def test_the_same_lock_gives_the_same_bytes() -> None:
    assert pylock_toml(_lock()) == pylock_toml(_lock())
    assert requirements_txt(_lock()) == requirements_txt(_lock())


# -- requirements.txt ---------------------------------------------------------------------------------------------


def test_requirements_pin_every_package_with_its_hash_and_name_the_indexes() -> None:
    text = requirements_txt(_lock())
    logical = text.replace("\\\n", " ").splitlines()
    options = [line for line in logical if line.startswith("--")]
    assert options == ["--index-url https://download.pytorch.org/whl/cu130", f"--extra-index-url {PYPI}"]
    pins = [line for line in logical if line and not line.startswith(("#", "--"))]
    parsed = {}
    for line in pins:
        requirement, _, hashes = line.partition(" --hash=")
        parsed[Requirement(requirement).name] = (str(Requirement(requirement).specifier), hashes.strip())
    assert parsed == {
        "antlr4-python3-runtime": ("==4.9.3", f"sha256:{SHA['b']}"),
        "torch": ("==2.14.1", f"sha256:{SHA['a']}"),
    }
    assert "# left out: addone==0.1.0: installed from file:///tmp/wheels/addone.whl" in text


# -- the file each distribution came from -------------------------------------------------------------------


def _file(filename: str, sha: str | None, **more: Any) -> dict[str, Any]:
    entry = {"filename": filename, "url": f"https://files.example/{filename}", "hashes": {"sha256": sha} if sha else {}}
    return entry | {"size": 1234, "upload-time": TIME} | more


def _pypi(net: Net, project: str, *files: dict[str, Any], index: str = PYPI) -> None:
    net.route(
        "GET",
        f"{index}/{project}/",
        json_answer(
            {"meta": {"api-version": "1.1"}, "name": project, "files": list(files)},
            {"Content-Type": "application/vnd.pypi.simple.v1+json"},
        ),
    )


def _dist(name: str, version: str, tags: tuple[str, ...] = ("py3-none-any",), local: str | None = None) -> Installed:
    return Installed(name=name, version=version, tags=tags, installer="uv", local=local)


def test_the_wheel_with_exactly_the_installed_tags_is_chosen() -> None:
    net = Net()
    _pypi(
        net,
        "torch",
        _file("torch-2.14.1-cp311-cp311-manylinux_2_28_aarch64.whl", SHA["a"]),
        _file("torch-2.14.1-cp312-cp312-manylinux_2_28_x86_64.whl", SHA["b"]),
        _file("torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", SHA["c"]),
        _file("torch-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl", SHA["d"]),
    )
    found = locate(net.http(), _dist("torch", "2.14.1", TORCH_TAGS), (PYPI,))
    assert isinstance(found, Locked)
    assert (found.artifact.filename, found.artifact.sha256, found.index) == (
        "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        SHA["c"],
        PYPI,
    )
    assert (found.artifact.size, found.artifact.upload_time) == (1234, TIME)


def test_a_compressed_tag_set_matches_all_its_tags_and_the_first_index_that_has_it_wins() -> None:
    net = Net()
    torch_index = "https://download.pytorch.org/whl/cu130"
    _pypi(net, "six", _file("six-1.17.0-py2.py3-none-any.whl", SHA["e"]), index=torch_index)
    _pypi(net, "six", _file("six-1.17.0-py2.py3-none-any.whl", SHA["f"]))
    found = locate(net.http(), _dist("six", "1.17.0", ("py2-none-any", "py3-none-any")), (torch_index, PYPI))
    assert isinstance(found, Locked) and (found.index, found.artifact.sha256) == (torch_index, SHA["e"])


def test_a_distribution_no_index_has_is_left_out_with_what_was_looked_for() -> None:
    net = Net()
    _pypi(
        net,
        "torch",
        _file("torch-2.14.1-cp311-cp311-manylinux_2_28_aarch64.whl", SHA["a"]),
        _file("torch-2.14.1.tar.gz", SHA["b"]),
    )
    found = locate(net.http(), _dist("torch", "2.14.1", TORCH_TAGS), (PYPI,))
    assert found == Left(
        name="torch", version="2.14.1", why=f"no index has a wheel tagged {TORCH_TAGS[0]} ({PYPI})"
    )  # not the sdist: not built here


def test_a_wheel_built_in_the_image_from_source_is_locked_as_the_sdist() -> None:
    net = Net()
    _pypi(
        net,
        "antlr4-python3-runtime",
        _file("antlr4-python3-runtime-4.9.3.tar.gz", SHA["b"]),
        _file("antlr4-python3-runtime-4.9.2.tar.gz", SHA["a"]),
    )
    found = locate(net.http(), _dist("antlr4-python3-runtime", "4.9.3"), (PYPI,))
    assert isinstance(found, Locked) and found.artifact.filename.endswith("4.9.3.tar.gz") and not found.is_wheel


def _renamed_wheels(net: Net, *extra: dict[str, Any]) -> None:
    """torchaudio 2.11.1 as on PyPI: ...-py3-none-manylinux_2_28_x86_64.whl whose WHEEL says py3-none-linux_x86_64;
    beside it a wheel whose WHEEL agrees with its name (manylinux_2_17), and another machine's."""
    served = {}
    for filename, tag in (
        ("torchaudio-2.11.1-py3-none-manylinux_2_17_x86_64.whl", "py3-none-manylinux_2_17_x86_64"),
        ("torchaudio-2.11.1-py3-none-manylinux_2_28_x86_64.whl", "py3-none-linux_x86_64"),
        ("torchaudio-2.11.1-py3-none-manylinux_2_28_aarch64.whl", "py3-none-linux_aarch64"),
    ):
        wheel = f"Wheel-Version: 1.0\nGenerator: setuptools (84.0.0)\nRoot-Is-Purelib: false\nTag: {tag}\n"
        served[f"https://files.example/{filename}"] = build_wheel(filename, "Name: torchaudio\n", wheel=wheel)
    net.on(lambda sent: serve_range(sent, served[sent.url]) if sent.url in served else None)
    names = sorted(u.rsplit("/", 1)[1] for u in served)
    _pypi(net, "torchaudio", *[_file(n, SHA["abc"[i]]) for i, n in enumerate(names)], *extra)


def test_a_wheel_renamed_after_its_build_is_found_by_the_tags_its_own_wheel_file_records() -> None:
    net = Net()
    _renamed_wheels(net)
    found = locate(net.http(), _dist("torchaudio", "2.11.1", ("py3-none-linux_x86_64",)), (PYPI,))
    assert isinstance(found, Locked)
    assert found.artifact.filename == "torchaudio-2.11.1-py3-none-manylinux_2_28_x86_64.whl"
    assert all("aarch64" not in url for url in net.urls())  # only this machine's wheels are opened
    found = locate(net.http(), _dist("torchaudio", "2.11.1", ("py3-none-linux_aarch64",)), (PYPI,))
    assert isinstance(found, Locked) and found.artifact.filename.endswith("manylinux_2_28_aarch64.whl")


def test_a_wheel_whose_own_tags_differ_is_not_claimed_for_a_linux_tag_and_the_sdist_stands_in() -> None:
    net = Net()
    _renamed_wheels(net)
    found = locate(net.http(), _dist("torchaudio", "2.11.1", ("cp311-cp311-linux_x86_64",)), (PYPI,))
    assert isinstance(found, Left) and "cp311-cp311-linux_x86_64" in found.why  # built here: no file says so
    net = Net()
    _renamed_wheels(net, _file("torchaudio-2.11.1.tar.gz", SHA["d"]))
    found = locate(net.http(), _dist("torchaudio", "2.11.1", ("cp311-cp311-linux_x86_64",)), (PYPI,))
    assert isinstance(found, Locked) and found.artifact.filename == "torchaudio-2.11.1.tar.gz"


def test_a_file_without_a_hash_or_yanked_is_not_taken_and_a_local_install_asks_no_index() -> None:
    net = Net()
    _pypi(
        net,
        "six",
        _file("six-1.17.0-py3-none-any.whl", None),
        _file("six-1.17.0-py3-none-any.whl", SHA["a"], yanked="broken"),
    )
    assert isinstance(locate(net.http(), _dist("six", "1.17.0"), (PYPI,)), Left)
    local = locate(net.http(), _dist("addone", "0.1.0", local="file:///tmp/wheels/addone.whl"), (PYPI,))
    assert local == Left(
        name="addone", version="0.1.0", why="installed from file:///tmp/wheels/addone.whl, on no index"
    )
    assert all("addone" not in url for url in net.urls())


# -- the image, through the engine seam ---------------------------------------------------------------------------


def _image_report(*dists: dict[str, Any]) -> str:
    return json.dumps(
        {"schema": 1, "python": "3.11.2", "machine": "x86_64", "prefix": "/opt/venv", "dists": list(dists)}
    )


def _engine(output: str, code: int = 0) -> FakeEngine:
    engine = FakeEngine(contents={}, scripted={"python": RunResult(code, "a warning first\n" + output)})
    engine.images["sha256:1d"] = ImageInfo(id="sha256:1d", labels={}, tags=("reg/img:1",), digests=(), size=1)
    engine.tags["reg/img:1"] = "sha256:1d"
    return engine


def test_export_reads_the_image_and_writes_both_files(tmp_path: Path) -> None:
    net = Net()
    _pypi(net, "torch", _file("torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", SHA["c"]))
    engine = _engine(
        _image_report(
            {"name": "torch", "version": "2.14.1", "tags": list(TORCH_TAGS), "installer": "uv", "direct_url": None},
            {
                "name": "addone",
                "version": "0.1.0",
                "tags": ["cp311-cp311-linux_x86_64"],
                "installer": "pip",
                "direct_url": {
                    "url": "file:///tmp/wheels/addone-0.1.0-cp311-cp311-linux_x86_64.whl",
                    "archive_info": {},
                },
            },
        )
    )
    done = export_image(engine, net.http(), "reg/img:1", tmp_path / "out")
    assert [p.name for p in done.written] == ["pylock.toml", "requirements.txt"]
    doc = tomllib.loads((tmp_path / "out" / "pylock.toml").read_text())
    assert [p["name"] for p in doc["packages"]] == ["torch"]
    assert doc["tool"]["torchyard"]["source"] == "reg/img:1 (sha256:1d)"
    assert [x["name"] for x in doc["tool"]["torchyard"]["left-out"]] == ["addone"]
    run = engine.of("run")[0]
    assert run.args[1:3] == ("python", "-c") and "importlib" in run.args[3]  # the image's own Python reads it
    assert done.indexes == (PYPI,)


def test_a_pytorch_index_build_is_looked_for_on_its_index_first() -> None:
    torch = _dist("torch", "2.5.1+cu124", TORCH_TAGS)
    image = ImageSet("r", "sha256:1", "3.11.2", "x86_64", (torch,))
    assert default_indexes(image) == ("https://download.pytorch.org/whl/cu124", PYPI)


def test_an_image_not_in_the_engine_or_without_python_is_one_usage_error(tmp_path: Path) -> None:
    engine = _engine("")
    with pytest.raises(UsageError, match="no image 'reg/other:1' in the engine"):
        export_image(engine, Net().http(), "reg/other:1", tmp_path)
    engine.no_python = True
    engine.scripted = {"python3": RunResult(127, "not found")}
    with pytest.raises(UsageError, match=r"reg/img:1: no python or python3 in the image"):
        export_image(engine, Net().http(), "reg/img:1", tmp_path)
    assert not (tmp_path / "pylock.toml").exists()


def test_the_command_refuses_an_index_url_with_credentials_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["lock", "export", "reg/img:1", "--index-url", "https://u:secret@idx/simple"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        "torchyard: error: --index-url 'https://***@idx/simple': credentials would land in the lock files\n"
    )
