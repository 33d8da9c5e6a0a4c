"""`torchyard build` and `torchyard smoke`, run in-process through builder.cli.main.main: the dry-run plan,
refusals with lookup's reasons, argument errors (exit 2, one line), and real builds against the fake engine
with each error turned into one line and its exit code."""

from __future__ import annotations

import io
import json
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fake_engine import FakeEngine, FakeRegistry, contents_of
from render_kit import EXAMPLE_EXTENSION, addone, arch, no_host_network, plan

import builder.cli.build_cmd
import builder.cli.smoke_cmd
import builder.pipeline.multiplatform
import builder.pipeline.pipeline
from builder.cli.main import main
from builder.core.errors import BuildError, EngineError, Interrupted, PushError
from builder.core.kinds import Platform
from builder.engine import ImageInfo, RegistryAuth
from builder.pipeline.plan import Plan

IDENT = "torch2.14.1-cu130-py3.11-debian12"
PIN = ("--torch", "2.14.1", "--variant", "cu130", "--python", "3.11", "--os", "debian12", "--no-host-settings")
TENSORRT_LINE = (
    "inference: no TensorRT in the image: its PyPI packages are stubs that download from NVIDIA's index "
    "(https://pypi.org/project/tensorrt/) (--tensorrt with --nvidia-index-url asks for it)"
)
REPO = "127.0.0.1:5000/team/torch"
INDEX = "https://alice:s3cr3t@pypi.corp.example/simple"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


Cli = Callable[..., Run]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name in ("TORCHYARD_DEBUG", "TORCHYARD_MATRIX", "TORCHYARD_REGISTRY_USER", "TORCHYARD_REGISTRY_PASSWORD"):
        monkeypatch.delenv(name, raising=False)

    def run(*args: str) -> Run:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        out, err = capsys.readouterr()
        assert isinstance(exc.value.code, int)
        return Run(exc.value.code, out, err)

    return run


@dataclass
class Engines:
    """What `torchyard build` / `smoke` get for DockerEngine() and Registry(...); None: the test fails if used."""

    engine: FakeEngine | None = None
    registry: FakeRegistry | None = None
    auth: list[RegistryAuth | None] | None = None


@pytest.fixture
def engines(monkeypatch: pytest.MonkeyPatch) -> Iterator[Engines]:
    chosen = Engines(auth=[])

    def engine() -> FakeEngine:
        assert chosen.engine is not None, "this command must not reach the Docker engine"
        return chosen.engine

    def registry(auth: RegistryAuth | None) -> FakeRegistry:
        assert chosen.registry is not None, "this command must not reach a registry"
        assert chosen.auth is not None
        chosen.auth.append(auth)
        return chosen.registry

    monkeypatch.setattr(builder.cli.build_cmd, "DockerEngine", engine)
    monkeypatch.setattr(builder.cli.smoke_cmd, "DockerEngine", engine)
    monkeypatch.setattr(builder.pipeline.pipeline, "Registry", registry)
    monkeypatch.setattr(builder.pipeline.multiplatform, "Registry", registry)
    yield chosen


# --- --dry-run ----------------------------------------------------------------------------------------------


def _target_lines(p: Plan, flavor: str, out: Path, secrets: tuple[str, ...] = (), push: bool = False) -> list[str]:
    target = next(t for t in p.targets if t.flavor.value == flavor)
    argv = ["docker", "build", "--progress=plain", "--target", flavor, "-f", f"{out}/Dockerfile"]
    argv += ["--platform", "linux/amd64", *secrets]
    argv += ["--label", f"io.torchyard.content-hash={p.content_hash}"]
    argv += ["--label", f"io.torchyard.dockerfile-sha256={p.dockerfile_sha256}", str(out)]
    lines = [
        "",
        f"[{flavor}]",
        "  " + shlex.join(argv),
        "  then: label check, smoke suite (no-GPU checks), tag check, then tag:",
    ]
    lines += [f"    {REPO}:{tag}" for tag in target.tags.all()]
    if push:
        lines.append("  then push (immutable tag first, then aliases), skipped where the registry has this hash")
    return lines


