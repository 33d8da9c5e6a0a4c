"""build -> label check -> smoke -> tag check -> tag -> push, against a fake engine at the one seam.

Asserts the exact commands and the order of engine calls; for every fault, that no tag points at an
image that was not verified, that nothing was pushed, and which error (and exit code) the user gets.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_engine import Call, FakeEngine, FakeRegistry, contents_of, wall_off_the_engine
from render_kit import addone, arch, no_host_network, plan

from builder.core.errors import BuildError, EngineError, Interrupted, PushError, TorchyardError
from builder.core.kinds import Flavor
from builder.engine import ImageInfo, Mount, RegistryAuth
from builder.pipeline.pipeline import BuildSettings, Outcome, build
from builder.pipeline.plan import CONTENT_LABEL, Plan
from builder.pipeline.suite import IN_IMAGE_SMOKE, OUT
from builder.render.context import cuda_home

IDENT = "torch2.14.1-cu130-py3.11-debian12"
REPO = "127.0.0.1:5000/team/torch"
RUNTIME_TAG = "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
IMMUTABLE = f"{REPO}:{RUNTIME_TAG}"
ALIAS = f"{REPO}:2.14-cuda13.0-py3.11-debian12-runtime"  # Debian 12 is off the default platform: the alias names it
DEVEL_IMMUTABLE = f"{REPO}:2.14.1-cuda13.0-cudnn9-py3.11-debian12-devel"
DEVEL_ALIAS = f"{REPO}:2.14-cuda13.0-py3.11-debian12-devel"
AUTH = RegistryAuth("ci", "registry-pa55")


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


@pytest.fixture
def wheels_plan() -> Plan:
    return plan(IDENT)


@pytest.fixture
def ext_plan() -> Plan:
    """--arch sm_89 --extension examples/addone: the devel image is checked with cuobjdump."""
    return plan(IDENT, archs=(arch("sm_89"),), extensions=(addone(),))


def fake(p: Plan, **knobs: object) -> FakeEngine:
    engine = FakeEngine(contents_of(p), registry=FakeRegistry())
    for name, value in knobs.items():
        assert hasattr(engine, name), name
        setattr(engine, name, value)
    return engine


def settings(tmp_path: Path, *flavors: Flavor, **kwargs: object) -> BuildSettings:
    return BuildSettings(repo=REPO, flavors=flavors or (Flavor.RUNTIME,), out_dir=tmp_path / "ctx", **kwargs)  # type: ignore[arg-type]


def run(engine: FakeEngine, p: Plan, s: BuildSettings) -> tuple[list[Outcome], list[str]]:
    log: list[str] = []
    assert engine.registry is not None
    return build(engine, p, s, log.append, engine.registry), log


def labels_of(p: Plan) -> tuple[str, ...]:
    return (
        "--label",
        f"io.torchyard.content-hash={p.content_hash}",
        "--label",
        f"io.torchyard.dockerfile-sha256={p.dockerfile_sha256}",
    )


# --- the build command ---------------------------------------------------------------------------------


def test_classic_client_builds_with_docker_build_no_tag(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    run(engine, wheels_plan, settings(tmp_path))
    ctx = tmp_path / "ctx"
    [call] = engine.of("build")
    assert call.args == (
        "docker",
        "build",
        "--progress=plain",
        "--target",
        "runtime",
        "-f",
        f"{ctx}/Dockerfile",
        "--platform",
        "linux/amd64",
        *labels_of(wheels_plan),
        str(ctx),
    )
    assert (ctx / "Dockerfile").read_text() == wheels_plan.dockerfile


def test_build_args_and_secrets_reach_the_build(tmp_path: Path) -> None:
    ca = tmp_path / "corp-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n")
    network = no_host_network(ca_bundle=str(ca), apt_mirror="http://mirror.corp.example/debian")
    p = plan(IDENT, network=network)
    engine = fake(p)
    run(engine, p, settings(tmp_path))
    [call] = engine.of("build")
    assert call.args[7:] == (
        "--platform",
        "linux/amd64",
        "--build-arg",
        "APT_MIRROR=http://mirror.corp.example/debian",
        "--secret",
        f"id=cacert,src={ca}",
        *labels_of(p),
        str(tmp_path / "ctx"),
    )
    assert "-t" not in call.args


def test_generated_pip_conf_is_a_private_file_outside_the_context_only_while_building(tmp_path: Path) -> None:
    index = "https://alice:s3cr3t@pypi.corp.example/simple"
    p = plan(IDENT, network=no_host_network(pip_index_url=index))
    seen: list[tuple[Path, int, str]] = []

    def during_build(argv: list[str]) -> None:
        [spec] = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--secret"]
        assert spec.startswith("id=pipconf,src=")
        path = Path(spec.removeprefix("id=pipconf,src="))
        seen.append((path, stat.S_IMODE(path.stat().st_mode), path.read_text()))

    engine = fake(p, on_build=during_build)
    run(engine, p, settings(tmp_path, pip_conf=f"[global]\nindex-url = {index}\n"))
    [(path, mode, text)] = seen
    assert (mode, text) == (0o600, f"[global]\nindex-url = {index}\n")
    assert not path.is_relative_to(tmp_path / "ctx")
    assert not path.exists()


def test_a_generated_secret_without_its_content_is_refused_before_building(tmp_path: Path) -> None:
    p = plan(IDENT, network=no_host_network(pip_index_url="https://alice:s3cr3t@pypi.corp.example/simple"))
    engine = fake(p)
    with pytest.raises(BuildError, match=r"pip\.conf"):
        run(engine, p, settings(tmp_path))
    assert engine.of("build") == []


def test_build_output_goes_to_the_log_file_and_only_step_lines_to_the_console(
    tmp_path: Path, wheels_plan: Plan
) -> None:
    _, log = run(fake(wheels_plan), wheels_plan, settings(tmp_path))
    log_file = tmp_path / "ctx" / "build-runtime.log"
    assert log_file.read_text().splitlines() == [
        "#1 [internal] load build definition from Dockerfile",
        "#7 [runtime 3/5] RUN pip install torch",
        "#7 DONE 12.3s",
    ]
    assert f"[runtime] building (log: {log_file})" in log
    assert "[runtime] #7 [runtime 3/5] RUN pip install torch" in log
    assert not [line for line in log if "DONE" in line]


def test_verbose_streams_every_line(tmp_path: Path, wheels_plan: Plan) -> None:
    _, log = run(fake(wheels_plan), wheels_plan, settings(tmp_path, verbose=True))
    assert "[runtime] #7 DONE 12.3s" in log


# --- the order of steps ----------------------------------------------------------------------------------


def test_order_build_labels_smoke_tag_check_then_tags(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    [outcome], log = run(engine, wheels_plan, settings(tmp_path))
    image = outcome.image_id
    assert [(c.op, c.args[:1]) for c in engine.calls] == [
        ("info", ()),
        ("inspect", (IMMUTABLE,)),  # up to date locally?
        ("build", ("docker",)),
        ("inspect", (image,)),  # the label check reads the built image
        ("run", (image,)),  # the smoke suite
        ("inspect", (IMMUTABLE,)),  # which images the tags leave (builder/pipeline/replaced.py): none here
        ("inspect", (ALIAS,)),
        ("tag", (image,)),
        ("tag", (image,)),
    ]
    assert [c.args[1] for c in engine.of("tag")] == [IMMUTABLE, ALIAS]
    assert engine.tags == {IMMUTABLE: image, ALIAS: image}
    assert (outcome.status, outcome.ref, outcome.pushed) == ("built", IMMUTABLE, [])
    assert engine.pushed() == []
    assert log[-1] == f"[runtime] tagged {IMMUTABLE}, {ALIAS}"


def test_smoke_suite_runs_the_images_own_copy_and_writes_its_report(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    [outcome], log = run(engine, wheels_plan, settings(tmp_path))
    [smoke] = engine.of("run")
    assert smoke.args[1:] == ("python", IN_IMAGE_SMOKE, "--json", f"{OUT}/smoke.json", "--junit", f"{OUT}/junit.xml")
    [mount] = smoke.mounts
    assert (mount.target, mount.read_only) == (OUT, False)
    assert smoke.gpus is None
    assert outcome.smoke is not None
    assert json.loads((tmp_path / "ctx" / "smoke-runtime.json").read_text()) == outcome.smoke.data
    assert "[runtime] GPU checks skipped (no --gpus): 1" in log
    assert "[runtime] smoke: 1 passed, 1 skipped" in log


def test_gpus_and_custom_arch_reach_the_smoke_suite(tmp_path: Path) -> None:
    p = plan(IDENT, archs=(arch("sm_89"),))
    engine = fake(p)
    run(engine, p, settings(tmp_path, gpus="all"))
    [smoke] = engine.of("run")
    assert smoke.gpus == "all"
    assert smoke.args[-3:] == ("--arch", "sm_89", "--require-gpu")


def test_an_image_without_python_is_retried_with_python3(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan, no_python=True)
    [outcome], _ = run(engine, wheels_plan, settings(tmp_path))
    assert [c.args[1] for c in engine.of("run")] == ["python", "python3"]
    assert outcome.status == "built"


def test_push_goes_immutable_first_then_aliases_with_the_credentials(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    [outcome], log = run(engine, wheels_plan, settings(tmp_path, push=True, auth=AUTH))
    # inspect, run: the label check, the smoke suite; inspect, inspect: the images the two tags leave (none here)
    assert engine.ops() == ["info", "build", "inspect", "run", "inspect", "inspect", "tag", "tag", "push"]
    assert engine.pushed() == [IMMUTABLE] and [c.auth for c in engine.of("push")] == [AUTH]
    assert engine.registry is not None and engine.registry.retagged == [ALIAS], "the alias moves registry-side"
    assert engine.registry.images[ALIAS] == engine.registry.images[IMMUTABLE]
    assert outcome.pushed == [IMMUTABLE, ALIAS]
    assert outcome.digest.startswith("sha256:")
    assert f"[runtime] pushed {IMMUTABLE} ({outcome.digest})" in log
    assert engine.registry is not None
    assert engine.registry.refs[IMMUTABLE][CONTENT_LABEL] == wheels_plan.content_hash


def test_two_targets_are_both_verified_before_either_is_tagged(tmp_path: Path, ext_plan: Plan) -> None:
    engine = fake(ext_plan)
    outcomes, _ = run(engine, ext_plan, settings(tmp_path, Flavor.RUNTIME, Flavor.DEVEL))
    ops = engine.ops()
    assert ops.index("tag") > max(i for i, op in enumerate(ops) if op in ("build", "run"))
    assert [o.status for o in outcomes] == ["built", "built"]
    assert len(engine.tags) == 4


def test_devel_extension_code_is_checked_with_cuobjdump(tmp_path: Path, ext_plan: Plan) -> None:
    engine = fake(ext_plan)
    [outcome], log = run(engine, ext_plan, settings(tmp_path, Flavor.DEVEL))
    listing, objdump = engine.of("run")[1:]
    assert listing.args[1:3] == ("python", "-c") and listing.args[-1] == "addone"
    home = cuda_home(ext_plan.combination, ext_plan.strategy)
    library = "/opt/venv/lib/python3.11/site-packages/addone/_C.so"
    assert objdump.args[1:] == (f"{home}/bin/cuobjdump", "--list-elf", library)
    assert outcome.notes == ["addone: sm_89"]
    assert "[devel] extension code: addone: sm_89" in log


# --- faults: nothing unverified is tagged, nothing is pushed ------------------------------------------------

Fault = Callable[[FakeEngine], None]


def _build_fails(engine: FakeEngine) -> None:
    engine.fail_build = BuildError(
        'docker build failed (exit 1): ERROR: process "/bin/sh -c pip install torch" did not complete successfully'
    )


def _smoke_fails(engine: FakeEngine) -> None:
    engine.smoke_failures = {"libs.cuda": "libcudnn.so.9 did not load"}


def _another_torch(engine: FakeEngine) -> None:
    engine.observed_overrides = {"torch": "2.13.0+cu130"}


def _wrong_label(engine: FakeEngine) -> None:
    engine.label_overrides = {"io.torchyard.torch": "2.13.0+cu130"}


def _interrupted(engine: FakeEngine) -> None:
    engine.fail_build = Interrupted("interrupted while running /usr/bin/docker build")


def _interrupted_in_smoke(engine: FakeEngine) -> None:
    engine.fail_run = Interrupted("interrupted while running the smoke suite")


FAULTS: dict[str, tuple[Fault, type[TorchyardError], int, str]] = {
    "build step fails": (_build_fails, BuildError, 4, "docker build failed (exit 1): ERROR: process"),
    "smoke fails": (
        _smoke_fails,
        BuildError,
        4,
        "[runtime] smoke suite failed, nothing tagged: libs.cuda: libcudnn.so.9 did not load",
    ),
    "image holds another torch": (
        _another_torch,
        BuildError,
        4,
        f"the tag {RUNTIME_TAG} does not describe the image: its contents say "
        "2.13.0-cuda13.0-cudnn9-py3.11-debian12-runtime",
    ),
    "labels differ": (
        _wrong_label,
        BuildError,
        4,
        f"{RUNTIME_TAG}: labels do not match the plan: io.torchyard.torch='2.13.0+cu130' (expected '2.14.1+cu130')",
    ),
    "Ctrl-C during the build": (_interrupted, Interrupted, 130, "interrupted while running /usr/bin/docker build"),
    "Ctrl-C during the smoke suite": (_interrupted_in_smoke, Interrupted, 130, "interrupted while running the smoke"),
}


@pytest.fixture(params=sorted(FAULTS))
def fault(request: pytest.FixtureRequest) -> Iterator[tuple[Fault, type[TorchyardError], int, str]]:
    yield FAULTS[request.param]


def test_each_fault_tags_nothing_pushes_nothing_and_says_what(
    tmp_path: Path, wheels_plan: Plan, fault: tuple[Fault, type[TorchyardError], int, str]
) -> None:
    make_fault, error, code, message = fault
    engine = fake(wheels_plan)
    make_fault(engine)
    with pytest.raises(error) as raised:
        run(engine, wheels_plan, settings(tmp_path, push=True, auth=AUTH))
    assert message in str(raised.value)
    assert raised.value.exit_code == code
    assert engine.tags == {}
    assert engine.pushed() == []
    assert engine.registry is not None and engine.registry.refs == {}


def test_a_fault_in_the_second_target_leaves_the_first_untagged(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan, fail_build_target="devel")
    _build_fails(engine)
    with pytest.raises(BuildError):
        run(engine, wheels_plan, settings(tmp_path, Flavor.RUNTIME, Flavor.DEVEL, push=True))
    assert [c.args[4] for c in engine.of("build")] == ["runtime", "devel"]
    assert len(engine.of("run")) == 1  # runtime passed its smoke suite ...
    assert engine.tags == {}  # ... and still is not tagged
    assert engine.pushed() == []


def test_a_required_architecture_without_code_stops_the_build_before_any_tag(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan, missing_archs=("sm_100",))
    with pytest.raises(BuildError) as raised:
        run(engine, wheels_plan, settings(tmp_path, push=True, require_archs=("sm_90", "sm_100")))

    assert "required architecture sm_100: arch.torch: libtorch_cuda.so has no sm_100 code" in str(raised.value)
    only_arch = [c.args for c in engine.of("run") if "arch." in c.args]
    assert [a[a.index("--arch") + 1] for a in only_arch] == ["sm_90", "sm_100"], "each required arch is checked"
    assert engine.tags == {} and engine.pushed() == []


def test_required_architectures_with_code_are_logged_and_the_image_tagged(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan, missing_archs=("sm_100",))
    _, log = run(engine, wheels_plan, settings(tmp_path, require_archs=("sm_90",)))
    assert "[runtime] required architecture sm_90: code present" in log
    assert engine.tags


def test_ctrl_c_during_a_build_propagates_and_tags_nothing(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan, fail_build=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        run(engine, wheels_plan, settings(tmp_path, Flavor.RUNTIME, Flavor.DEVEL, push=True))
    assert engine.ops() == ["info", "build"]
    assert engine.tags == {}
    assert (tmp_path / "ctx" / "build-runtime.log").read_text().startswith("#1 [internal]")


def test_extension_without_code_for_the_arch_fails_the_build(tmp_path: Path, ext_plan: Plan) -> None:
    engine = fake(ext_plan, cubins=("sm_80", "sm_86"))
    with pytest.raises(BuildError) as raised:
        run(engine, ext_plan, settings(tmp_path, Flavor.RUNTIME, Flavor.DEVEL, push=True))
    assert str(raised.value) == "extension addone has no code for sm_89 (cuobjdump --list-elf found: sm_80 sm_86)"
    assert raised.value.exit_code == 4
    assert engine.tags == {}
    assert engine.pushed() == []


def test_daemon_down_stops_before_any_build(tmp_path: Path, wheels_plan: Plan) -> None:
    down = EngineError("no Docker engine answers at unix:///var/run/docker.sock: start dockerd")
    engine = fake(wheels_plan, info_error=down)
    with pytest.raises(EngineError) as raised:
        run(engine, wheels_plan, settings(tmp_path))
    assert raised.value.exit_code == 3
    assert engine.ops() == ["info"]


def test_unreachable_registry_stops_a_push_build_before_building(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    assert engine.registry is not None
    engine.registry.error = PushError("registry 127.0.0.1:5000 is unreachable: ConnectionError")
    with pytest.raises(PushError, match="unreachable") as raised:
        run(engine, wheels_plan, settings(tmp_path, push=True))
    assert raised.value.exit_code == 5
    assert engine.ops() == ["info"]


def test_rejected_push_is_a_push_error_after_the_verified_image_was_tagged(tmp_path: Path, wheels_plan: Plan) -> None:
    denied = PushError(f"push {IMMUTABLE}: denied: requested access to the resource is denied")
    engine = fake(wheels_plan, fail_push=denied)
    with pytest.raises(PushError) as raised:
        run(engine, wheels_plan, settings(tmp_path, push=True))
    assert raised.value.exit_code == 5
    assert "denied" in str(raised.value)
    assert engine.pushed() == [IMMUTABLE]  # the first push failed; no alias was tried
    assert engine.registry is not None and engine.registry.refs == {}
    [smoke] = engine.of("run")
    assert set(engine.tags.values()) == {smoke.args[0]}  # only the image that passed its smoke suite


# --- incremental builds -----------------------------------------------------------------------------------


def _same_hash(p: Plan) -> dict[str, str]:
    return {CONTENT_LABEL: p.content_hash}


def test_same_hash_in_the_registry_means_no_build_and_no_push(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    assert engine.registry is not None
    engine.registry.refs = {IMMUTABLE: _same_hash(wheels_plan), ALIAS: _same_hash(wheels_plan)}
    [outcome], log = run(engine, wheels_plan, settings(tmp_path, push=True))
    assert engine.ops() == ["info"]
    assert (outcome.status, outcome.pushed) == ("up-to-date", [])
    assert log == [f"[runtime] {IMMUTABLE} is up to date in the registry: no build, no push"]


def test_an_alias_behind_moves_registry_side_alone(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    assert engine.registry is not None
    engine.registry.refs = {IMMUTABLE: _same_hash(wheels_plan), ALIAS: {CONTENT_LABEL: "0" * 64}}
    [outcome], log = run(engine, wheels_plan, settings(tmp_path, push=True, auth=AUTH))
    assert engine.ops() == ["info"], "nothing pulled, tagged or pushed through the engine"
    assert engine.registry.retagged == [ALIAS] and outcome.pushed == [ALIAS]
    assert engine.registry.refs[ALIAS] == _same_hash(wheels_plan)
    digest = engine.registry.images[ALIAS][1]
    assert log[-1] == f"[runtime] moved {ALIAS} to {IMMUTABLE} ({digest})"


def test_an_alias_with_the_same_content_on_another_digest_is_repaired(tmp_path: Path, wheels_plan: Plan) -> None:
    """Issue 44: the content label cannot tell a re-pushed, unsigned manifest from the signed one; the digest can."""
    engine = fake(wheels_plan)
    assert engine.registry is not None
    engine.registry.refs = {IMMUTABLE: _same_hash(wheels_plan), ALIAS: _same_hash(wheels_plan)}
    engine.registry.images[ALIAS] = ("linux/amd64", "sha256:" + "a8" * 32)
    [outcome], _ = run(engine, wheels_plan, settings(tmp_path, push=True))
    assert engine.registry.retagged == [ALIAS] and outcome.pushed == [ALIAS]
    assert engine.registry.images[ALIAS] == engine.registry._image(IMMUTABLE)


def test_a_different_hash_in_the_registry_rebuilds_and_pushes_everything(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    assert engine.registry is not None
    engine.registry.refs = {IMMUTABLE: {CONTENT_LABEL: "0" * 64}, ALIAS: {CONTENT_LABEL: "0" * 64}}
    [outcome], _ = run(engine, wheels_plan, settings(tmp_path, push=True))
    assert engine.pushed() == [IMMUTABLE] and engine.registry.retagged == [ALIAS]
    assert outcome.pushed == [IMMUTABLE, ALIAS]


def test_building_twice_with_push_builds_and_pushes_once(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    run(engine, wheels_plan, settings(tmp_path, push=True))
    first = len(engine.calls)
    [outcome], _ = run(engine, wheels_plan, settings(tmp_path, push=True))
    assert engine.calls[first:] == [Call("info")]
    assert outcome.status == "up-to-date"


def test_local_image_with_the_same_hash_is_up_to_date_without_push(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    local = ImageInfo(id="sha256:" + "a" * 64, labels=_same_hash(wheels_plan), tags=(IMMUTABLE,), digests=(), size=1)
    engine.images[local.id] = local
    engine.tags[IMMUTABLE] = local.id
    [outcome], log = run(engine, wheels_plan, settings(tmp_path))
    assert engine.ops() == ["info", "inspect"]
    assert (outcome.status, outcome.image_id) == ("up-to-date", local.id)
    assert log == [f"[runtime] {IMMUTABLE} is up to date locally: no build"]
    assert engine.registry is not None and engine.registry.asked == []


def test_local_image_with_another_hash_is_rebuilt(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    old = ImageInfo(id="sha256:" + "b" * 64, labels={CONTENT_LABEL: "0" * 64}, tags=(), digests=(), size=1)
    engine.images[old.id] = old
    engine.tags[IMMUTABLE] = old.id
    [outcome], _ = run(engine, wheels_plan, settings(tmp_path))
    assert outcome.status == "built"
    assert engine.tags[IMMUTABLE] == outcome.image_id != old.id


def test_the_smoke_mount_is_the_only_mount(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    run(engine, wheels_plan, settings(tmp_path))
    [smoke] = engine.of("run")
    assert all(isinstance(m, Mount) for m in smoke.mounts)
    assert [m.target for m in smoke.mounts] == [OUT]


def test_a_registry_that_refuses_pushes_stops_the_build_before_it_starts(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    assert engine.registry is not None
    engine.registry.push_refusal = PushError("registry 127.0.0.1:5000 will not take a push to team/torch: HTTP 405")
    with pytest.raises(PushError, match="will not take a push"):
        run(engine, wheels_plan, settings(tmp_path, push=True))
    assert engine.ops() == ["info"], "nothing built, tagged or pushed"
    assert engine.registry.push_checks == [REPO]


def test_no_push_asks_the_registry_nothing_about_writing(tmp_path: Path, wheels_plan: Plan) -> None:
    engine = fake(wheels_plan)
    assert engine.registry is not None
    engine.registry.push_refusal = PushError("refused")
    run(engine, wheels_plan, settings(tmp_path))
    assert engine.registry.push_checks == []
