"""The JSON copy of the packaged matrix's TOML parse: used when the text is the same, never stale."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from matrix_kit import BASE

from builder.matrix import doccache
from builder.matrix.doccache import TomlSyntaxError, cache_file, parse_toml
from builder.matrix.loader import _load


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cache"
    monkeypatch.setenv(doccache.CACHE_HOME_ENV, str(home))
    return home


def test_a_parse_is_stored_and_reused(cache_home: Path) -> None:
    assert parse_toml(BASE, cache=True) == tomllib.loads(BASE)
    path = cache_file(BASE)
    assert path is not None and path.parent == cache_home / "torchyard" and path.exists()
    # Proof that the copy is what gets used: tamper with it, and the tampered content comes back.
    path.write_text('{"schema": 7}')
    assert parse_toml(BASE, cache=True) == {"schema": 7}


def test_the_key_is_the_text() -> None:
    other = BASE.replace('title = "PyPI"', 'title = "PyPI (edited)"')
    assert cache_file(BASE) != cache_file(other)
    parse_toml(BASE, cache=True)
    assert parse_toml(other, cache=True)["sources"]["pypi"]["title"] == "PyPI (edited)"


def test_without_cache_nothing_is_written(cache_home: Path) -> None:
    assert parse_toml(BASE) == tomllib.loads(BASE)
    assert not cache_home.exists()


def test_a_broken_copy_is_parsed_again_and_replaced() -> None:
    path = cache_file(BASE)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert parse_toml(BASE, cache=True) == tomllib.loads(BASE)
    assert parse_toml(BASE, cache=True) == tomllib.loads(BASE)
    assert path.read_text().startswith('{"schema":1')


def test_an_unusable_cache_directory_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(doccache.CACHE_HOME_ENV, str(blocker))  # cannot hold a directory
    assert parse_toml(BASE, cache=True) == tomllib.loads(BASE)


def test_documents_without_a_json_form_are_not_stored() -> None:
    text = "schema = 1\nreleased = 2024-11-01\n"
    assert str(parse_toml(text, cache=True)["released"]) == "2024-11-01"
    path = cache_file(text)
    assert path is not None and not path.exists()


def test_syntax_errors_keep_tomllibs_position() -> None:
    with pytest.raises(TomlSyntaxError, match=r"^Invalid value \(at line 1, column 10\)$"):
        parse_toml("schema = = 1", cache=True)


def test_a_cached_load_gives_the_same_matrix(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(BASE)
    fresh = _load(path)
    assert _load(path, cache=True) == fresh  # stores
    assert _load(path, cache=True) == fresh  # reads


def test_a_relative_cache_home_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(doccache.CACHE_HOME_ENV, "relative/cache")
    assert cache_file(BASE) is None
    assert parse_toml(BASE, cache=True) == tomllib.loads(BASE)