def test_dry_run_prints_the_plan_and_builds_nothing(cli: Cli, engines: Engines, tmp_path: Path) -> None:
    out = tmp_path / "ctx"
    extension = str(EXAMPLE_EXTENSION)
    r = cli("build", "--dry-run", *PIN, "--arch", "sm_89", "--extension", extension, "--target", "all",
            "--repo", REPO, "--push", "-o", str(out))  # fmt: skip
    p = plan(IDENT, archs=(arch("sm_89"),), extensions=(addone(),))
    assert (r.code, r.err) == (0, f"torchyard: {TENSORRT_LINE}\n")
    assert r.out.splitlines() == [
        f"chose {IDENT} (the best of 1 valid combinations)",
        f"Dockerfile: {out}/Dockerfile when built (sha256 {p.dockerfile_sha256[:16]}...; not written)",
        f"content hash: {p.content_hash}",
        *_target_lines(p, "runtime", out, push=True),
        *_target_lines(p, "devel", out, push=True),
        *_target_lines(p, "inference", out, push=True),
    ]
    assert "2.14.1-cuda13.0-cudnn9-py3.11-debian12-devel-sm89-x87ade0f8" in r.out


def test_dry_run_names_the_secrets_and_never_their_content(cli: Cli, engines: Engines, tmp_path: Path) -> None:
    ca = tmp_path / "corp-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nTORCHYARD-TEST-CA\n-----END CERTIFICATE-----\n")
    out = tmp_path / "ctx"
    r = cli("build", "--dry-run", *PIN, "--ca-bundle", str(ca), "--pip-index-url", INDEX, "--repo", REPO,
            "-o", str(out))  # fmt: skip
    p = plan(IDENT, network=no_host_network(ca_bundle=str(ca), pip_index_url=INDEX))
    secrets = ("--secret", f"id=cacert,src={ca}", "--secret", "id=pipconf,src=<generated 0600 file>")
    assert (r.code, r.err) == (0, "")
    assert r.out.splitlines() == [
        f"chose {IDENT} (the best of 1 valid combinations)",
        f"Dockerfile: {out}/Dockerfile when built (sha256 {p.dockerfile_sha256[:16]}...; not written)",
        f"content hash: {p.content_hash}",
        "network: CA bundle from --ca-bundle",
        "network: pip index from --pip-index-url",
        f"secret cacert: CA bundle for pip and apt (from {ca})",
        "secret pipconf: pip.conf with index https://***@pypi.corp.example/simple (from generated)",
        *_target_lines(p, "runtime", out, secrets),
    ]
    assert "s3cr3t" not in r.out and "TORCHYARD-TEST-CA" not in r.out


def test_only_an_arch_picks_the_best_combination_for_it(cli: Cli, engines: Engines, tmp_path: Path) -> None:
    r = cli("build", "--dry-run", "--arch", "sm_89", "--no-host-settings", "-o", str(tmp_path))
    assert (r.code, r.err) == (0, "")
    first = r.out.splitlines()[0]
    assert first.startswith("chose torch") and first.endswith("valid combinations)")
    assert "-runtime-sm89\n" in r.out


def test_an_impossible_request_is_refused_with_lookups_reasons(cli: Cli, engines: Engines, tmp_path: Path) -> None:
    r = cli("build", "--arch", "sm_120", "--torch", "2.6.0", "--no-host-settings", "-o", str(tmp_path))
    assert (r.code, r.out) == (1, "")
    lines = r.err.splitlines()
    assert lines[0].startswith("torchyard: error: no valid combination (") and lines[0].endswith(" ruled out)")
    assert (
        "  sm_120 has no runnable code in torch 2.6.0+cu124 (sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90; no PTX)"
        "  (13 combinations)"  # 5 Pythons on debian13, 5 on debian12, 1 on each Ubuntu
    ) in lines
    assert not list(tmp_path.iterdir())


