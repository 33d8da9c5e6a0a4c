"""`torchyard inspect`: facts of torchyard images (labels + manifest) and foreign ones (a probe), and whether they
run on a driver / GPU; the container toolkit's NVIDIA_REQUIRE_CUDA check on its own."""

from __future__ import annotations

import json

import pytest
from fake_engine import Contents, FakeEngine
from host_kit import SMI_BROKEN, machine
from matrix_kit import query, real

import builder.engine
import builder.host.image_inspect
from builder.cli.main import main
from builder.core.versions import parse_driver
from builder.engine import ImageInfo
from builder.host.image_inspect import Remote, judge, read_facts
from builder.oci.client import Manifest
from builder.oci.refs import RepoRef
from builder.resolve.facts import Facts
from builder.resolve.require import rule_container_start
from builder.resolve.resolver import lookup
from builder.resolve.rules.check import Status
from builder.resolve.verdict import Answer, verdict

M = real()
F = Facts(M)
FOREIGN = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
# The nvidia/cuda 12.4.1 requirement the pytorch/pytorch 2.5.1 image inherits (compat-facts §5c: 12.3.x/12.4.x
# images list the 470, 525 and 535 branches for all ten brands, GeForce included).
BRANDS = (
    "tesla",
    "unknown",
    "nvidia",
    "nvidiartx",
    "geforce",
    "geforcertx",
    "quadro",
    "quadrortx",
    "titan",
    "titanrtx",
)
REQUIRE_124 = " ".join(
    ["cuda>=12.4", *(f"brand={b},driver>={n},driver<{n + 1}" for n in (470, 525, 535) for b in BRANDS)]
)
OBSERVED = {
    "torch": "2.5.1+cu124",
    "cuda": "12.4",
    "cudnn": 90100,
    "nccl": "2.21.5",
    "python": "3.11",
    "os": "ubuntu22.04",
    "torch_arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
}


def engine_with(image: str, info: ImageInfo, observed: dict[str, object] | None = None) -> FakeEngine:
    fake = FakeEngine({"probe": Contents({}, dict(observed or {}))})
    fake.images[info.id] = info
    fake.tags[image] = info.id
    fake.built_target[info.id] = "probe"
    return fake


def foreign(platform: str = "linux/amd64") -> FakeEngine:
    env = ("PATH=/usr/bin", f"NVIDIA_REQUIRE_CUDA={REQUIRE_124}")
    info = ImageInfo(id="sha256:f", labels={}, tags=(FOREIGN,), digests=(), size=1, env=env, platform=platform)
    return engine_with(FOREIGN, info, OBSERVED)


def ours() -> FakeEngine:
    r = lookup(M, query(M, torch="2.14.1", variant="cu130", python="3.11", os="debian12")).valid[0]
    manifest = {"id": r.combo.id, "torch": "2.14.1+cu130", "cuda": "13.0", "cudnn": "9.24.0.43", "nccl": "2.30.7",
                "python": "3.11", "os": "debian12"}  # fmt: skip
    labels = {"io.torchyard.version": "0.1.0", "io.torchyard.combination": r.combo.id}
    info = ImageInfo(
        id="sha256:o", labels=labels, tags=("t:1",), digests=(), size=1, env=("NVIDIA_REQUIRE_CUDA=cuda>=13.0",)
    )
    fake = engine_with("t:1", info)
    fake.files[("sha256:o", "/etc/torchyard/manifest.json")] = json.dumps(manifest).encode()
    return fake


def test_a_foreign_image_is_probed_for_its_stack_and_code() -> None:
    fake = foreign()
    facts = read_facts(fake, FOREIGN)
    assert (facts.source, facts.torch, facts.cuda, facts.cudnn, facts.os) == (
        "probe", "2.5.1+cu124", "12.4", "9.1.0", "ubuntu22.04"
    )  # fmt: skip
    assert facts.sass == ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
    (run,) = fake.of("run")
    assert any(m.target == "/opt/torchyard-host/smoke" for m in run.mounts)  # the host's suite, not the image's


def test_a_foreign_image_on_a_535_geforce_starts_through_its_listed_branch() -> None:
    checks = judge(M, read_facts(foreign(), FOREIGN), query(M, driver="535.104.05", gpu="RTX 4090"))
    assert all(c.ok for c in checks), [(c.rule, c.reason) for c in checks if not c.ok]
    start = next(c for c in checks if c.rule == "container-start")
    assert start.reason.startswith("NVIDIA_REQUIRE_CUDA holds: brand=geforce,driver>=535,driver<536")


