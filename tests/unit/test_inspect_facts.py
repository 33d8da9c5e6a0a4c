"""`torchyard inspect`'s reading of an image, field by field: a probed image whose torch the matrix does not know
(the combination made from what the probe read), the probe's own options and refusals, an image read from its
registry's config. Written for the survivors of `bench/mutation.py host` (docs/mutation.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_engine import Contents, FakeEngine
from matrix_kit import query, real
from packaging.version import Version

import builder.host.image_inspect as inspect_mod
from builder.core.archs import arch_from
from builder.core.errors import BuildError, UsageError
from builder.core.kinds import Platform
from builder.engine import ImageInfo
from builder.host.image_inspect import ImageFacts, Remote, combination_of, judge, read_facts
from builder.matrix.model import Build, OSBase, TorchRelease, TorchVariant, Wheels
from builder.oci.client import Manifest
from builder.oci.refs import RepoRef
from builder.pipeline.suite import SmokeOptions, SmokeReport
from builder.resolve.combos import Combination
from builder.resolve.rules import Check
from builder.resolve.rules.check import Missing, not_checked

M = real()
IMAGE = "example/nightly:1"
REQUIRE = "cuda>=12.8"
NIGHTLY = {  # a torch the matrix has no release of (a nightly, a fork)
    "torch": "2.99.0+cu128",
    "cuda": "12.8",
    "cudnn": 90800,
    "nccl": "2.26.2",
    "python": "3.12",
    "os": "ubuntu24.04",
    "torch_arch_list": ["sm_80", "sm_bogus", "sm_90", "compute_90"],
}


def probed(observed: dict[str, Any], platform: str = "linux/amd64") -> FakeEngine:
    fake = FakeEngine({"probe": Contents({}, observed)})
    env = ("PATH=/usr/bin", f"NVIDIA_REQUIRE_CUDA={REQUIRE}")
    info = ImageInfo(id="sha256:n", labels={}, tags=(IMAGE,), digests=(), size=1, env=env, platform=platform)
    fake.images[info.id] = info
    fake.tags[IMAGE] = info.id
    fake.built_target[info.id] = "probe"
    return fake


def test_a_probed_image_keeps_every_stack_fact_and_its_compiled_code_apart_from_its_ptx() -> None:
    facts = read_facts(probed(NIGHTLY), IMAGE)
    assert facts == ImageFacts(
        image=IMAGE, platform="linux/amd64", source="probe", combination=None, torch="2.99.0+cu128", cuda="12.8",
        cudnn="9.8.0", nccl="2.26.2", python="3.12", os="ubuntu24.04", sass=("sm_80", "sm_bogus", "sm_90"),
        ptx=("sm_90",), require_cuda=REQUIRE,
    )  # fmt: skip


def test_a_probe_without_an_architecture_list_leaves_the_code_not_recorded() -> None:
    observed = {k: v for k, v in NIGHTLY.items() if k != "torch_arch_list"}
    facts = read_facts(probed(observed), IMAGE)
    assert (facts.sass, facts.ptx) == (None, ())
    c = combination_of(M, facts)
    assert c is not None and c.variant.builds[0].sass is None  # not recorded, not "no code"


def test_a_torch_the_matrix_does_not_know_becomes_a_combination_of_what_the_probe_read() -> None:
    facts = read_facts(probed(NIGHTLY), IMAGE)
    amd64 = Platform.AMD64
    build = Build(platform=amd64, sass=(arch_from("sm_80"), arch_from("sm_90")), ptx=(arch_from("sm_90"),),
                  local="cu128", note="", sources=())  # fmt: skip
    variant = TorchVariant(name="cu128", cuda=Version("12.8"), cuda_runtime=None, cuda_release=None,
                           cudnn=Version("9.8.0"), nccl=None, builds=(build,), note="", sources=())  # fmt: skip
    wheels = Wheels(platform=amd64, pypi_default="cu128", python=("3.12",), platform_tag="?", sources=())
    release = TorchRelease(version=Version("2.99.0"), released="?", wheels=(wheels,), torchvision=Version("2.99.0"),
                           torchaudio=Version("2.99.0"), variants=(variant,), sources=())  # fmt: skip
    os_base = OSBase(name="ubuntu24.04", image="?", family="?", system_python="3.12", glibc=Version("0"),
                     python_images=(), python_image="", sources=())  # fmt: skip
    assert combination_of(M, facts) == Combination(release, variant, "3.12", os_base, amd64)


def test_an_unknown_torch_is_judged_on_the_code_the_probe_read() -> None:
    facts = read_facts(probed(NIGHTLY), IMAGE)
    checks = {c.rule: c for c in judge(M, facts, query(M, driver="570.124.06", gpu="RTX 5090"))}
    assert checks["arch-torch"].reason.startswith("sm_120: only PTX of sm_90, JIT-compiled")  # the probe's compute_90
    checks = {c.rule: c for c in judge(M, facts, query(M, driver="570.124.06", gpu="RTX 2080"))}
    assert checks["arch-torch"].ok is False  # sm_75: older than every code it carries
    checks = {c.rule: c for c in judge(M, facts, query(M, driver="570.124.06", gpu="H100"))}
    assert checks["arch-torch"].ok is True, checks["arch-torch"].reason
    assert checks["platform"].ok is True


@pytest.mark.parametrize(
    ("torch", "cuda", "variant"),
    [("2.99.0", None, "cpu"), ("2.99.0", "12.8", "cu128"), ("2.99.0+rocm7", "12.8", "rocm7")],
)
def test_an_unknown_torch_s_variant_is_its_local_part_else_cpu_or_its_cuda(
    torch: str, cuda: str | None, variant: str
) -> None:
    facts = read_facts(probed(NIGHTLY | {"torch": torch, "cuda": cuda, "cudnn": None}), IMAGE)
    c = combination_of(M, facts)
    assert c is not None
    assert (c.variant.name, c.variant.cuda, c.variant.cudnn) == (variant, Version(cuda) if cuda else None, None)


@pytest.mark.parametrize(
    ("change", "why"),
    [({"torch": "nightly"}, "not a version"), ({"cuda": "twelve"}, "not a version"), ({"torch": None}, "no torch")],
)
def test_an_unknown_torch_that_cannot_be_read_makes_no_combination(change: dict[str, Any], why: str) -> None:
    facts = ImageFacts(image=IMAGE, platform="linux/amd64", source="probe", combination=None, torch="2.99.0",
                       cuda=None, cudnn=None, nccl=None, python=None, os=None, sass=None, ptx=(),
                       require_cuda=None)  # fmt: skip
    assert combination_of(M, facts) is not None
    bad = ImageFacts(**(facts.__dict__ | change))
    assert combination_of(M, bad) is None, why


def test_an_unknown_torch_on_a_platform_torch_has_no_wheels_for_makes_no_combination() -> None:
    facts = read_facts(probed(NIGHTLY), IMAGE)
    assert combination_of(M, facts) is not None
    assert combination_of(M, ImageFacts(**(facts.__dict__ | {"platform": "linux/s390x"}))) is None


def test_an_unknown_torch_without_python_or_os_says_so_with_question_marks() -> None:
    facts = read_facts(probed(NIGHTLY | {"python": None, "os": None}), IMAGE)
    c = combination_of(M, facts)
    assert c is not None
    assert (c.python, c.os.name, c.os.system_python, c.torch.python) == ("?", "unknown", "?", ("?",))


@pytest.mark.parametrize(
    ("number", "text"),
    [(92400, "9.24.0"), (10000, "1.0.0"), (8700, "8.7.0"), (9999, "9.9.99"), (1000, "1.0.0"), (1, "0.0.1"),
     (0, None), (-1, None)],
)  # fmt: skip
def test_cudnn_s_number_is_read_as_torch_writes_it(number: int, text: str | None) -> None:
    facts = read_facts(probed(NIGHTLY | {"cudnn": number}), IMAGE)
    assert facts.cudnn == text


class Probe:
    """run_smoke as the probe calls it: what it was asked, and what it answers (a report or an error)."""

    def __init__(self, observed: dict[str, Any] | None = None, error: Exception | None = None) -> None:
        self.observed, self.error = observed, error
        self.asked: list[tuple[SmokeOptions, bool]] = []

    def __call__(self, engine: object, image: str, options: SmokeOptions, *, in_image: bool) -> SmokeReport:
        self.asked.append((options, in_image))
        if self.error is not None:
            raise self.error
        return SmokeReport(0, {"observed": self.observed or {}}, "", "")


def test_the_probe_runs_only_the_version_and_architecture_checks_from_the_host_s_suite(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probe = Probe(NIGHTLY)
    monkeypatch.setattr(inspect_mod, "run_smoke", probe)
    assert read_facts(probed(NIGHTLY), IMAGE).torch == "2.99.0+cu128"
    assert probe.asked == [(SmokeOptions(only=("version.", "arch.torch"), timeout=600), False)]
    assert probe.asked[0][1] is False


@pytest.mark.parametrize(
    ("probe", "message"),
    [
        (Probe(error=BuildError("smoke suite in x exited 127 without a report: no python")),
         f"inspect: no torch in {IMAGE} (no Python in it)"),
        (Probe({"python": "3.12"}), f"inspect: no torch in {IMAGE} (its Python cannot import torch)"),
    ],
)  # fmt: skip
def test_an_image_without_python_or_torch_is_one_usage_line(
    monkeypatch: pytest.MonkeyPatch, probe: Probe, message: str
) -> None:
    monkeypatch.setattr(inspect_mod, "run_smoke", probe)
    with pytest.raises(UsageError) as refused:
        read_facts(probed(NIGHTLY), IMAGE)
    assert str(refused.value) == message


def test_a_probe_that_fails_otherwise_is_not_called_a_missing_python(monkeypatch: pytest.MonkeyPatch) -> None:
    error = BuildError("smoke suite in x exited 1 without a report: Segmentation fault")
    monkeypatch.setattr(inspect_mod, "run_smoke", Probe(error=error))
    with pytest.raises(BuildError) as failed:
        read_facts(probed(NIGHTLY), IMAGE)
    assert failed.value is error


class Registry:
    def __init__(self, config: dict[str, object]) -> None:
        self.config = config

    def image(self, repo: RepoRef, reference: str, platform: str) -> tuple[Manifest, dict[str, object]]:
        digest = "sha256:" + "0123456789abcdef" * 4
        return Manifest("application/vnd.oci.image.manifest.v1+json", digest, b"{}", {}), self.config


def _config(labels: dict[str, str]) -> dict[str, object]:
    env = [f"NVIDIA_REQUIRE_CUDA={REQUIRE}"]
    return {"os": "linux", "architecture": "arm64", "config": {"Labels": labels, "Env": env}}


def test_a_foreign_image_in_a_registry_is_named_with_its_host_and_short_digest_and_nothing_else_is_guessed() -> None:
    ref = "127.0.0.1:5000/team/x:1"
    facts = read_facts(FakeEngine({}), ref, Remote(client=Registry(_config({}))))  # type: ignore[arg-type]
    where = "127.0.0.1:5000 by digest sha256:0123456789ab, no layer pulled"
    unread = "torch, CUDA, cuDNN, NCCL, Python and the compiled architectures are in its layers: --pull to probe"
    assert facts == ImageFacts(
        image=ref, platform="linux/arm64", source=f"image config ({where})", combination=None, torch=None, cuda=None,
        cudnn=None, nccl=None, python=None, os=None, sass=None, ptx=(), require_cuda=REQUIRE, unread=unread,
    )  # fmt: skip


def test_a_torchyard_image_in_a_registry_keeps_its_name() -> None:
    ref = "127.0.0.1:5000/team/x:1"
    labels = {"io.torchyard.version": "0.1.0", "io.torchyard.torch": "2.14.1+cu130"}
    facts = read_facts(FakeEngine({}), ref, Remote(client=Registry(_config(labels))))  # type: ignore[arg-type]
    assert (facts.image, facts.torch, facts.platform) == (ref, "2.14.1+cu130", "linux/arm64")


def test_a_bad_image_name_is_refused_as_the_image_argument() -> None:
    with pytest.raises(UsageError) as refused:
        read_facts(FakeEngine({}), "team/x:bad tag", Remote(client=Registry(_config({}))))  # type: ignore[arg-type]
    assert str(refused.value).startswith("IMAGE 'team/x:bad tag': bad tag")


def test_the_registry_is_read_with_inspect_s_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[object] = []

    def distribution(http: object) -> Registry:
        made.append(http)
        return Registry(_config({}))

    monkeypatch.setattr(inspect_mod, "Distribution", distribution)
    read_facts(FakeEngine({}), "127.0.0.1:5000/team/x:1", Remote())
    (http,) = made
    assert http.policy.timeout == 20  # type: ignore[attr-defined]


def ours(manifest: bytes | None, labels: dict[str, str]) -> FakeEngine:
    fake = FakeEngine({})
    info = ImageInfo(id="sha256:o", labels={"io.torchyard.version": "0.1.0", **labels}, tags=("t:1",), digests=(),
                     size=1, env=(f"NVIDIA_REQUIRE_CUDA={REQUIRE}",))  # fmt: skip
    fake.images[info.id] = info
    fake.tags["t:1"] = info.id
    if manifest is not None:
        fake.files[(info.id, "/etc/torchyard/manifest.json")] = manifest
    return fake


def test_a_torchyard_image_s_manifest_wins_over_its_labels_and_none_is_no_value() -> None:
    manifest = {"id": "combo-m", "torch": "2.14.1+cpu", "cuda": "none", "cudnn": None, "nccl": "none",
                "python": "3.12", "os": "debian12"}  # fmt: skip
    labels = {"io.torchyard.combination": "combo-l", "io.torchyard.cuda": "13.0", "io.torchyard.python": "3.11"}
    facts = read_facts(ours(json.dumps(manifest).encode(), labels), "t:1")
    assert facts == ImageFacts(
        image="t:1", platform="linux/amd64", source="torchyard labels and manifest", combination="combo-m",
        torch="2.14.1+cpu", cuda=None, cudnn=None, nccl=None, python="3.12", os="debian12", sass=None, ptx=(),
        require_cuda=REQUIRE,
    )  # fmt: skip


@pytest.mark.parametrize("manifest", [None, b"not json", b"[1, 2]"])
def test_without_a_readable_manifest_a_torchyard_image_is_read_from_its_labels(manifest: bytes | None) -> None:
    values = {"torch": "2.14.1+cu130", "cuda": "13.0", "cudnn": "9.24.0", "nccl": "2.30.7", "python": "3.11"}
    labels = {f"io.torchyard.{k}": v for k, v in (values | {"os": "d12"}).items()}
    facts = read_facts(ours(manifest, labels | {"io.torchyard.combination": "combo-l"}), "t:1")
    assert (facts.combination, facts.torch, facts.cuda, facts.cudnn, facts.nccl, facts.python, facts.os) == (
        "combo-l", "2.14.1+cu130", "13.0", "9.24.0", "2.30.7", "3.11", "d12"
    )  # fmt: skip


def test_an_unknown_torch_on_arm64_is_an_arm64_combination() -> None:
    c = combination_of(M, read_facts(probed(NIGHTLY, platform="linux/arm64"), IMAGE))
    assert c is not None and c.platform is Platform.ARM64 and c.variant.builds[0].platform is Platform.ARM64


def test_an_image_of_another_platform_fails_the_platform_check_once() -> None:
    facts = read_facts(probed(NIGHTLY), IMAGE)
    checks = judge(M, facts, query(M, driver="570.124.06", gpu="H100", platform="linux/arm64"))
    assert checks[0] == Check("platform", False, "the image is linux/amd64, the machine linux/arm64")
    assert [c.rule for c in checks if not c.ok] == ["platform"]  # the rules judge the image on its own platform


def test_an_image_without_a_readable_torch_is_one_failed_torch_check() -> None:
    facts = ImageFacts(image=IMAGE, platform="linux/amd64", source="probe", combination=None, torch="nightly",
                       cuda=None, cudnn=None, nccl=None, python=None, os=None, sass=None, ptx=(),
                       require_cuda=None)  # fmt: skip
    reason = f"no torch with a known version and platform in {IMAGE}"
    assert judge(M, facts, query(M, driver="570.124.06", gpu="H100")) == [Check("torch", False, reason)]


def test_an_image_read_only_from_its_registry_is_one_torch_check_not_read() -> None:
    facts = read_facts(FakeEngine({}), "127.0.0.1:5000/team/x:1", Remote(client=Registry(_config({}))))  # type: ignore[arg-type]
    assert facts.unread is not None
    expected = not_checked("torch", f"not read without a pull ({facts.unread})", (), Missing.INPUT)
    q = query(M, driver="570.124.06", gpu="H100", platform="linux/arm64")  # the config says arm64
    assert judge(M, facts, q) == [expected]


FOREIGN_251 = NIGHTLY | {"torch": "2.5.1+cu124", "cuda": "12.4", "cudnn": 90100, "os": "debian12", "python": None}


def test_a_matrix_torch_is_the_matrix_s_combination_with_the_os_it_knows_and_the_code_the_probe_read() -> None:
    facts = read_facts(probed(FOREIGN_251 | {"torch_arch_list": ["sm_80"]}), IMAGE)
    c = combination_of(M, facts)
    assert c is not None
    assert (str(c.torch.version), c.variant.name, c.python) == ("2.5.1", "cu124", "?")
    assert c.os == next(o for o in M.os if o.name == "debian12")  # the matrix's own OS base
    assert c.variant.builds == (
        Build(platform=Platform.AMD64, sass=(arch_from("sm_80"),), ptx=(), local="cu124", note="", sources=()),
    )
    matrix = next(r for r in M.torch if str(r.version) == "2.5.1").variant("cu124")
    assert matrix is not None and c.variant.cudnn == matrix.cudnn


def test_a_matrix_torch_on_an_os_the_matrix_lacks_and_without_a_local_part_is_its_cpu_variant() -> None:
    facts = read_facts(probed(FOREIGN_251 | {"torch": "2.5.1", "os": "alpine3.20", "python": "3.11"}), IMAGE)
    c = combination_of(M, facts)
    assert c is not None
    assert (c.variant.name, c.os.name, c.os.image, c.python) == ("cpu", "alpine3.20", "?", "3.11")


def test_a_matrix_torch_with_a_variant_the_matrix_lacks_is_made_from_the_probe() -> None:
    facts = read_facts(probed(FOREIGN_251 | {"torch": "2.5.1+cu999"}), IMAGE)
    c = combination_of(M, facts)
    assert c is not None and c.variant.name == "cu999" and c.torch.released == "?"


def test_an_image_neither_here_nor_read_remotely_is_pulled_when_asked_then_probed() -> None:
    engine = probed(NIGHTLY)
    info = engine.images.pop("sha256:n")
    del engine.tags[IMAGE]
    pulled: list[tuple[str, object]] = []

    def pull(ref: str, auth: object) -> ImageInfo:
        pulled.append((ref, auth))
        engine.images[info.id], engine.tags[ref] = info, info.id
        return info

    engine.pull = pull  # type: ignore[method-assign]
    facts = read_facts(engine, IMAGE, Remote(pull=True, client=Registry(_config({}))))  # type: ignore[arg-type]
    assert pulled == [(IMAGE, None)]
    assert (facts.source, facts.torch) == ("probe", "2.99.0+cu128")