# --- argument errors: exit 2, one line, before any engine ---------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--gpus", "banana"), {}, "--gpus: 'banana' is not all, none or a positive number of GPUs"),
        (("--gpus", "-1"), {}, "--gpus: '-1' is not all, none or a positive number of GPUs"),
        ((), {"TORCHYARD_REGISTRY_PASSWORD": "pw"}, "a registry password without --registry-user"),
        (
            ("--registry-user", "ci"),
            {},
            "--registry-user ci: no password (set $TORCHYARD_REGISTRY_PASSWORD or use --registry-password-stdin)",
        ),
        (("--strategy", "wheel"), {}, "--strategy: 'wheel' is not one of wheels, cuda-base (did you mean 'wheels'?)"),
    ],
)
def test_bad_build_arguments_are_one_line_and_exit_2(
    cli: Cli,
    engines: Engines,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    args: tuple[str, ...],
    env: dict[str, str],
    message: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    r = cli("build", *PIN, *args, "-o", str(tmp_path / "ctx"))
    assert r.code == 2
    assert r.err == f"torchyard: error: {message}\n"


def test_an_unknown_target_is_refused_with_the_choices(cli: Cli, engines: Engines) -> None:
    r = cli("build", *PIN, "--target", "debug")
    assert (r.code, r.out) == (2, "")
    assert r.err == "torchyard: error: --target: 'debug' is not one of runtime, devel, inference, notebook, all\n"


# --- real builds against the fake engine -----------------------------------------------------------------------


def use_fake(engines: Engines, p: Plan, **knobs: object) -> FakeEngine:
    engines.registry = FakeRegistry()
    engines.engine = FakeEngine(contents_of(p), registry=engines.registry)
    for name, value in knobs.items():
        setattr(engines.engine, name, value)
    return engines.engine


def test_a_build_prints_its_steps_and_a_summary(cli: Cli, engines: Engines, tmp_path: Path) -> None:
    fake = use_fake(engines, plan(IDENT))
    out = tmp_path / "ctx"
    r = cli("build", *PIN, "--repo", REPO, "-o", str(out))
    assert (r.code, r.err) == (0, "")
    lines = r.out.splitlines()
    assert lines[0] == f"chose {IDENT} (the best of 1 valid combinations)"
    assert (
        f"[runtime] tagged {REPO}:2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime, "
        f"{REPO}:2.14-cuda13.0-py3.11-debian12-runtime" in lines
    )
    assert lines[-1].startswith(f"runtime  built       {REPO}:2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime ")
    assert lines[-1].endswith(" (runtime 12s)")  # the fake build: #7 DONE 12.3s (stages < 0.5 s left out)
    assert (out / "plan.json").is_file()
    report = json.loads((out / "build-report.json").read_text())
    runtime = report["targets"]["runtime"]
    assert (report["schema"], runtime["status"], runtime["stages"]["runtime"]) == (1, "built", 12.3)
    assert set(runtime["stages"]) == {"runtime", "smoke"} and runtime["pushed"] == []
    assert fake.pushed() == []


def test_a_push_build_reads_the_password_from_stdin(
    cli: Cli, engines: Engines, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = use_fake(engines, plan(IDENT))
    monkeypatch.setattr("sys.stdin", io.StringIO("registry-pa55\n"))
    r = cli("build", *PIN, "--repo", REPO, "--push", "--registry-user", "ci", "--registry-password-stdin",
            "-o", str(tmp_path / "ctx"))  # fmt: skip
    assert (r.code, r.err) == (0, "")
    assert engines.auth == [RegistryAuth("ci", "registry-pa55")]
    assert [c.auth for c in fake.of("push")] == [RegistryAuth("ci", "registry-pa55")]  # the alias: registry-side
    assert "registry-pa55" not in r.out
    assert r.out.splitlines()[-1].endswith(", pushed 2 tag(s)")


def test_the_pip_index_reaches_the_build_as_a_generated_secret(cli: Cli, engines: Engines, tmp_path: Path) -> None:
    seen: list[str] = []

    def during_build(argv: list[str]) -> None:
        [spec] = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--secret"]
        seen.append(Path(spec.removeprefix("id=pipconf,src=")).read_text())

    use_fake(engines, plan(IDENT, network=no_host_network(pip_index_url=INDEX)), on_build=during_build)
    r = cli("build", *PIN, "--pip-index-url", INDEX, "--repo", REPO, "-o", str(tmp_path / "ctx"))
    assert (r.code, r.err) == (0, "")
    assert seen == [f"[global]\nindex-url = {INDEX}\n"]
    assert "s3cr3t" not in r.out


@pytest.mark.parametrize(
    ("knob", "value", "code", "err"),
    [
        ("info_error", EngineError("no Docker engine answers at unix:///var/run/docker.sock: start dockerd"), 3,
         "torchyard: error: no Docker engine answers at unix:///var/run/docker.sock: start dockerd\n"),
        ("fail_build", BuildError("docker build failed (exit 1): #7 ERROR: process did not complete"), 4,
         "torchyard: error: docker build failed (exit 1): #7 ERROR: process did not complete. Log: {log}\n"),
        ("smoke_failures", {"libs.cuda": "libcudnn.so.9 did not load"}, 4,
         "torchyard: error: [runtime] smoke suite failed, nothing tagged: libs.cuda: libcudnn.so.9 did not load\n"),
        ("fail_push", PushError("push r: denied: requested access to the resource is denied"), 5,
         "torchyard: error: push r: denied: requested access to the resource is denied\n"),
        ("fail_build", Interrupted("interrupted while running /usr/bin/docker build"), 130,
         "torchyard: error: interrupted while running /usr/bin/docker build\n"),
        ("fail_build", KeyboardInterrupt(), 130,
         "\ntorchyard: error: interrupted: nothing unverified was tagged or pushed\n"),
    ],
)  # fmt: skip
def test_each_failure_is_one_line_with_its_exit_code(
    cli: Cli, engines: Engines, tmp_path: Path, knob: str, value: object, code: int, err: str
) -> None:
    fake = use_fake(engines, plan(IDENT), **{knob: value})
    r = cli("build", *PIN, "--repo", REPO, "--push", "-o", str(tmp_path / "ctx"))
    assert (r.code, r.err) == (code, err.format(log=tmp_path / "ctx" / "build-runtime.log"))  # a build's log: its path
    assert "Traceback" not in r.out + r.err
    if knob != "fail_push":
        assert fake.tags == {}
    assert engines.registry is not None and engines.registry.refs == {}


def test_debug_shows_the_traceback(cli: Cli, engines: Engines, tmp_path: Path) -> None:
    use_fake(engines, plan(IDENT), fail_build=BuildError("docker build failed (exit 1): boom"))
    with pytest.raises(BuildError, match="boom"):
        main(["--debug", "build", *PIN, "-o", str(tmp_path / "ctx")])


# --- torchyard smoke -------------------------------------------------------------------------------------------------


def smoke_engine(engines: Engines, ours: bool = True) -> FakeEngine:
    fake = use_fake(engines, plan(IDENT))
    labels = {"io.torchyard.version": "0.1.0"} if ours else {}
    fake.images["sha256:1"] = ImageInfo(id="sha256:1", labels=labels, tags=("img:t",), digests=(), size=1)
    fake.tags["img:t"] = "sha256:1"
    fake.built_target["sha256:1"] = "runtime"
    return fake


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--gpus", "two"), "--gpus: 'two' is not all, none or a positive number of GPUs"),
        (
            ("--expect-value", "torch"),
            "--expect-value 'torch': expected KEY=VERSION with KEY one of "
            "torch, torchvision, torchaudio, cuda, cudnn, nccl, python, os",
        ),
        (
            ("--expect-value", "colour=red"),
            "--expect-value 'colour=red': expected KEY=VERSION with KEY one of "
            "torch, torchvision, torchaudio, cuda, cudnn, nccl, python, os",
        ),
        (
            ("--only", "gpu.", "--only", "gpus"),
            "--only 'gpus': no check's name starts with it (e.g. arch., compile., ddp., determinism., devel., "
            "gpu., hygiene., import., libs., notebook., onnx., profiler., train., version.)",
        ),
        (("--only", ""), "--only '': an empty prefix names no check (leave --only out to run every check)"),
    ],
)
def test_bad_smoke_arguments_are_refused_before_the_engine(
    cli: Cli, engines: Engines, args: tuple[str, ...], message: str
) -> None:
    fake = smoke_engine(engines)
    fake.info_error = EngineError("no Docker engine answers at unix:///var/run/docker.sock")
    r = cli("smoke", "img:t", *args)
    assert (r.code, r.err) == (2, f"torchyard: error: {message}\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "torchyard smoke: Missing argument 'IMAGE'."),
        (("img:t", "--expect", "/nonexistent/m.json"), "--expect /nonexistent/m.json: cannot read: No such file or "
         "directory"),
    ],
)  # fmt: skip
def test_smoke_usage_errors(cli: Cli, engines: Engines, args: tuple[str, ...], message: str) -> None:
    r = cli("smoke", *args)
    assert (r.code, r.err) == (2, f"torchyard: error: {message}\n")


