"""Exports of the publish set: the GitHub Actions matrix (its commands reproduce exactly the item's image)
and docker-bake.json (one common target per shared plan, item targets inheriting it)."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from publish_kit import matrix_with

from builder.cli.main import main
from builder.matrix import Matrix
from builder.pipeline.plan import make_plan
from builder.publish.export import GPU_RUNNER, HOSTED_RUNNER, Assurance, bake, build_flags, github_matrix
from builder.publish.items import Item, expand
from builder.publish.plan import plan_publish
from builder.render.network import Network

SET = """
[[publish]]
name = "pair"
torch = "==2.14.1"
os = ["debian12"]
flavors = ["runtime", "devel"]

[[publish]]
name = "cpu"
torch = "==2.14.1"
variants = ["cpu"]
os = ["debian12"]
flavors = ["runtime"]

[[publish]]
name = "ada"
torch = "==2.15.0"
python = ["3.12"]
os = ["debian12"]
flavors = ["runtime"]
archs = ["sm_89"]
pip = ["einops==0.8.1"]
"""
REPO = "ghcr.io/acme/torch"
CANDIDATES = "ghcr.io/acme/torch-candidates"


@pytest.fixture
def m(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    return matrix_with(SET, tmp_path_factory.mktemp("export"))


@pytest.fixture
def items(m: Matrix) -> list[Item]:
    return expand(m)[0]


def test_one_github_job_per_item_gpu_smoke_only_for_cuda_images(m: Matrix, items: list[Item]) -> None:
    jobs = github_matrix(plan_publish(m, items, []), REPO, CANDIDATES, "all")["include"]
    assert [j["id"] for j in jobs] == [i.id for i in items] and len(jobs) == 4
    by_id = {j["id"]: j for j in jobs}
    cpu = by_id["torch2.14.1-cpu-py3.11-debian12-runtime"]
    assert (cpu["gpu"], cpu["smoke-runs-on"]) == (False, HOSTED_RUNNER)
    assert "--gpus" not in cpu["smoke"] and "--require-gpu" not in cpu["smoke"]
    cuda = by_id["torch2.14.1-cu130-py3.11-debian12-devel"]
    assert (cuda["gpu"], cuda["smoke-runs-on"], cuda["runs-on"]) == (True, GPU_RUNNER, HOSTED_RUNNER)
    assert cuda["smoke"].endswith("--gpus all --require-gpu")
    no_gpus = github_matrix(plan_publish(m, items, []), REPO, CANDIDATES, None)["include"]
    assert {j["smoke-runs-on"] for j in no_gpus} == {HOSTED_RUNNER}


def test_the_build_command_of_each_job_reproduces_its_items_image(
    m: Matrix, items: list[Item], capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for job, item in zip(
        github_matrix(plan_publish(m, items, []), REPO, CANDIDATES, "all")["include"], items, strict=True
    ):
        argv = shlex.split(job["build"])
        assert argv[:2] == ["torchyard", "build"] and argv[-3:] == ["--repo", CANDIDATES, "--push"]
        with pytest.raises(SystemExit) as exit_:
            main(["--matrix", m.path, *argv[1:], "--dry-run"])
        assert exit_.value.code == 0
        printed = capsys.readouterr().out
        plan = make_plan(m, item.combo, item.options)
        immutable = plan.target(item.flavor).tags.immutable
        assert f"content hash: {plan.content_hash}\n" in printed
        assert re.search(rf"^    {re.escape(CANDIDATES)}:{re.escape(immutable)}$", printed, re.M)
        assert job["image"] == f"{REPO}:{immutable}"
        assert shlex.split(job["smoke"])[:3] == ["docker", "pull", f"{CANDIDATES}:{immutable}"]
        assert shlex.split(job["push"]) == [
            "torchyard",
            "promote",
            f"{CANDIDATES}:{immutable}",
            f"{REPO}:{immutable}",
            "--content-hash",
            plan.content_hash,
        ]
        assert shlex.split(job["publish"])[:4] == ["torchyard", "publish", "--only", item.id]


def _bake(m: Matrix, items: list[Item], out: Path, cache: str | None) -> dict[str, Any]:
    return bake(plan_publish(m, items, []), REPO, out, cache)


def test_bake_has_one_common_target_per_plan_and_one_target_per_image(
    m: Matrix, items: list[Item], tmp_path: Path
) -> None:
    data = _bake(m, items, tmp_path, None)
    targets = data["target"]
    commons = {name for name, body in targets.items() if "context" in body}
    images = [name for name, body in targets.items() if "inherits" in body]
    assert len(commons) == 3 and len(images) == 4
    assert data["group"] == {"default": {"targets": images}}
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", name) for name in targets)
    runtime, devel = (targets[n] for n in images[:2])
    assert runtime["inherits"] == devel["inherits"], "runtime and devel share their stages"
    assert (runtime["target"], devel["target"]) == ("runtime", "devel")
    for name in commons:
        assert "cache-from" not in targets[name] and "cache-to" not in targets[name]


def test_bake_targets_carry_the_tags_labels_and_a_written_context(m: Matrix, items: list[Item], tmp_path: Path) -> None:
    data = _bake(m, items, tmp_path, None)
    for item in items:
        plan = make_plan(m, item.combo, item.options)
        name = re.sub(r"[^A-Za-z0-9_-]", "_", item.id)
        body = data["target"][name]
        target = plan.target(item.flavor)
        assert body["tags"][0] == f"{REPO}:{target.tags.immutable}"
        assert body["tags"][1:] == [f"{REPO}:{a}" for a in target.tags.aliases]
        assert body["labels"]["io.torchyard.content-hash"] == plan.content_hash
        common = data["target"][body["inherits"][0]]
        dockerfile = Path(common["context"]) / common["dockerfile"]
        digest = hashlib.sha256(dockerfile.read_bytes()).hexdigest()
        assert body["labels"]["io.torchyard.dockerfile-sha256"] == digest
        assert common["args"] == dict(plan.build_args)
        assert all(not s.endswith("src=generated") for s in common["secret"])
        assert common["attest"] == ["type=provenance,disabled=true"]  # the digests `torchyard build` gives


def test_bake_with_a_cache_repo_reads_and_writes_the_registry_cache(
    m: Matrix, items: list[Item], tmp_path: Path
) -> None:
    data = _bake(m, items, tmp_path, "ghcr.io/acme/cache")
    for name, body in data["target"].items():
        if "context" in body:
            assert body["cache-from"] == [f"type=registry,ref=ghcr.io/acme/cache:{name}"]
            assert body["cache-to"] == [f"type=registry,ref=ghcr.io/acme/cache:{name},mode=max"]


def test_matrix_ci_bake_writes_the_file_and_says_how_to_run_it(
    m: Matrix, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "bake"
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", m.path, "matrix", "ci", "--format", "bake", "-o", str(out), "--only", "*-cu130-*"])
    assert exit_.value.code == 0
    data = json.loads((out / "docker-bake.json").read_text())
    assert len(data["group"]["default"]["targets"]) == 2
    assert capsys.readouterr().out == (
        f"wrote {out}/docker-bake.json (2 image targets): docker buildx bake -f {out}/docker-bake.json\n"
    )


def test_a_refresh_token_reaches_every_command_and_the_bake_args(m: Matrix, tmp_path: Path) -> None:
    items = expand(m, refresh="2026-W48")[0]
    for job in github_matrix(plan_publish(m, items, []), REPO, CANDIDATES, "all")["include"]:
        for command in (job["build"], job["publish"]):
            argv = shlex.split(command)
            assert argv[argv.index("--refresh") + 1] == "2026-W48"
    data = bake(plan_publish(m, items, []), REPO, tmp_path, None)
    commons = [body for body in data["target"].values() if "context" in body]
    assert commons and all(body["args"]["OS_REFRESH"] == "2026-W48" for body in commons)
    assert all(b["labels"]["io.torchyard.refresh"] == "2026-W48" for b in data["target"].values() if "inherits" in b)


def test_a_refreshed_candidate_is_promoted_with_keep_unchanged_and_a_plain_one_without(m: Matrix) -> None:
    """The weekly refresh's promote keeps a public image whose packages did not move (builder/publish/
    promote_refresh.py), after --content-hash and before --attest."""
    for refresh, expected in (("2026-W48", ["--keep-unchanged"]), ("", [])):
        pplan = plan_publish(m, expand(m, refresh=refresh)[0], [])
        for job in github_matrix(pplan, REPO, CANDIDATES, "all", Assurance(attest=True))["include"]:
            argv = shlex.split(job["push"])
            assert argv[4] == "--content-hash" and argv[6:] == [*expected, "--attest"]


def test_the_assurance_flags_reach_the_build_publish_and_promote_commands_and_run(
    m: Matrix, items: list[Item], capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    allow = tmp_path / "allow.json"
    allow.write_text("{}")
    assurance = Assurance(attest=True, gate=True, allowlist=str(allow))
    for job in github_matrix(plan_publish(m, items, []), REPO, CANDIDATES, "all", assurance)["include"]:
        build = shlex.split(job["build"])
        assert build[-7:] == ["--attest", "--security-gate", "--allowlist", str(allow), "--repo", CANDIDATES, "--push"]
        assert shlex.split(job["push"])[-1] == "--attest" and "--sign-key" not in job["push"]  # the key: env only
        assert shlex.split(job["publish"])[-4:] == ["--attest", "--security-gate", "--allowlist", str(allow)]
        with pytest.raises(SystemExit) as exit_:
            main(["--matrix", m.path, *build[1:], "--dry-run"])
        assert exit_.value.code == 0, capsys.readouterr().err
    plain = github_matrix(plan_publish(m, items, []), REPO, CANDIDATES, "all")["include"][0]
    assert "--attest" not in plain["build"] + plain["push"] and "--security-gate" not in plain["build"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["build", "--allowlist", "a.json", "--dry-run"], "--allowlist is the security gate's: give --security-gate"),
        (["build", "--security-gate", "--allowlist", "nowhere.json", "--dry-run"], "nowhere.json"),
        (["matrix", "ci", "--format", "bake", "--attest"], "not --format bake"),
        (["matrix", "ci", "--format", "github", "--allowlist", "a.json"], "give --security-gate too"),
    ],
)
def test_bad_gate_and_attest_flags_are_one_line_and_exit_2(
    m: Matrix, argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", m.path, *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and err.count("\n") == 1, err


def test_a_refresh_token_comes_after_the_other_flags_which_it_leaves_as_they_were(m: Matrix) -> None:
    plain, refreshed = expand(m)[0], expand(m, refresh="2026-W48")[0]
    assert [i.id for i in plain] == [i.id for i in refreshed] and plain
    for before, after in zip(plain, refreshed, strict=True):
        flags = build_flags(after)
        at = flags.index("--refresh")
        assert flags[at : at + 2] == ["--refresh", "2026-W48"]
        assert flags[:at] + flags[at + 2 :] == build_flags(before)


def test_bake_hands_buildx_the_host_s_files_as_secrets_never_the_generated_pip_conf(
    m: Matrix, items: list[Item], tmp_path: Path
) -> None:
    """The pip.conf torchyard writes at build time (it may hold the index's credentials) is no file bake could
    read: a bake user gives the index through its own secret; the CA bundle is a file on the host."""
    network = Network(ca_bundle=Path("/etc/ssl/certs/corp.pem"), pip_index_url="https://u:p@pypi.corp/simple")
    with_network = [replace(i, options=replace(i.options, network=network)) for i in items]
    data = bake(plan_publish(m, with_network, []), REPO, tmp_path, None)
    commons = [body for body in data["target"].values() if "context" in body]
    assert commons and all(body["secret"] == ["id=cacert,src=/etc/ssl/certs/corp.pem"] for body in commons)
    assert "u:p" not in json.dumps(data)
