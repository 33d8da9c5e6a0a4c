"""--requirements as pip reads it (builder/render/reqfile.py, reqline.py) and --pip's local paths and git URLs,
through render: what the build context and the Dockerfile get, what is refused (one line naming file:line), the
index options that go into the pipconf secret and nowhere else, and `torchyard lock export`'s requirements.txt
read back."""

from __future__ import annotations

from pathlib import Path

import pytest
from render_kit import combination, no_host_network, plan, requirements
from test_render_matrix import HADOLINT_CONFIG, _lint

from builder.cli.main import main
from builder.core.errors import RenderError, UsageError
from builder.core.kinds import Installer, Strategy
from builder.lock.model import Artifact, Lock, Locked
from builder.lock.writers import requirements_txt
from builder.pipeline.context_dir import write_context
from builder.pipeline.plan import Plan
from builder.render.network import Network
from builder.render.pins import image_pins
from builder.render.requirements import with_file_indexes

CUDA13 = "torch2.14.1-cu130-py3.11-debian12"
SHA = "ab" * 32


def _files(p: Plan) -> dict[str, str]:
    return {name: data.decode() for name, data in p.context_files if name.startswith("requirements")}


def _project(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "0.1"\n')
    return folder


# -- what pip reads: spaces, markers, comments, continuations, includes --------------------------------------------


def test_specifiers_with_spaces_markers_and_comments_are_read_as_pip_reads_them(tmp_path: Path) -> None:
    text = (
        "# a comment line\n"
        'numpy >= 1.20 ; python_version >= "3.9"   # a trailing comment\n'
        "requests[socks] >= 2.31, < 3\n"
        "scipy \\\n"
        "  ~= 1.13\n"
        "\n"
        "pywin32==1.0 ; sys_platform == 'win32'\n"
    )
    p = plan(CUDA13, requirements=requirements(text, tmp_path))
    lines = _files(p)["requirements.txt"].splitlines()[1:]
    assert lines == ['numpy>=1.20; python_version >= "3.9"', "requests[socks]<3,>=2.31", "scipy~=1.13",
                     'pywin32==1.0; sys_platform == "win32"']  # fmt: skip
    assert "-r /opt/torchyard/requirements.txt" in p.dockerfile
    assert "numpy" not in p.dockerfile  # the file's text is in the context, never in a RUN line


def test_includes_resolve_relative_to_the_file_that_names_them(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "more.txt").write_text("-r deeper.txt\n-c cons.txt\neinops==0.8.1\n")
    (tmp_path / "sub" / "deeper.txt").write_text("six\n")
    (tmp_path / "sub" / "cons.txt").write_text("urllib3 < 3\n")
    reqs = requirements("numpy\n-r sub/more.txt\n", tmp_path)
    assert [(e.where, e.line) for e in reqs.entries] == [
        ("requirements.txt:1", "numpy"),
        ("sub/deeper.txt:1", "six"),
        ("sub/more.txt:3", "einops==0.8.1"),
    ]
    assert [(e.where, e.line) for e in reqs.constraints] == [("sub/cons.txt:1", "urllib3<3")]
    p = plan(CUDA13, requirements=reqs)
    assert _files(p)["requirements-constraints.txt"].endswith("\nurllib3<3\n")
    assert "-r /opt/torchyard/requirements.txt -c /opt/torchyard/requirements-constraints.txt" in p.dockerfile


def test_an_include_cycle_is_refused_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("-r b.txt\n")
    (tmp_path / "b.txt").write_text("six\n-r a.txt\n")
    with pytest.raises(UsageError) as exc:
        requirements("-r a.txt\n", tmp_path)
    assert str(exc.value) == (
        "--requirements b.txt:2: -r a.txt: includes itself (requirements.txt -> a.txt -> b.txt -> a.txt)"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("-r ../outside.txt", "--requirements requirements.txt:1: ../outside.txt: outside "),
        ("../outside-proj", "--requirements requirements.txt:1: ../outside-proj: outside "),
        ("-r linked.txt", "--requirements requirements.txt:1: linked.txt: outside "),
        ("-e ./proj", "--requirements requirements.txt:1: -e ./proj: an editable install points at sources"),
        ("--no-binary :all:", "--requirements requirements.txt:1: --no-binary is not an option torchyard takes"),
        ("numpy --hash=md5:00", "--requirements requirements.txt:1: --hash 'md5:00': expected sha256:"),
        ("y @ https://u:pw@host/y.whl", "--requirements requirements.txt:1: 'https://***@host/y.whl': credentials"),
        ("y @ git+ssh://git@host/y.git", "--requirements requirements.txt:1: 'git+ssh://***@host/y.git': only https"),
    ],
)
def test_what_pip_would_read_differently_or_leak_is_refused(tmp_path: Path, line: str, message: str) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (tmp_path / "outside.txt").write_text("six\n")
    _project(tmp_path / "outside-proj")
    _project(folder / "proj")
    (folder / "linked.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(UsageError) as exc:
        requirements(line + "\n", folder)
    assert str(exc.value).startswith(message), str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_local_project_is_copied_by_the_checked_walk_and_a_link_out_of_it_is_refused(tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj")
    (proj / "src.py").write_text("x = 1\n")
    p = plan(CUDA13, requirements=requirements("./proj\n", tmp_path))
    assert _files(p)["requirements.txt"].endswith("\n/tmp/torchyard-req/01-proj\n")
    assert "--mount=type=bind,source=req,target=/tmp/torchyard-req,rw" in p.dockerfile
    write_context(p, tmp_path / "out")
    assert (tmp_path / "out" / "req" / "01-proj" / "src.py").read_text() == "x = 1\n"
    (tmp_path / "secret.txt").write_text("private\n")
    (proj / "leak.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(RenderError, match=r"^--requirements requirements.txt:1 .*proj: leak.txt links to .*outside"):
        plan(CUDA13, requirements=requirements("./proj\n", tmp_path))


def test_a_wheel_and_a_folder_of_wheels_are_copied_beside_it(tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "a-1.0-py3-none-any.whl").write_bytes(b"PK")
    (tmp_path / "b-2.0-py3-none-any.whl").write_bytes(b"PK")
    p = plan(CUDA13, requirements=requirements("-f ./wheels\n--no-index\n./b-2.0-py3-none-any.whl\n", tmp_path))
    assert "--no-index --find-links /tmp/torchyard-req/01-wheels" in p.dockerfile
    assert _files(p)["requirements.txt"].endswith("\n/tmp/torchyard-req/02/b-2.0-py3-none-any.whl\n")
    write_context(p, tmp_path / "out")
    assert (tmp_path / "out" / "req" / "02" / "b-2.0-py3-none-any.whl").read_bytes() == b"PK"
    assert (tmp_path / "out" / "req" / "01-wheels" / "a-1.0-py3-none-any.whl").is_file()


# -- hashes, index options ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("installer", list(Installer))
def test_hashes_install_the_file_with_require_hashes_apart(tmp_path: Path, installer: Installer) -> None:
    reqs = requirements(f"six==1.16.0 \\\n    --hash=sha256:{SHA}\n", tmp_path)
    p = plan(CUDA13, installer=installer, requirements=reqs, extra_pip=("einops",))
    assert "-r /opt/torchyard/requirements.txt --require-hashes; \\\n" in p.dockerfile
    assert "-c /opt/torchyard/constraints.txt 'einops'\n" in p.dockerfile  # a command of its own: no hash needed
    assert _files(p)["requirements.txt"].endswith(f"\nsix==1.16.0 --hash=sha256:{SHA}\n")


def test_an_unpinned_or_unhashed_requirement_in_hash_checking_mode_is_one_line(tmp_path: Path) -> None:
    reqs = requirements(f"six==1.16.0 --hash=sha256:{SHA}\nnumpy>=1\n", tmp_path)
    with pytest.raises(RenderError) as exc:
        plan(CUDA13, requirements=reqs)
    assert str(exc.value).startswith("--requirements requirements.txt:2: 'numpy>=1': hash-checking mode")


def test_an_index_line_goes_into_the_pipconf_secret_and_in_no_file(tmp_path: Path) -> None:
    reqs = requirements(
        "--index-url https://user:${TOKEN}@pypi.corp.example/simple\n"  # expanded from the environment, as pip does
        "--extra-index-url https://extra.example/simple\n--trusted-host extra.example\nnumpy\n",
        tmp_path,
        env={"TOKEN": "s3cr3t"},
    )
    network = with_file_indexes(no_host_network(), reqs, None)
    assert network.pip_conf() == (
        "[global]\nindex-url = https://user:s3cr3t@pypi.corp.example/simple\n"
        "extra-index-url = https://extra.example/simple\ntrusted-host = extra.example\n"
    )
    assert [s.id for s in network.secrets()] == ["pipconf"]
    p = plan(CUDA13, requirements=reqs, network=network)
    out = write_context(p, tmp_path / "out").parent
    for path in out.rglob("*"):
        if path.is_file():
            assert b"s3cr3t" not in path.read_bytes() and b"corp.example" not in path.read_bytes(), path
    assert "--mount=type=secret,id=pipconf" in p.dockerfile


def test_an_index_line_that_differs_from_the_flag_is_refused(tmp_path: Path) -> None:
    reqs = requirements("--index-url https://a.example/simple\nnumpy\n", tmp_path)
    flagged = Network(pip_index_url="https://b.example/simple")
    with pytest.raises(RenderError, match=r"^--requirements requirements.txt:1: --index-url .* differs from "):
        with_file_indexes(flagged, reqs, "https://b.example/simple")


# -- the pins of the base win --------------------------------------------------------------------------------------


def test_a_requirement_that_contradicts_a_pin_is_one_line_naming_the_file_line_and_the_pin(tmp_path: Path) -> None:
    torch = image_pins(combination(CUDA13))["torch"].version
    with pytest.raises(RenderError) as exc:
        plan(CUDA13, requirements=requirements("numpy\ntorch == 1.0.0\n", tmp_path))
    assert str(exc.value) == (
        f"--requirements requirements.txt:2: 'torch==1.0.0' contradicts the image's torch {torch} (pinned by "
        "constraints.txt); choose the release with --torch instead"
    )
    # where its marker does not hold in the image, pip skips it, and so does the check
    plan(CUDA13, requirements=requirements("torch == 1.0.0 ; python_version < '3.0'\n", tmp_path))


def test_a_requirement_that_contradicts_an_nvidia_pin_is_refused(tmp_path: Path) -> None:
    pins = image_pins(combination(CUDA13))
    nvidia = next(name for name in pins if name.startswith("nvidia-cudnn"))
    with pytest.raises(RenderError, match=rf"^--requirements requirements.txt:1: '{nvidia}<1' contradicts the "):
        plan(CUDA13, requirements=requirements(f"{nvidia} < 1\n", tmp_path))


# -- --pip: local paths and git URLs --------------------------------------------------------------------------------


def test_pip_takes_a_local_path_and_a_git_url_into_a_file_of_the_context(tmp_path: Path) -> None:
    proj = _project(tmp_path / "myproj")
    git = "git+https://github.com/org/repo.git@v1.0#egg=repo"
    url = "six @ https://files.example/six-1.16.0-py2.py3-none-any.whl"
    p = plan(CUDA13, extra_pip=(str(proj), git, url, "einops==0.8.1"))
    assert _files(p)["requirements-pip.txt"].splitlines()[1:] == [
        "/tmp/torchyard-req/pip-01-myproj",
        f"repo @ {git}",
        url,
    ]
    assert "-r /opt/torchyard/requirements-pip.txt 'einops==0.8.1'" in p.dockerfile
    assert ("req/pip-01-myproj", proj, "--pip") in p.copies


def test_pip_refuses_a_git_url_with_credentials_and_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^--pip: 'git\+https://\*\*\*@github.com/o/r.git': credentials"):
        plan(CUDA13, extra_pip=("git+https://user:tok@github.com/o/r.git",))
    with pytest.raises(UsageError, match=r"^--pip: \./nowhere: no such folder or file"):
        plan(CUDA13, extra_pip=("./nowhere",))


# -- lock export's requirements.txt, read back ------------------------------------------------------------------


def _exported(torch_version: str) -> Lock:
    c = combination(CUDA13)
    pins = image_pins(c)
    nvidia = next(p for name, p in pins.items() if name.startswith("nvidia-cudnn"))

    def locked(name: str, version: str, index: str, n: int) -> Locked:
        artifact = Artifact(filename=f"{name}-{version}-py3-none-any.whl", url=f"{index}/{name}.whl", size=1,
                            sha256=f"{n:02d}" * 32, upload_time=None)  # fmt: skip
        return Locked(name=name, version=version, index=index, artifact=artifact)

    pytorch, pypi = "https://download.pytorch.org/whl/cu130", "https://pypi.org/simple"
    packages = (locked("numpy", "2.2.1", pypi, 1), locked(nvidia.name, str(nvidia.version), pypi, 2),
                locked("torch", torch_version, pytorch, 3))  # fmt: skip
    return Lock(source="torchyard:test", python="3.11.2", machine="x86_64", packages=packages)


def test_lock_export_output_is_accepted_by_requirements_and_installed_with_hashes(tmp_path: Path) -> None:
    torch = str(image_pins(combination(CUDA13))["torch"].version)
    reqs = requirements(requirements_txt(_exported(torch)), tmp_path)
    assert all(e.hashes and e.exact for e in reqs.entries) and len(reqs.entries) == 3
    assert reqs.indexes is not None and reqs.indexes.index_url == "https://download.pytorch.org/whl/cu130"
    p = plan(CUDA13, requirements=reqs)
    assert "-r /opt/torchyard/requirements.txt --require-hashes" in p.dockerfile


def test_a_lock_of_another_torch_is_refused_naming_both(tmp_path: Path) -> None:
    torch = image_pins(combination(CUDA13))["torch"].version
    reqs = requirements(requirements_txt(_exported("2.5.1")), tmp_path)
    with pytest.raises(RenderError, match=rf"'torch==2.5.1' contradicts the image's torch {torch}"):
        plan(CUDA13, requirements=reqs)


# -- the command, and hadolint ------------------------------------------------------------------------------------


def test_render_with_a_requirements_file_writes_a_context_that_installs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _project(tmp_path / "proj")
    Path("reqs.txt").write_text(
        "--index-url https://user:tok@pypi.corp.example/simple\nnumpy >= 1.20 ; python_version >= '3.9'\n./proj\n"
    )
    argv = ["render", "--torch", "2.14.1", "--any-host", "--no-host-settings", "-o", "out"]
    argv += ["--requirements", "reqs.txt"]
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--pip", "./proj"])
    out, err = capsys.readouterr()
    assert exit_.value.code == 0, err
    assert "network: pip index from --requirements reqs.txt:1" in out + err
    assert "tok" not in out + err
    assert (tmp_path / "out" / "req" / "01-proj" / "pyproject.toml").is_file()
    assert (tmp_path / "out" / "req" / "pip-01-proj" / "pyproject.toml").is_file()
    with pytest.raises(SystemExit) as exit_:
        main([*argv[:-1], "missing.txt"])
    assert exit_.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_rendered_dockerfiles_with_requirements_pass_hadolint(tmp_path: Path) -> None:
    _project(tmp_path / "proj")
    (tmp_path / "wheels").mkdir()
    plain = requirements("numpy >= 1.20\n./proj\n-f ./wheels\n--pre\n", tmp_path)
    hashed = requirements(f"six==1.16.0 --hash=sha256:{SHA}\n--no-index\n", tmp_path, "hashed.txt")
    files = []
    for n, (installer, strategy, reqs) in enumerate(
        [(i, s, r) for i in Installer for s in Strategy for r in (plain, hashed)]
    ):
        ident = "torch2.5.1-cu124-py3.10-ubuntu22.04" if strategy is Strategy.CUDA_BASE else CUDA13
        p = plan(ident, strategy, installer=installer, requirements=reqs, extra_pip=(str(tmp_path / "proj"), "six"))
        files.append(tmp_path / f"{n}.Dockerfile")
        files[-1].write_text(p.dockerfile)
    assert _lint(files, HADOLINT_CONFIG, tmp_path) == []


def test_a_pip_value_that_contradicts_an_nvidia_pin_is_refused_as_the_file_is() -> None:
    nvidia = next(name for name in image_pins(combination(CUDA13)) if name.startswith("nvidia-cudnn"))
    with pytest.raises(RenderError, match=rf"^--pip: '{nvidia}<1' contradicts the image's {nvidia} "):
        plan(CUDA13, extra_pip=(f"{nvidia}<1",))


def test_the_same_file_in_two_checkouts_gives_the_same_image(tmp_path: Path) -> None:
    """Where a checkout lies is not the image's content: a laptop and CI (another path) build the same image."""
    folders = [tmp_path / "laptop", tmp_path / "ci" / "checkout"]
    for folder in folders:
        folder.mkdir(parents=True)
    given = [str(folder / "requirements.txt") for folder in folders]  # as a project passes it: its absolute path
    plans = [plan(CUDA13, requirements=requirements("numpy >= 1.20\n", Path("/"), name=path)) for path in given]
    assert plans[0].content_hash == plans[1].content_hash
    assert _files(plans[0])["requirements.txt"].splitlines()[0].startswith("# --requirements requirements.txt,")