def test_smoke_of_an_image_the_engine_lacks(cli: Cli, engines: Engines) -> None:
    smoke_engine(engines)
    r = cli("smoke", "nope:1")
    assert (r.code, r.err) == (2, "torchyard: error: smoke: no image 'nope:1' in the engine (pull or build it first)\n")


def test_smoke_writes_json_and_junit_and_exits_by_the_report(cli: Cli, engines: Engines, tmp_path: Path) -> None:
    fake = smoke_engine(engines)
    report, junit = tmp_path / "smoke.json", tmp_path / "junit.xml"
    r = cli("smoke", "img:t", "--expect-value", "torch=2.14.1+cu130", "--report", str(report), "--junit", str(junit))
    assert (r.code, r.out, r.err) == (0, "1 passed, 0 failed\n", "")
    assert '"observed"' in report.read_text() and junit.read_text().startswith("<testsuite")
    [run] = fake.of("run")
    assert run.args[1:3] == ("python", "/opt/torchyard/smoke")
    assert run.args[-2:] == ("--expect-torch", "2.14.1+cu130")
    fake.smoke_failures = {"version.torch": "the image has 2.13.0"}
    assert cli("smoke", "img:t").code == 4  # the README's code for a failed smoke suite


def test_smoke_only_passes_each_prefix_to_the_suite(cli: Cli, engines: Engines) -> None:
    fake = smoke_engine(engines)
    assert cli("smoke", "img:t", "--only", "version.torch", "--only", "gpu.").code == 0
    [run] = fake.of("run")
    assert run.args[-4:] == ("--only", "version.torch", "--only", "gpu.")


