"""One combination + the options -> one ImageSpec: every decision about the image, computed once.

The plan (builder/pipeline/plan.py), the tags and the Dockerfile context read this spec; none of them asks the
helpers of builder/render/context.py again, so a walk from `choose_plan` goes down to the helpers once and
comes back up with one frozen value (docs/architecture.md, "The image spec").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from builder.core import safety
from builder.core.archs import Arch
from builder.core.errors import RenderError
from builder.core.kinds import Flavor, Installer, Strategy
from builder.matrix.model import Matrix
from builder.render import context as ctx
from builder.render import tags as tags_
from builder.render.additions import Additions, additions
from builder.render.layers import LayerPlan, layer_plan
from builder.render.options import Extension, RenderOptions
from builder.render.pinning import mirrored, pinned
from builder.render.tags import ImageTags
from builder.resolve import onnx
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.report import min_driver


@dataclass(frozen=True, kw_only=True)
class ImageUser:
    """--user: the non-root user the images run as."""

    name: str
    uid: int


@dataclass(frozen=True, kw_only=True)
class TargetSpec:
    """What one flavor (a final stage) of the image is: its tags and its labels."""

    flavor: Flavor
    tags: ImageTags
    labels: tuple[tuple[str, str], ...]


@dataclass(frozen=True, kw_only=True)
class ImageSpec:
    combination: Combination
    strategy: Strategy
    installer: Installer
    uv_pip: str  # the pinned uv of --installer uv's stage
    archs: tuple[Arch, ...]  # what the image's code is compiled for
    custom_archs: tuple[Arch, ...]  # the --arch list when given (it is part of the tags), else ()
    extras: str | None  # tags.extras_id of the options: part of the tags
    bases: ctx.Bases  # pinned (--locked) and mirrored (--registry-mirror)
    min_driver: str | None
    nvcc_pip: tuple[str, ...] | None  # the toolkit wheels of devel (wheels strategy, CUDA 13)
    toolchain_pip: tuple[str, ...]
    cuda_home: str | None  # set in devel's environment; None where the image has no CUDA toolkit
    nvidia_env: tuple[tuple[str, str], ...]
    os_packages: tuple[str, ...]
    build_packages: tuple[str, ...]
    toolchain_packages: tuple[str, ...]
    apt_origin: str
    torch_index: str | None
    constraints: str  # constraints.txt: torch, torchvision, torchaudio pinned
    additions: Additions  # --pip, --requirements: what is installed on top of the venv, checked against the pins
    extensions: tuple[Extension, ...]
    user: ImageUser | None
    layers: LayerPlan
    inference_pip: tuple[str, ...]  # inference: the exporter's packages and ONNX Runtime, pinned; () without it
    notebook_pip: tuple[str, ...]  # notebook: JupyterLab, ipykernel, ipywidgets, pinned; () without it
    targets: tuple[TargetSpec, ...]  # every flavor this combination can have
    unavailable: tuple[tuple[Flavor, str], ...]  # flavors it cannot have, and why

    @property
    def nvcc(self) -> bool:
        """Whether devel has nvcc: the toolkit wheels, or the nvidia/cuda devel image of cuda-base."""
        cuda_base = self.strategy is Strategy.CUDA_BASE and self.combination.variant.cuda is not None
        return bool(self.nvcc_pip) or cuda_base

    def base_image(self, flavor: Flavor) -> str:
        """The image a flavor's final stage starts from."""
        toolchain = self.bases.toolchain_image
        return toolchain if flavor is Flavor.DEVEL and toolchain else self.bases.os_image

    def path(self, flavor: Flavor) -> str:
        cuda_bin = f"{self.cuda_home}/bin:" if self.cuda_home and flavor is Flavor.DEVEL else ""
        return f"{ctx.VENV}/bin:{cuda_bin}{ctx.SYSTEM_PATH}"

    def env(self, flavor: Flavor) -> tuple[tuple[str, str], ...]:
        home = (("CUDA_HOME", self.cuda_home),) if self.cuda_home and flavor is Flavor.DEVEL else ()
        return self.nvidia_env + home

    def labels(self, flavor: Flavor) -> tuple[tuple[str, str], ...]:
        """A flavor's labels; () for a flavor the combination cannot have."""
        return next((t.labels for t in self.targets if t.flavor is flavor), ())