def test_a_foreign_image_on_530_does_not_start() -> None:
    checks = judge(M, read_facts(foreign(), FOREIGN), query(M, driver="530.30.02", gpu="RTX 4090"))
    failed = [c for c in checks if not c.ok]
    assert [c.rule for c in failed] == ["container-start"]
    assert failed[0].reason == (
        "the container will not start: driver 530.30.02 reports CUDA 12.1, the image requires cuda>=12.4 "
        "(or a listed driver branch and GPU brand)"
    )


def test_a_foreign_image_without_code_for_the_gpu_is_named() -> None:
    checks = judge(M, read_facts(foreign(), FOREIGN), query(M, driver="570.124.06", gpu="RTX 5090"))
    (arch,) = [c for c in checks if c.rule == "arch-torch"]
    assert not arch.ok
    assert arch.reason.startswith("sm_120 has no runnable code in torch 2.5.1+cu124")


def test_a_torchyard_image_is_read_from_labels_and_manifest_without_running_it() -> None:
    fake = ours()
    facts = read_facts(fake, "t:1")
    assert facts.source == "torchyard labels and manifest"
    assert facts.combination == "torch2.14.1-cu130-py3.11-debian12"
    assert "run" not in fake.ops()
    checks = judge(M, facts, query(M, driver="535", gpu="RTX 4090"))
    failed = {c.rule for c in checks if not c.ok}
    assert failed == {"driver-cuda", "cudnn-cuda", "container-start"}  # CUDA 13 and its cuDNN need >= 580


def test_an_image_of_another_platform_is_said_so() -> None:
    checks = judge(M, read_facts(foreign("linux/arm64"), FOREIGN), query(M, driver="550", platform="linux/amd64"))
    assert checks[0].reason == "the image is linux/arm64, the machine linux/amd64"


@pytest.mark.parametrize(
    ("driver", "gpu", "ok"),
    [
        ("550.54.15", "RTX 4090", True),  # reports 12.4
        ("545.23.08", "RTX 4090", False),  # 12.3, branch not listed
        ("470.82.01", "Tesla T4", True),  # a listed branch, brand tesla
    ],
)
def test_require_cuda_alternatives(driver: str, gpu: str, ok: bool) -> None:
    q = query(M, driver=driver, gpu=gpu)
    assert rule_container_start(F, q.driver, q.gpus, REQUIRE_124).ok is ok


def test_require_cuda_without_a_driver_is_not_checked_and_without_a_requirement_passes() -> None:
    unasked = rule_container_start(F, None, (), "cuda>=13.0")
    assert (
        unasked.status is Status.NOT_CHECKED
        and unasked.condition == "a driver that meets NVIDIA_REQUIRE_CUDA cuda>=13.0"
    )
    assert rule_container_start(F, parse_driver("535"), (), None).passed