def test_smoke_of_a_foreign_image_mounts_the_host_copy(cli: Cli, engines: Engines) -> None:
    fake = smoke_engine(engines, ours=False)
    assert cli("smoke", "img:t", "--gpus", "all").code == 0
    [run] = fake.of("run")
    assert run.args[1:3] == ("python", "/opt/torchyard-host/smoke")
    assert [m.target for m in run.mounts] == ["/torchyard-out", "/opt/torchyard-host/smoke"]
    assert run.gpus == "all"


def test_smoke_runs_an_image_of_the_platform_asked_and_scales_an_emulated_one(
    cli: Cli, engines: Engines, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Platform, "here", classmethod(lambda cls: Platform.AMD64))
    fake = smoke_engine(engines)
    image = fake.images["sha256:1"]
    fake.images["sha256:1"] = ImageInfo(id=image.id, labels=image.labels, tags=image.tags, digests=(), size=1,
                                        platform="linux/arm64")  # fmt: skip
    r = cli("smoke", "img:t")
    assert (r.code, r.err) == (
        2,
        "torchyard: error: smoke: img:t is a linux/arm64 image, not linux/amd64 (--platform (default: this "
        "machine's))\n",
    )
    assert fake.of("run") == []
    r = cli("smoke", "img:t", "--platform", "arm64")
    assert r.code == 0, r.err
    [run] = fake.of("run")
    assert run.args[-3:] == ("--small", "--timeout-scale", "10")  # emulated on this linux/amd64 engine
    r = cli("smoke", "img:t", "--platform", "linux/riscv64")
    assert r.code == 2 and "--platform: 'linux/riscv64' is not a platform torchyard builds for" in r.err


def test_build_for_two_platforms_pushes_each_and_holds_the_index_when_one_fails(
    cli: Cli, engines: Engines, tmp_path: Path
) -> None:
    amd64, arm64 = plan(IDENT), plan(f"{IDENT}-arm64")
    fake = use_fake(engines, amd64, smoke_fail_platform="linux/arm64")
    fake.by_platform = {"linux/amd64": contents_of(amd64), "linux/arm64": contents_of(arm64)}
    tag = "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
    r = cli("build", *PIN, "--platform", "linux/amd64,linux/arm64", "--repo", REPO, "--push", "-o", str(tmp_path))
    assert r.code == 4
    assert r.err == (f"torchyard: error: linux/arm64 failed; held: {tag}\n")
    assert r.out.splitlines()[0] == f"chose {IDENT} (the best of 1 valid combinations) for linux/amd64, linux/arm64"
    assert f"linux/amd64  runtime  built       {REPO}:{tag}-amd64" in r.out
    assert "linux/arm64  failed: [runtime] smoke suite failed, nothing tagged: train.cpu" in r.out
    assert f"index        held        {REPO}:{tag} linux/arm64 failed:" in r.out
    assert fake.pushed() == [f"{REPO}:{tag}-amd64"]
    assert json.loads((tmp_path / "amd64" / "plan.json").read_text())["platform"] == "linux/amd64"
    fake.smoke_fail_platform = None
    r = cli("build", *PIN, "--platform", "linux/amd64,linux/arm64", "--repo", REPO, "--push", "-o", str(tmp_path),
            "--force")  # fmt: skip
    assert r.code == 0, r.err
    assert f"index        moved       {REPO}:{tag} linux/amd64 sha256:" in r.out
    assert engines.registry is not None and set(engines.registry.indexes) == {
        f"{REPO}:{tag}",
        f"{REPO}:2.14-cuda13.0-py3.11-debian12-runtime",
    }
