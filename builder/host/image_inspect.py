"""`torchyard inspect IMAGE`: what is inside any image, and whether it runs on a driver, a GPU, this machine.

torchyard's images say it in their labels and /etc/torchyard/manifest.json; any other image with torch is probed
in a container without a GPU (the smoke suite's version and architecture checks). Then the runtime rules of
`explain` (platform, driver and GPU, driver and CUDA, GPU code, PTX JIT, cuDNN's driver floor) and the container
toolkit's start check (NVIDIA_REQUIRE_CUDA) answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from packaging.version import InvalidVersion, Version

from builder.core.archs import Arch, arch_from
from builder.core.errors import BuildError, UsageError
from builder.core.kinds import Platform
from builder.engine import Engine
from builder.matrix.model import Build, Matrix, OSBase, TorchRelease, TorchVariant, Wheels
from builder.net.http import Http, Policy
from builder.oci.client import Distribution
from builder.oci.refs import parse_ref, platform_of
from builder.pipeline.suite import SmokeOptions, run_smoke
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.require import rule_container_start
from builder.resolve.rules import (
    Check,
    rule_arch_torch,
    rule_cudnn_cuda,
    rule_driver_cuda,
    rule_driver_gpu,
    rule_platform,
    rule_ptx_driver,
)
from builder.resolve.rules.arch import arch_support
from builder.resolve.rules.check import ArchSupport, Missing, not_applicable, not_checked
from builder.smoke.manifest import Observed

MANIFEST = "/etc/torchyard/manifest.json"
REGISTRY_TIMEOUT = 20
RUNTIME_RULES = (rule_platform, rule_driver_gpu, rule_driver_cuda, rule_arch_torch, rule_ptx_driver, rule_cudnn_cuda)


@dataclass(frozen=True)
class ImageFacts:
    image: str
    platform: str
    source: str  # "torchyard labels and manifest" | "probe"
    combination: str | None
    torch: str | None  # 2.14.1+cu130
    cuda: str | None
    cudnn: str | None  # 9.24.0
    nccl: str | None
    python: str | None
    os: str | None
    sass: tuple[str, ...] | None  # None: not read
    ptx: tuple[str, ...]
    require_cuda: str | None
    unread: str | None = None  # what could not be read without pulling the image (read from its registry)
    extensions: tuple[str, ...] = ()  # torchyard's CUDA extensions in the image (their code: built_for only)
    built_for: tuple[str, ...] = ()  # the architectures it was built for (io.torchyard.arch-list)


@dataclass(frozen=True)
class Remote:
    """How to read an image the local engine does not hold: its registry's config for `platform` (no layer is
    downloaded), or with `pull`, a pull and the probe."""

    platform: str = "linux/amd64"
    pull: bool = False
    client: Distribution | None = None


def read_facts(engine: Engine, image: str, remote: Remote | None = None) -> ImageFacts:
    info = engine.inspect(image)
    if info is None and remote is not None and remote.pull:
        info = engine.pull(image, None)
    if info is None:
        return read_remote(image, remote or Remote())
    env = dict(item.partition("=")[::2] for item in info.env)
    require = env.get("NVIDIA_REQUIRE_CUDA") or None
    if info.labels.get("io.torchyard.version"):
        manifest = _manifest(engine, image)
        return _ours(image, info.platform, info.labels, manifest, require)
    return _probed(image, info.platform, _probe(engine, image), require)


def _probe(engine: Engine, image: str) -> Observed:
    """The smoke suite's version and architecture checks in a container (removed after): one UsageError
    (exit 2) when the image has no Python or no torch to read."""
    try:
        report = run_smoke(engine, image, SmokeOptions(only=("version.", "arch.torch"), timeout=600), in_image=False)
    except BuildError as exc:
        if "exited 127 without a report" in str(exc):
            raise UsageError(f"inspect: no torch in {image} (no Python in it)") from None
        raise
    if not report.observed.torch:
        raise UsageError(f"inspect: no torch in {image} (its Python cannot import torch)")
    return report.observed


def read_remote(image: str, remote: Remote) -> ImageFacts:
    """The image's config from its registry, by digest (manifest, then config blob: no layer). torchyard's
    images answer from their labels; any other image says what only a pull could read."""
    ref = parse_ref(image, "IMAGE")
    client = remote.client or Distribution(Http(Policy(timeout=REGISTRY_TIMEOUT)))
    found = client.image(ref.repo, ref.reference, remote.platform)
    if found is None:
        raise UsageError(f"inspect: no image {image!r} in the engine nor in its registry")
    manifest, config = found
    inner = config.get("config") or {}
    labels = {str(k): str(v) for k, v in (inner.get("Labels") or {}).items()}
    env = dict(str(item).partition("=")[::2] for item in inner.get("Env") or [])
    require = env.get("NVIDIA_REQUIRE_CUDA") or None
    where = f"{ref.repo.host} by digest {manifest.digest[:19]}, no layer pulled"
    if labels.get("io.torchyard.version"):
        facts = _ours(image, platform_of(config), labels, {}, require)
        return replace(facts, source=f"torchyard labels ({where})")
    unread = "torch, CUDA, cuDNN, NCCL, Python and the compiled architectures are in its layers: --pull to probe"
    return ImageFacts(image=image, platform=platform_of(config), source=f"image config ({where})",
                      combination=None, torch=None, cuda=None, cudnn=None, nccl=None, python=None, os=None,
                      sass=None, ptx=(), require_cuda=require, unread=unread)  # fmt: skip


def label_facts(image: str, platform: str, labels: dict[str, str], require: str | None) -> ImageFacts:
    """A torchyard image's facts from its labels alone (the locator's view of a local or registry image)."""
    return _ours(image, platform, labels, {}, require)


def _manifest(engine: Engine, image: str) -> dict[str, Any]:
    raw = engine.read_file(image, MANIFEST)
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _ours(
    image: str, platform: str, labels: dict[str, str], manifest: dict[str, Any], require: str | None
) -> ImageFacts:
    def get(key: str) -> str | None:
        value = manifest.get(key, labels.get(f"io.torchyard.{key}"))
        return None if value in (None, "none") else str(value)

    def listed(key: str, label: str) -> tuple[str, ...]:
        value = manifest.get(key)
        words = value if isinstance(value, list) else str(labels.get(label, "none")).split()
        return tuple(str(w) for w in words if str(w) != "none")

    return ImageFacts(
        image=image,
        platform=platform,
        source="torchyard labels and manifest",
        combination=get("id") or labels.get("io.torchyard.combination"),
        torch=get("torch"),
        cuda=get("cuda"),
        cudnn=get("cudnn"),
        nccl=get("nccl"),
        python=get("python"),
        os=get("os"),
        sass=None,  # the matrix knows the combination's code; the manifest's arch_list is what it was built for
        ptx=(),
        require_cuda=require,
        extensions=listed("extensions", "io.torchyard.extensions"),
        built_for=listed("arch_list", "io.torchyard.arch-list"),
    )


def _probed(image: str, platform: str, observed: Observed, require: str | None) -> ImageFacts:
    listed = [str(a) for a in observed.details.get("torch_arch_list") or []]
    return ImageFacts(
        image=image,
        platform=platform,
        source="probe",
        combination=None,
        torch=observed.torch or None,
        cuda=observed.cuda or None,
        cudnn=_cudnn_version(observed.cudnn),
        nccl=observed.nccl or None,
        python=observed.python or None,
        os=observed.os or None,
        sass=tuple(a for a in listed if a.startswith("sm_")) if listed else None,
        ptx=tuple(a.replace("compute_", "sm_") for a in listed if a.startswith("compute_")),
        require_cuda=require,
    )


def _cudnn_version(number: object) -> str | None:
    """torch.backends.cudnn.version(): 92400 -> 9.24.0; 8700 -> 8.7.0."""
    if not isinstance(number, int) or number <= 0:
        return None
    if number >= 10000:
        return f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
    return f"{number // 1000}.{number % 1000 // 100}.{number % 100}"


def combination_of(m: Matrix, facts: ImageFacts) -> Combination | None:
    """The combination the image holds: the matrix's own for a torchyard image it knows, else one made from
    what the probe read (the matrix's variant where it has the release, with the code the image really has)."""
    for c in _matrix_combinations(m, facts):
        if facts.sass is None:
            return c
        return replace(c, variant=replace(c.variant, builds=(_build(c.platform, facts),)))
    return _synthetic(facts)


def _matrix_combinations(m: Matrix, facts: ImageFacts) -> list[Combination]:
    from builder.resolve.combos import Combination as Combo

    public, _, local = (facts.torch or "").partition("+")
    platform = _platform(facts.platform)
    found = []
    for release in m.torch:
        if str(release.version) != public:
            continue
        variant = release.variant(local or "cpu")
        base = next((o for o in m.os if o.name == facts.os), None) or _unknown_os(facts)
        if variant is not None and platform is not None:
            found.append(Combo(release, variant, facts.python or "?", base, platform))
    return found


def _synthetic(facts: ImageFacts) -> Combination | None:
    platform = _platform(facts.platform)
    if facts.torch is None or platform is None:
        return None
    public, _, local = facts.torch.partition("+")
    try:
        version, cuda = Version(public), Version(facts.cuda) if facts.cuda else None
        cudnn = Version(facts.cudnn) if facts.cudnn else None
    except InvalidVersion:
        return None
    name = local or ("cpu" if cuda is None else f"cu{cuda.major}{cuda.minor}")
    variant = TorchVariant(name=name, cuda=cuda, cuda_runtime=None, cuda_release=None, cudnn=cudnn, nccl=None,
                           builds=(_build(platform, facts),), note="", sources=())  # fmt: skip
    wheels = Wheels(platform=platform, pypi_default=name, python=(facts.python or "?",), platform_tag="?", sources=())
    release = TorchRelease(version=version, released="?", wheels=(wheels,), torchvision=version,
                           torchaudio=version, variants=(variant,), sources=())  # fmt: skip
    return Combination(release, variant, facts.python or "?", _unknown_os(facts), platform)


def _build(platform: Platform, facts: ImageFacts) -> Build:
    """The code the image was read to carry (no list read: not recorded), as the torch it reports names it."""
    sass = _archs(facts.sass) if facts.sass is not None else None
    local = (facts.torch or "").partition("+")[2] or None
    return Build(platform=platform, sass=sass, ptx=_archs(facts.ptx), local=local, note="", sources=())


def _archs(names: tuple[str, ...] | None) -> tuple[Arch, ...]:
    found = []
    for name in names or ():
        try:
            found.append(arch_from(name))
        except ValueError:
            continue
    return tuple(sorted(set(found)))


def _platform(text: str) -> Platform | None:
    return next((p for p in Platform if p.value == text), None)


def _unknown_os(facts: ImageFacts) -> OSBase:
    name = facts.os or "unknown"
    return OSBase(name=name, image="?", family="?", system_python=facts.python or "?", glibc=Version("0"),
                  python_images=(), python_image="", sources=())  # fmt: skip


def judge(m: Matrix, facts: ImageFacts, q: Query, *, cpu_host: bool = False) -> list[Check]:
    """The runtime rules on the image's combination, for the machine the query describes. `cpu_host`: a machine
    without a GPU, where the driver and GPU rules do not apply (the image's torch runs on the CPU)."""
    c = combination_of(m, facts)
    f = Facts(m)
    checks = []
    if q.platform_given and facts.platform != q.platform.value:
        checks.append(Check("platform", False, f"the image is {facts.platform}, the machine {q.platform.value}"))
    if c is None and facts.unread:
        checks.append(not_checked("torch", f"not read without a pull ({facts.unread})", (), Missing.INPUT))
        return checks
    if c is None:
        checks.append(Check("torch", False, f"no torch with a known version and platform in {facts.image}"))
        return checks
    gpu_checks = [rule(f, replace(q, platform=c.platform), c) for rule in RUNTIME_RULES if rule is not rule_platform]
    gpu_checks.append(rule_container_start(f, q.driver, q.gpus, facts.require_cuda))
    checks.append(rule_platform(f, replace(q, platform=c.platform), c))
    checks += [not_applicable(check) for check in gpu_checks] if cpu_host else gpu_checks
    return [*checks, *extension_checks(facts, q, cpu_host=cpu_host)]


def extension_checks(facts: ImageFacts, q: Query, *, cpu_host: bool) -> list[Check]:
    """torchyard's CUDA extensions have code for the architectures the image was built for, and no other: they need
    a GPU, and every GPU asked about needs code among them."""
    if not facts.extensions or facts.cuda is None:
        return []
    names = ", ".join(facts.extensions)
    if cpu_host:
        return [Check("extensions", False, f"its CUDA extensions ({names}) need a GPU; this machine has none")]
    if not q.archs:
        return [
            not_checked("extensions", "no GPU given", (), Missing.INPUT, f"a GPU among {' '.join(facts.built_for)}")
        ]
    built = tuple(sorted(set(_archs(facts.built_for))))
    missing = [a.name for a in q.archs if arch_support(a, built, ())[0] is ArchSupport.NONE]
    if missing:
        have = " ".join(facts.built_for) or "none"
        return [Check("extensions", False, f"its extensions ({names}) have no code for {', '.join(missing)} ({have})")]
    return [Check("extensions", True, f"its extensions ({names}) have code for {' '.join(a.name for a in q.archs)}")]