def test_the_command_prints_facts_and_exits_1_when_it_will_not_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = foreign()
    monkeypatch.setattr(builder.engine, "DockerEngine", lambda: fake)
    with pytest.raises(SystemExit) as exit_:
        main(["inspect", FOREIGN, "--driver", "530", "--gpu", "RTX 4090", "--json"])
    assert exit_.value.code == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["schema"], data["torch"], data["runs"]) == (2, "2.5.1+cu124", False)
    monkeypatch.setattr(builder.host.image_inspect, "Distribution", lambda http: FakeRegistry(None))
    with pytest.raises(SystemExit) as exit_:
        main(["inspect", "nope:latest"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        "torchyard: error: inspect: no image 'nope:latest' in the engine nor in its registry\n"
    )


def test_inspect_here_with_a_failing_driver_never_says_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import builder.host.probe
    from builder.core import env

    system = machine(SMI_BROKEN, smi_code=9, driver="535.104.05")
    monkeypatch.delenv(env.ANY_HOST, raising=False)
    monkeypatch.setattr(builder.host.probe, "RealSystem", lambda: system)
    monkeypatch.setattr(builder.engine, "DockerEngine", foreign)
    with pytest.raises(SystemExit) as exit_:
        main(["inspect", FOREIGN, "--here"])
    out = capsys.readouterr().out
    assert exit_.value.code == 6
    assert ": CANNOT TELL" in out and "RUNS" not in out
    assert "  NOT CHECKED  driver-cuda      no driver given" in out.splitlines()


def test_inspect_here_on_a_machine_without_a_gpu_runs_on_its_cpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No GPU at all: the driver and GPU rules do not apply (N/A), the platform and torch do: RUNS ON CPU, exit 0."""
    import builder.host.probe
    from builder.core import env

    monkeypatch.delenv(env.ANY_HOST, raising=False)
    monkeypatch.setattr(builder.host.probe, "RealSystem", lambda: machine(None, toolkit=False))
    monkeypatch.setattr(builder.engine, "DockerEngine", foreign)
    with pytest.raises(SystemExit) as exit_:
        main(["inspect", FOREIGN, "--here"])
    assert exit_.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[lines.index("linux/amd64: RUNS ON CPU") + 1 :] == [
        "  PASS         platform         torch 2.5.1 cu124 has linux/amd64 wheels",
        *(f"  N/A          {rule:<16} no GPU on this machine: the image runs on its CPU"
          for rule in ("driver-gpu", "driver-cuda", "arch-torch", "ptx-jit-driver", "cudnn-cuda", "container-start")),
    ]  # fmt: skip
    with pytest.raises(SystemExit):
        main(["inspect", FOREIGN, "--here", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert (data["verdict"], data["runs"]) == ("runs-cpu", True)
    assert {c["status"] for c in data["checks"][1:]} == {"not-applicable"}
    assert {c["ok"] for c in data["checks"][1:]} == {None}


class FakeRegistry:
    """The registry client's one read inspect makes: the manifest and config of a tag for a platform."""

    def __init__(self, config: dict[str, object] | None) -> None:
        self.config = config
        self.asked: list[tuple[str, str, str]] = []

    def image(self, repo: RepoRef, reference: str, platform: str) -> tuple[Manifest, dict[str, object]] | None:
        self.asked.append((str(repo), reference, platform))
        if self.config is None:
            return None
        return Manifest("application/vnd.oci.image.manifest.v1+json", "sha256:" + "a" * 64, b"{}", {}), self.config


def _config(labels: dict[str, str], env: list[str]) -> dict[str, object]:
    return {"os": "linux", "architecture": "amd64", "config": {"Labels": labels, "Env": env}}


def test_an_image_only_in_a_registry_is_read_from_its_config_without_a_pull() -> None:
    r = lookup(M, query(M, torch="2.14.1", variant="cu130", python="3.11", os="debian12")).valid[0]
    values = {"version": "0.1.0", "combination": r.combo.id, "torch": "2.14.1+cu130", "cuda": "13.0"}
    labels = {f"io.torchyard.{k}": v for k, v in (values | {"python": "3.11", "os": "debian12"}).items()}
    registry = FakeRegistry(_config(labels, ["NVIDIA_REQUIRE_CUDA=cuda>=13.0"]))
    empty = FakeEngine({})
    facts = read_facts(empty, "127.0.0.1:5000/team/t:1", Remote(platform="linux/amd64", client=registry))  # type: ignore[arg-type]
    assert registry.asked == [("127.0.0.1:5000/team/t", "1", "linux/amd64")]
    assert (facts.combination, facts.torch, facts.require_cuda) == (r.combo.id, "2.14.1+cu130", "cuda>=13.0")
    assert facts.source.startswith("torchyard labels (127.0.0.1:5000 by digest sha256:aaaa")
    assert all(c.passed for c in judge(M, facts, query(M, driver="580.65.06", gpu="RTX 4090")))
    assert not [c for c in empty.calls if c.op == "pull"] and empty.images == {}


def test_a_foreign_image_in_a_registry_says_what_only_a_pull_reads() -> None:
    registry = FakeRegistry(_config({}, [f"NVIDIA_REQUIRE_CUDA={REQUIRE_124}"]))
    facts = read_facts(FakeEngine({}), FOREIGN, Remote(client=registry))  # type: ignore[arg-type]
    assert facts.torch is None and facts.unread is not None and "--pull" in facts.unread
    checks = judge(M, facts, query(M, driver="580.65.06", gpu="RTX 4090"))
    assert [c.status for c in checks] == [Status.NOT_CHECKED]
    assert verdict(checks).answer is Answer.CANNOT_TELL
