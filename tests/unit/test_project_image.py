"""The project image (docs/project.md, "The project image"): its stage over the verified base (dependencies before
code, hadolint clean), its name and tag, its content id, the checked walk of its copied folders, the modules its
import check imports, and the pipeline's project step against the fake engine (the checks run, a failure is exit 4
with nothing tagged, the base's smoke suite is not run for it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fake_engine import Contents, FakeEngine, FakeRegistry, contents_of, wall_off_the_engine
from render_kit import instructions, matrix, options, requirements
from test_render_matrix import HADOLINT_CONFIG, _lint

from builder.core.errors import BuildError, ProjectError, RenderError
from builder.core.kinds import Flavor, Status
from builder.engine import RunResult
from builder.pipeline.pipeline import BuildSettings, build
from builder.pipeline.plan import make_plan
from builder.pipeline.project_build import PROJECT_DIR, build_project
from builder.pipeline.project_plan import PROJECT_CONTENT_LABEL, PROJECT_LABEL, ProjectPlan
from builder.pipeline.suite import OUT
from builder.project.config import load_project
from builder.project.image import base_options, import_names, project_plan
from builder.render.options import RenderOptions
from builder.render.tags import project_repository, project_tag
from builder.resolve.combos import Combination

IDENT = "torch2.14.1-cu130-py3.11-debian12"
BASE_TAG = "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
REPO = "127.0.0.1:5000/team"
FULL = """[project]
name = "my-model"

[dependencies]
requirements = ["requirements.txt"]
pip = ["einops==0.8.1"]
system_packages = ["libgl1"]

