"""A project's image as a plan (docs/project.md, "The project image"): its Dockerfile over the verified base image,
its build context, its content id, its name and tag. Pure apart from reading the project's files (the checked walk
of builder/pipeline/extension_dir.py, the one write_context copies); builder/pipeline/project_build.py executes it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.core.kinds import Flavor
from builder.engine import BuildRequest
from builder.pipeline.plan import Plan, content_hash_of
from builder.render.additions import Additions
from builder.render.project_stage import BASE_ARG, PROJECT_TARGET, ProjectStage, render_project
from builder.render.tags import project_repository, project_tag
from builder.trust.inventory import Inventory

PROJECT_LABEL = "io.torchyard.project"  # the project's name
PROJECT_CONTENT_LABEL = "io.torchyard.project-content"  # the project's content id: the up-to-date check
COPY_FLAG = "image.copy"  # what names a copied path in the walk's messages
# Given the base's and the built image's contents, writes the project's Python set into its lock; says what it did.
SetRecorder = Callable[[Inventory, Inventory], str]


@dataclass(frozen=True, kw_only=True)
class ProjectPlan:
    base: Plan  # the base image's plan: built, verified and smoke-tested as without a project
    flavor: Flavor  # the base image's flavor the project stage starts FROM
    stage: ProjectStage
    imports: tuple[str, ...]  # the modules the import check imports
    imports_from: str  # where they were read, or why there are none (then the check is "not checked")
    dockerfile: str
    context_files: tuple[tuple[str, bytes], ...]
    sources: tuple[tuple[str, Path, str], ...]  # (path in the context, host path, what named it): the checked walk
    content_id: str  # sha256 of the base's content hash, the Dockerfile, the files and every copied byte
    tag: str  # the base's immutable tag + -p<content id>
    # torchyard.lock holds no Python set yet: the build resolves it afresh (never up to date) and records it here
    record_set: SetRecorder | None = field(default=None, compare=False)

    @property
    def copies(self) -> tuple[tuple[str, Path, str], ...]:
        """What write_context copies by the checked walk (as Plan.copies)."""
        return self.sources

    @property
    def name(self) -> str:
        return self.stage.name

    def base_ref(self, repo: str) -> str:
        return f"{repo}:{self.base.target(self.flavor).tags.immutable}"

    def ref(self, repo: str) -> str:
        return f"{project_repository(repo, self.name)}:{self.tag}"

    def labels(self) -> dict[str, str]:
        """Given on the command line (the Dockerfile cannot carry its own content id)."""
        return {PROJECT_LABEL: self.name, PROJECT_CONTENT_LABEL: self.content_id}

    def checks(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(what, the command run in the image): each import, then the command's --help when it has one."""
        found = tuple((f"import {module}", ("python", "-c", f"import {module}")) for module in self.imports)
        command = self.stage.command
        return found + (((f"{' '.join(command)} --help", (*command, "--help")),) if command else ())


def make_project_plan(
    base: Plan,
    flavor: Flavor,
    stage: ProjectStage,
    deps: Additions,
    imports: tuple[tuple[str, ...], str],
    record_set: SetRecorder | None = None,
) -> ProjectPlan:
    """`deps`: the project's Python dependencies (builder/render/additions.py), checked against the base's pins
    (and, with a recorded set, pinned to it); `imports`: the modules to import and where they were read."""
    target = base.target(flavor)  # a flavor the combination cannot have: one RenderError with the reason
    dockerfile = render_project(base.spec, stage, deps)
    files = tuple(sorted((name, text.encode()) for name, text in deps.files))
    code = tuple((cc.context, Path(cc.host), COPY_FLAG) for cc in stage.code)
    sources = code + tuple((s.context, Path(s.host), s.flag) for s in deps.sources)
    base_args = (("base", base.content_hash), ("base-tag", target.tags.immutable))
    content_id = content_hash_of(dockerfile, base_args, files, sources)
    return ProjectPlan(
        base=base,
        flavor=flavor,
        stage=stage,
        imports=imports[0],
        imports_from=imports[1],
        dockerfile=dockerfile,
        context_files=files,
        sources=sources,
        content_id=content_id,
        tag=project_tag(target.tags.immutable, content_id),
        record_set=record_set,
    )


def project_request(
    plan: ProjectPlan,
    context_dir: Path,
    repo: str,
    secret_files: dict[str, str],
    provenance: tuple[tuple[str, str], ...] = (),
) -> BuildRequest:
    """The build of the project stage, FROM the base image by its immutable tag, under no name (tagged after
    its checks passed)."""
    base = plan.base
    return BuildRequest(
        context=context_dir,
        dockerfile=context_dir / "Dockerfile",
        target=PROJECT_TARGET,
        build_args=tuple(sorted((*base.build_args, (BASE_ARG, plan.base_ref(repo))))),
        secrets=tuple((s.id, secret_files.get(s.id, s.source)) for s in base.secrets),
        labels=tuple(sorted((dict(provenance) | plan.labels()).items())),
        platform=base.combination.platform.value,
    )


def project_json(plan: ProjectPlan | None, repo: str, context_dir: Path) -> dict[str, Any]:
    """plan.json's `project` (docs/schemas.md), beside the base's keys; {} outside a project. `context_dir`: where
    its Dockerfile is written (the base's output folder's project/)."""
    if plan is None:
        return {}
    unchecked = [] if plan.imports else [{"check": "import", "result": "not checked", "why": plan.imports_from}]
    return {
        "project": {
            "name": plan.name,
            "ref": plan.ref(repo),
            "base_ref": plan.base_ref(repo),
            "flavor": plan.flavor.value,
            "content_id": plan.content_id,
            "dockerfile": str(context_dir / "Dockerfile"),
            "labels": plan.labels(),
            "checks": [{"check": what, "command": list(command)} for what, command in plan.checks()] + unchecked,
        }
    }