def image_spec(m: Matrix, c: Combination, options: RenderOptions) -> ImageSpec:
    """Every decision about the image, in the order a bad input is reported: architectures, bases, toolkit,
    tags and labels, then the additions (requirements, index, --pip, user)."""
    f = Facts(m)
    archs = ctx.archs_for(c, options)
    ctx.check_archs(m, c, archs)
    bases = mirrored(pinned(ctx.bases(m, c, options.strategy), options.base_lock, c.platform), options.registry_mirror)
    nvcc, unavailable = _toolkit(c, options)
    inference_pip, no_inference = _inference(m, c)
    notebook_pip, no_notebook = _notebook(m, c)
    unavailable += no_inference + no_notebook
    stage_pip = {Flavor.INFERENCE: inference_pip, Flavor.NOTEBOOK: notebook_pip}
    floor = min_driver(f, c)
    custom = archs if options.archs else ()
    extras = tags_.extras_id(options)
    targets = tuple(
        TargetSpec(
            flavor=flavor,
            tags=tags_.image_tags(m, c, flavor, options.strategy, custom, extras),
            labels=tuple(ctx.labels(c, flavor, options.strategy, archs, floor, options, stage_pip.get(flavor, ()))),
        )
        for flavor in Flavor
        if flavor not in dict(unavailable)
    )
    has_toolkit = nvcc or options.strategy is Strategy.CUDA_BASE
    return ImageSpec(
        combination=c,
        strategy=options.strategy,
        installer=options.installer,
        uv_pip=ctx.UV_PIP,
        archs=archs,
        custom_archs=custom,
        extras=extras,
        bases=bases,
        min_driver=floor,
        nvcc_pip=nvcc,
        toolchain_pip=tuple(ctx.toolchain_pip(nvcc)),
        cuda_home=ctx.cuda_home(c, options.strategy) if has_toolkit else None,
        nvidia_env=tuple(ctx.nvidia_env(f, c, bases)),
        os_packages=tuple(ctx.os_packages(c, bases.system_python)),
        build_packages=tuple(ctx.build_packages(bases.system_python, options.installer)),
        toolchain_packages=tuple(ctx.toolchain_packages(bases.system_python)),
        apt_origin=ctx.APT_ORIGINS.get(c.os.family, "http://deb.debian.org"),
        torch_index=ctx.torch_index(c, options),
        constraints=ctx.constraints(c),
        additions=additions(c, options, Path.cwd()),
        extensions=tuple(_checked(e) for e in options.extensions),
        user=_user(options),
        layers=layer_plan(c),
        inference_pip=inference_pip,
        notebook_pip=notebook_pip,
        targets=targets,
        unavailable=unavailable,
    )


def render_problem(m: Matrix, c: Combination, strategy: Strategy) -> str | None:
    """Why this strategy cannot render the combination (None: it can): it must find its base images (cuda-base
    needs a CUDA variant, the OS's own Python and a published nvidia/cuda image). Asked of candidates before a
    combination is chosen, so a choice never falls on one that cannot be built."""
    try:
        ctx.bases(m, c, strategy)
    except RenderError as exc:
        return str(exc)
    return None


def _toolkit(c: Combination, options: RenderOptions) -> tuple[tuple[str, ...] | None, tuple[tuple[Flavor, str], ...]]:
    """The toolkit wheels, or why devel is unavailable (an --extension needs devel: then it is an error)."""
    try:
        return ctx.nvcc_pip(c, options.strategy), ()
    except RenderError as exc:
        if options.extensions:
            raise RenderError(f"--extension needs the devel toolchain: {exc}") from None
        return None, ((Flavor.DEVEL, str(exc)),)


def _inference(m: Matrix, c: Combination) -> tuple[tuple[str, ...], tuple[tuple[Flavor, str], ...]]:
    """The inference image's pinned packages (torch.onnx's exporter packages, then ONNX Runtime), or why the
    combination has no inference image (builder/resolve/onnx.py: the rule onnxruntime)."""
    found = onnx.choose(m, c)
    if found.release is None:
        return (), ((Flavor.INFERENCE, f"no ONNX Runtime for it: {found.reason}"),)
    return onnx.packages(m, c, found), ()


def notebook_problem(m: Matrix, c: Combination) -> str | None:
    """Why combination c has no notebook image (None: it has one); what run --notebook and devcontainer say
    instead of a build line that would fail."""
    unavailable = _notebook(m, c)[1]
    return unavailable[0][1] if unavailable else None


def _notebook(m: Matrix, c: Combination) -> tuple[tuple[str, ...], tuple[tuple[Flavor, str], ...]]:
    """The notebook image's pinned packages ([[notebook_tool]]), or why the combination has none: a pin whose
    Requires-Python refuses the combination's Python."""
    refused = next((t for t in m.notebook_tools if Version(c.python) not in t.python), None)
    if refused is not None:
        where = ", ".join(m.sources[s].url for s in refused.sources if s in m.sources)
        reason = f"{refused.name} {refused.version} requires Python {refused.python} ({where}), not {c.python}"
        return (), ((Flavor.NOTEBOOK, reason),)
    if not m.notebook_tools:
        return (), ((Flavor.NOTEBOOK, "matrix.toml pins no notebook packages ([[notebook_tool]])"),)
    return tuple(f"{t.name}=={t.version}" for t in m.notebook_tools), ()


def _checked(e: Extension) -> Extension:
    """An extension's name and requirement go into COPY and RUN lines: checked like every other flag."""
    safety.check("--extension", e.name, safety.PIP_REQUIREMENT, "my_ext")
    if e.kind == "pip":
        safety.check("--extension", e.spec, safety.PIP_REQUIREMENT, "flash-attn==2.7.4")
    return e


def _user(options: RenderOptions) -> ImageUser | None:
    found = ctx.user_of(options)
    return None if found is None else ImageUser(name=found["name"], uid=found["uid"])