[image]
copy = [{ from = "src", to = "/app" }, { from = "conf.yaml", to = "/etc/my-model/conf.yaml" }]
workdir = "/app"
command = ["python", "-m", "my_model.serve"]
env = { GREETING = "a \\"quoted\\" $HOME", PYTHONUNBUFFERED = "1" }
"""


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "my-model"
    (root / "src" / "my_model").mkdir(parents=True)
    (root / "src" / "my_model" / "__init__.py").write_text("VERSION = 1\n")
    (root / "conf.yaml").write_text("a: 1\n")
    (root / "requirements.txt").write_text("numpy\n")
    (root / "torchyard.toml").write_text(FULL)
    return root


def combo() -> Combination:
    from render_kit import combination

    return combination(IDENT)


def project_options(root: Path, **kwargs: Any) -> RenderOptions:
    """The build's options as a project's flags make them: its requirements file and pip requirements."""
    reqs = requirements((root / "requirements.txt").read_text(), root)
    return options(requirements=reqs, extra_pip=("einops==0.8.1",), **kwargs)


def planned(root: Path, *, deps: bool = True, **kwargs: Any) -> ProjectPlan:
    opts = project_options(root, **kwargs) if deps else options(**kwargs)
    base = make_plan(matrix(), combo(), base_options(opts))
    return project_plan(load_project(root / "torchyard.toml"), base, Flavor.RUNTIME, opts)


# --- the stage -------------------------------------------------------------------------------------------


def test_the_stage_starts_from_the_base_and_lays_dependencies_before_the_code(folder: Path) -> None:
    steps = instructions(planned(folder).dockerfile)
    ops = [op for op, _ in steps]
    assert steps[:2] == [("ARG", "TORCHYARD_BASE"), ("FROM", "${TORCHYARD_BASE} AS project")]
    apt = next(i for i, (op, args) in enumerate(steps) if op == "RUN" and "apt-get install" in args)
    pip = next(i for i, (op, args) in enumerate(steps) if op == "RUN" and "/opt/venv/bin/pip install" in args)
    code = [i for i, (op, args) in enumerate(steps) if op == "COPY" and args.startswith("code/")]
    assert apt < pip < code[0] and code == [code[0], code[0] + 1]
    assert [args for op, args in steps if op == "COPY"][-2:] == ["code/0/ /app", "code/1 /etc/my-model/conf.yaml"]
    assert ops[code[-1] + 1 :] == ["WORKDIR", "ENV", "CMD"]
    assert "libgl1" in steps[apt][1] and "${APT_MIRROR}" in steps[apt][1] and "id=cacert" in steps[apt][1]
    assert "-r /opt/torchyard/requirements.txt 'einops==0.8.1'" in steps[pip][1]
    assert dict(steps)["CMD"] == '["python", "-m", "my_model.serve"]'
    assert dict(steps)["ENV"].split()[0] == 'GREETING="a'


def test_the_base_plan_holds_none_of_the_project(folder: Path) -> None:
    p = planned(folder)
    plain = make_plan(matrix(), combo(), options())
    assert (p.base.content_hash, p.base.target(Flavor.RUNTIME).tags.immutable) == (plain.content_hash, BASE_TAG)
    assert "einops" not in p.base.dockerfile and "requirements.txt" not in dict(p.base.context_files)


def test_a_user_of_the_base_is_root_for_the_stage_and_restored_after_it(folder: Path) -> None:
    ops = [(op, args) for op, args in instructions(planned(folder, user="dev").dockerfile) if op == "USER"]
    assert ops == [("USER", "0:0"), ("USER", "1000:1000")]


def test_an_empty_project_is_the_base_image_under_the_project_name(folder: Path) -> None:
    (folder / "torchyard.toml").write_text('[project]\nname = "my-model"\n')
    p = planned(folder, deps=False)
    assert [op for op, _ in instructions(p.dockerfile)] == ["ARG", "FROM", "ARG", "SHELL"]
    assert p.sources == () and p.context_files == ()


def test_the_project_dockerfiles_are_hadolint_clean(folder: Path, tmp_path: Path) -> None:
    files = []
    for name, plan_ in (("full", planned(folder)), ("user", planned(folder, user="dev"))):
        path = tmp_path / f"Dockerfile.{name}"
        path.write_text(plan_.dockerfile)
        files.append(path)
    (folder / "torchyard.toml").write_text("")
    files.append(tmp_path / "Dockerfile.empty")
    files[-1].write_text(planned(folder, deps=False).dockerfile)
    assert _lint(files, HADOLINT_CONFIG, tmp_path) == []


# --- name, tag, content id ---------------------------------------------------------------------------------


def test_the_image_is_named_after_the_project_and_tagged_base_plus_content_id(folder: Path) -> None:
    p = planned(folder)
    assert p.tag == f"{BASE_TAG}-p{p.content_id[:12]}"
    assert p.ref(REPO) == f"{REPO}/my-model:{p.tag}"
    assert p.base_ref(REPO) == f"{REPO}:{BASE_TAG}"
    assert p.labels() == {PROJECT_LABEL: "my-model", PROJECT_CONTENT_LABEL: p.content_id}
    assert project_repository("torchyard", "my-model") == "torchyard/my-model"


def test_a_tag_too_long_is_refused_before_a_build() -> None:
    with pytest.raises(RenderError, match="the project's tag"):
        project_tag("x" * 120, "0" * 64)


def test_without_a_name_the_folder_names_the_image_when_it_can(folder: Path, tmp_path: Path) -> None:
    (folder / "torchyard.toml").write_text("")
    assert planned(folder).name == "my-model"
    odd = tmp_path / "My Model"
    odd.mkdir()
    (odd / "torchyard.toml").write_text("")
    (odd / "requirements.txt").write_text("numpy\n")
    with pytest.raises(ProjectError, match=r"project.name: not set, and the folder's name 'my model'"):
        planned(odd)


def test_a_code_change_changes_the_content_id_not_the_dockerfile(folder: Path) -> None:
    before = planned(folder)
    (folder / "src" / "my_model" / "__init__.py").write_text("VERSION = 2\n")
    after = planned(folder)
    assert after.dockerfile == before.dockerfile
    assert after.content_id != before.content_id and after.tag != before.tag
    assert after.base.content_hash == before.base.content_hash


def test_a_dependency_change_changes_the_dependency_layer(folder: Path) -> None:
    before = planned(folder)
    (folder / "requirements.txt").write_text("numpy\nscipy\n")
    after = planned(folder)
    assert dict(after.context_files)["requirements.txt"] != dict(before.context_files)["requirements.txt"]
    assert after.content_id != before.content_id and after.base.content_hash == before.base.content_hash


# --- the checked walk --------------------------------------------------------------------------------------


def test_a_link_out_of_a_copied_folder_is_refused(folder: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("key\n")
    (folder / "src" / "leak").symlink_to(secret)
    with pytest.raises(RenderError, match=r"image.copy .*leak links to .*secret.txt, outside the folder"):
        planned(folder)


def test_a_special_file_in_a_copied_folder_is_refused(folder: Path) -> None:
    os.mkfifo(folder / "src" / "pipe")
    with pytest.raises(RenderError, match="pipe is a named pipe"):
        planned(folder)


def test_a_link_inside_the_folder_is_kept_and_the_context_holds_the_code(folder: Path, tmp_path: Path) -> None:
    from builder.pipeline.context_dir import write_context

    (folder / "src" / "alias").symlink_to("my_model")
    out = tmp_path / "out"
    write_context(planned(folder), out)
    assert (out / "code" / "0" / "my_model" / "__init__.py").read_text() == "VERSION = 1\n"
    assert os.readlink(out / "code" / "0" / "alias") == "my_model"
    assert (out / "code" / "1").read_text() == "a: 1\n"
    assert (out / "requirements.txt").read_text().endswith("numpy\n")


# --- the import check's modules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "pyproject", "expected"),
    [
        ('["python", "-m", "my_model.serve"]', None, (("my_model",), "image.command")),
        ('["/opt/venv/bin/python3", "-m", "app"]', None, (("app",), "image.command")),
        ('["my-model-serve"]', '[project]\nname = "My-Model.x"\n', (("my_model_x",), "pyproject.toml's project.name")),
        (None, "not toml [", ((), 'no image.command = ["python", "-m", PACKAGE] and no pyproject.toml with a '
                                  "[project] name")),
    ],
)  # fmt: skip
def test_the_import_check_imports_the_commands_module_else_pyprojects_name(
    folder: Path, command: str | None, pyproject: str | None, expected: tuple[tuple[str, ...], str]
) -> None:
    text = '[project]\nname = "my-model"\n' + (f"[image]\ncommand = {command}\n" if command else "")
    (folder / "torchyard.toml").write_text(text)
    if pyproject is not None:
        (folder / "pyproject.toml").write_text(pyproject)
    assert import_names(load_project(folder / "torchyard.toml")) == expected


# --- the pipeline ------------------------------------------------------------------------------------------


def engine_for(p: ProjectPlan, **knobs: object) -> FakeEngine:
    contents = contents_of(p.base) | {"project": Contents(dict(p.base.target(Flavor.RUNTIME).labels), {})}
    engine = FakeEngine(contents, registry=FakeRegistry())
    for name, value in knobs.items():
        setattr(engine, name, value)
    return engine


def settings(tmp_path: Path, **kwargs: object) -> BuildSettings:
    return BuildSettings(repo=REPO, flavors=(Flavor.RUNTIME,), out_dir=tmp_path / "ctx", **kwargs)  # type: ignore[arg-type]


def both(engine: FakeEngine, p: ProjectPlan, s: BuildSettings, log: list[str]) -> Status:
    assert engine.registry is not None
    build(engine, p.base, s, log.append, engine.registry)
    return build_project(engine, p, s, log.append, engine.registry).status


def smoke_runs(engine: FakeEngine) -> list[str]:
    return [c.args[0] for c in engine.of("run") if any(m.target == OUT for m in c.mounts)]


def test_the_project_is_built_over_the_base_checked_then_tagged(folder: Path, tmp_path: Path) -> None:
    p, log = planned(folder), list[str]()
    engine = engine_for(p)
    assert both(engine, p, settings(tmp_path), log) is Status.BUILT
    _, project_build = engine.of("build")
    argv = project_build.args
    assert argv[argv.index("--target") + 1] == "project"
    assert f"TORCHYARD_BASE={REPO}:{BASE_TAG}" in argv and f"{PROJECT_CONTENT_LABEL}={p.content_id}" in argv
    assert argv[-1] == str(tmp_path / "ctx" / PROJECT_DIR)
    project_id = engine.tags[p.ref(REPO)]
    assert engine.built_target[project_id] == "project"
    runs = [c.args[1:] for c in engine.of("run") if c.args[0] == project_id]
    assert runs == [("python", "-c", "import my_model"), ("python", "-m", "my_model.serve", "--help")]
    assert smoke_runs(engine) == [engine.tags[f"{REPO}:{BASE_TAG}"]]  # the base's suite, in the base only
    ops = [c.op for c in engine.calls]
    assert ops.index("tag", ops.index("run", len(ops) - 6)) > ops.index("run")
    assert log[-1] == f"[project] tagged {p.ref(REPO)}"


def test_a_code_change_rebuilds_the_project_only(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    engine = engine_for(p)
    both(engine, p, settings(tmp_path), [])
    (folder / "src" / "my_model" / "__init__.py").write_text("VERSION = 2\n")
    changed, log = planned(folder), list[str]()
    engine.calls.clear()
    assert both(engine, changed, settings(tmp_path), log) is Status.BUILT
    assert [c.args[c.args.index("--target") + 1] for c in engine.of("build")] == ["project"]
    assert smoke_runs(engine) == []
    assert f"[runtime] {REPO}:{BASE_TAG} is up to date locally: no build" in log
    assert (tmp_path / "ctx" / PROJECT_DIR / "code" / "0" / "my_model" / "__init__.py").read_text() == "VERSION = 2\n"


def test_an_unchanged_project_is_not_built_again(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    engine = engine_for(p)
    both(engine, p, settings(tmp_path), [])
    engine.calls.clear()
    log: list[str] = []
    assert both(engine, p, settings(tmp_path), log) is Status.UP_TO_DATE
    assert engine.of("build") == [] and engine.of("run") == []
    assert log[-1] == f"[project] {p.ref(REPO)} is up to date locally: no build"


def test_a_failed_import_is_exit_4_with_its_output_and_nothing_tagged(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    trace = (
        "Traceback (most recent call last):\n  File \"<string>\", line 1\nModuleNotFoundError: No module 'my_model'\n"
    )
    engine = engine_for(p, scripted={"python": RunResult(1, trace)})
    with pytest.raises(BuildError) as caught:
        both(engine, p, settings(tmp_path), [])
    assert caught.value.exit_code == 4
    assert str(caught.value) == (
        "[project] check `import my_model` failed (exit 1), nothing tagged: Traceback (most recent call last): | "
        "File \"<string>\", line 1 | ModuleNotFoundError: No module 'my_model'"
    )
    assert p.ref(REPO) not in engine.tags


def test_a_failed_help_is_exit_4_too(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    engine = engine_for(p)
    seen: list[list[str]] = []

    def run(image: str, command: list[str], **kwargs: object) -> RunResult:
        seen.append(command)
        return RunResult(2, "usage: serve\nerror: unrecognized arguments") if "--help" in command else RunResult(0, "")

    assert engine.registry is not None
    build(engine, p.base, settings(tmp_path), lambda line: None, engine.registry)
    engine.run = run  # type: ignore[method-assign]
    with pytest.raises(BuildError, match=r"check `python -m my_model.serve --help` failed \(exit 2\)"):
        build_project(engine, p, settings(tmp_path), lambda line: None)
    assert p.ref(REPO) not in engine.tags


def test_without_a_known_package_the_import_check_says_not_checked(folder: Path, tmp_path: Path) -> None:
    (folder / "torchyard.toml").write_text('[project]\nname = "my-model"\n')
    p, log = planned(folder), list[str]()
    engine = engine_for(p)
    both(engine, p, settings(tmp_path), log)
    assert "[project] import check: not checked (no image.command = [\"python\", \"-m\", PACKAGE] and no " \
        "pyproject.toml with a [project] name)" in log  # fmt: skip
    assert p.ref(REPO) in engine.tags


def test_push_pushes_the_project_image_under_its_repository(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    engine = engine_for(p)
    both(engine, p, settings(tmp_path, push=True), [])
    assert engine.pushed()[-1] == p.ref(REPO)


# --- torchyard build in the project folder -------------------------------------------------------------------


def cli_build(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], **knobs: object
) -> tuple[int, str, str, FakeEngine]:
    """`torchyard build` in the project folder (torch.id decides: the machine is not read), on the fake engine."""
    from project_kit import cli

    import builder.cli.build_cmd
    import builder.pipeline.pipeline

    monkeypatch.chdir(folder)
    text = (folder / "torchyard.toml").read_text()
    (folder / "torchyard.toml").write_text(f'[torch]\nid = "{IDENT}"\n\n' + text)
    base = make_plan(matrix(), combo(), options())
    contents = contents_of(base) | {"project": Contents(dict(base.target(Flavor.RUNTIME).labels), {})}
    engine = FakeEngine(contents, registry=FakeRegistry())
    for name, value in knobs.items():
        setattr(engine, name, value)
    monkeypatch.setattr(builder.cli.build_cmd, "DockerEngine", lambda: engine)
    monkeypatch.setattr(builder.pipeline.pipeline, "Registry", lambda auth: engine.registry)
    code, out, err = cli(capsys, "build", "--no-host-settings", "--repo", REPO, "-o", "out")
    return code, out, err, engine


def test_torchyard_build_in_the_project_builds_checks_and_tags_its_image(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err, engine = cli_build(folder, monkeypatch, capsys)
    assert (code, err.count("error")) == (0, 0), err
    [ref] = [r for r in engine.tags if r.startswith(f"{REPO}/my-model:{BASE_TAG}-p")]
    assert out.splitlines()[-1].startswith(f"project  built       {ref} ")
    assert "[project] import my_model: passed" in out and "[project] python -m my_model.serve --help: passed" in out
    assert (folder / "out" / PROJECT_DIR / "Dockerfile").is_file()


def test_a_failed_check_exits_4_in_one_line(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = {"python": RunResult(1, "ModuleNotFoundError: No module named 'my_model'\n")}
    code, _, err, engine = cli_build(folder, monkeypatch, capsys, scripted=failed)
    assert code == 4
    assert err.splitlines()[-1] == "torchyard: error: [project] check `import my_model` failed (exit 1), " \
        "nothing tagged: ModuleNotFoundError: No module named 'my_model'"  # fmt: skip
    assert not [r for r in engine.tags if "/my-model:" in r]
