"""Provenance labels (org.opencontainers.image.source/revision/created): where they come from, what is left
out, and that they ride on the build without touching the content hash, the Dockerfile or the tags."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from fake_engine import FakeEngine, FakeRegistry, contents_of
from render_kit import plan

import builder.cli.build_cmd
import builder.engine
import builder.pipeline.pipeline
from builder.cli.main import main
from builder.core.provenance import CREATED, REVISION, SOURCE, provenance_labels, public_url
from builder.publish.export import bake
from builder.publish.items import expand
from builder.publish.plan import plan_publish

SHA = "3f786850e387550fdab836ed7e6dc881de23001b"
GITHUB = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "acme/images", "GITHUB_SHA": SHA}
IDENT = "torch2.14.1-cu130-py3.11-debian12"
PIN = ("--torch", "2.14.1", "--variant", "cu130", "--python", "3.11", "--os", "debian12", "--no-host-settings")


@pytest.mark.parametrize(
    ("remote", "url"),
    [
        ("https://github.com/acme/images.git", "https://github.com/acme/images"),
        ("https://x-access-token:ghp_SECRET@github.com/acme/images.git", "https://github.com/acme/images"),
        ("git@github.com:acme/images.git", "https://github.com/acme/images"),
        ("ssh://git@gitlab.example.com:2222/ml/images", "https://gitlab.example.com/ml/images"),
        ("http://git.internal:8080/ml/images/", "http://git.internal:8080/ml/images"),
        ("/srv/git/images.git", None),
        ("file:///srv/git/images.git", None),
        ("../images", None),
    ],
)
def test_a_remote_becomes_a_public_url_without_credentials(remote: str, url: str | None) -> None:
    assert public_url(remote) == url


def test_github_actions_names_the_repository_and_commit(tmp_path: Path) -> None:
    labels = provenance_labels(tmp_path, GITHUB | {"SOURCE_DATE_EPOCH": "1764460800"})
    assert labels == {
        SOURCE: "https://github.com/acme/images",
        REVISION: SHA,
        CREATED: "2025-11-30T00:00:00Z",
    }


def test_a_git_checkout_names_its_remote_and_head(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True)
        return done.stdout.strip()

    git("init", "-q")
    git("remote", "add", "origin", "https://bot:token123@git.example.org/ml/images.git")
    (tmp_path / "matrix.toml").write_text("")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "x")
    labels = provenance_labels(tmp_path, {"SOURCE_DATE_EPOCH": "0"})
    assert labels == {SOURCE: "https://git.example.org/ml/images", REVISION: git("rev-parse", "HEAD"),
                      CREATED: "1970-01-01T00:00:00Z"}  # fmt: skip
    assert "token123" not in str(labels)


@pytest.mark.parametrize(
    ("env", "left_out"),
    [
        ({"GITHUB_SHA": "not-a-commit"}, REVISION),
        ({"GITHUB_REPOSITORY": 'acme/images" --label x=y'}, SOURCE),
        ({"SOURCE_DATE_EPOCH": "yesterday"}, CREATED),
    ],
)
def test_a_value_that_cannot_be_trusted_is_left_out(tmp_path: Path, env: dict[str, str], left_out: str) -> None:
    labels = provenance_labels(tmp_path, GITHUB | {"SOURCE_DATE_EPOCH": "0"} | env)
    assert left_out not in labels and len(labels) == 2


def test_outside_git_and_ci_only_the_date_is_known(tmp_path: Path) -> None:
    assert set(provenance_labels(tmp_path, {})) == {CREATED}
    assert provenance_labels(tmp_path, GITHUB | {"TORCHYARD_PROVENANCE": "0"}) == {}


def test_build_passes_them_as_build_time_labels_and_the_content_hash_stays(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for key, value in (GITHUB | {"SOURCE_DATE_EPOCH": "0", "TORCHYARD_PROVENANCE": "1"}).items():
        monkeypatch.setenv(key, value)
    registry = FakeRegistry()
    engine = FakeEngine(contents_of(plan(IDENT)), registry=registry)
    for module in (builder.cli.build_cmd, builder.engine):
        monkeypatch.setattr(module, "DockerEngine", lambda: engine)
    monkeypatch.setattr(builder.pipeline.pipeline, "Registry", lambda auth: registry)

    with pytest.raises(SystemExit) as done:
        main(["build", *PIN, "--target", "runtime", "-o", str(tmp_path / "out")])
    assert done.value.code == 0, capsys.readouterr()
    (build,) = engine.of("build")
    argv = shlex.join(build.args)
    assert f"--label {SOURCE}=https://github.com/acme/images" in argv
    assert f"--label {REVISION}={SHA}" in argv and f"--label {CREATED}=1970-01-01T00:00:00Z" in argv
    p = plan(IDENT)
    assert f"io.torchyard.content-hash={p.content_hash}" in argv, "provenance is not content"
    assert SHA not in p.dockerfile and SHA not in p.target(p.targets[0].flavor).tags.immutable


def test_bake_targets_carry_them(tmp_path: Path) -> None:
    from render_kit import ROOT

    from builder.matrix import load_matrix

    m = load_matrix(ROOT / "matrix.toml")
    pplan = plan_publish(m, expand(m)[0][:1], [])
    labels = provenance_labels(tmp_path, GITHUB | {"SOURCE_DATE_EPOCH": "0"})
    data = bake(pplan, "r/x", tmp_path / "bake", None, labels)
    (image,) = [body for body in data["target"].values() if "inherits" in body]
    assert image["labels"][REVISION] == SHA and image["labels"][SOURCE] == "https://github.com/acme/images"
