"""uv.lock and PEP 751's pylock.toml as --requirements (builder/render/uvlock.py, pylock.py, lockread.py): a
hashed requirements set installed with --require-hashes under the image's constraints, the project's own package
left out, the image's own (torch, nvidia-*) checked against its pins and not installed again, what cannot be
hash-checked refused in one located line; and torchyard.toml's dependencies.lock passed on the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_kit import DRY, NEW, cli, project_folder
from render_kit import combination, no_host_network, plan
from test_render_matrix import HADOLINT_CONFIG, _lint
from test_requirements_file import _exported, _files

from builder.core.errors import RenderError, UsageError
from builder.core.kinds import Installer
from builder.lock.writers import pylock_toml
from builder.project.lockfile import read_project_lock
from builder.render.pins import image_pins
from builder.render.pylock import is_pylock
from builder.render.reqtypes import Requirements
from builder.render.requirements import read_requirements, with_file_indexes

CUDA13 = "torch2.14.1-cu130-py3.11-debian12"
PYPI = 'source = { registry = "https://pypi.org/simple" }'


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Locks are read as `--requirements NAME` from their folder: messages name them as given."""
    monkeypatch.chdir(tmp_path)


def _h(n: int) -> str:
    return "sha256:" + f"{n:02x}" * 32


def _pinned(name: str, ident: str = CUDA13) -> str:
    return str(image_pins(combination(ident))[name].version)


def _uv_lock(torch: str, cudnn: str) -> str:
    return f"""version = 1
revision = 2
requires-python = ">=3.11"
resolution-markers = [
    "sys_platform == 'darwin'",
    "sys_platform != 'darwin'",
]

[[package]]
name = "colorama"
version = "0.4.6"
{PYPI}
wheels = [{{ url = "https://files.example/colorama-0.4.6-py2.py3-none-any.whl", hash = "{_h(1)}" }}]

[[package]]
name = "my-model"
version = "0.1.0"
source = {{ editable = "." }}
dependencies = [
    {{ name = "colorama", marker = "sys_platform == 'win32'" }},
    {{ name = "numpy" }},
    {{ name = "torch", version = "{torch}", source = {{ registry = "https://download.pytorch.org/whl/cu130" }}, marker = "sys_platform != 'darwin'" }},
    {{ name = "torch", version = "2.0.0", source = {{ registry = "https://pypi.org/simple" }}, marker = "sys_platform == 'darwin'" }},
]

[package.metadata]
requires-dist = [{{ name = "numpy" }}, {{ name = "torch" }}]

[[package]]
name = "numpy"
version = "2.2.1"
{PYPI}
sdist = {{ url = "https://files.example/numpy-2.2.1.tar.gz", hash = "{_h(2)}", size = 20 }}
wheels = [
    {{ url = "https://files.example/numpy-2.2.1-cp311-cp311-manylinux_2_17_x86_64.whl", hash = "{_h(3)}", size = 10 }},
    {{ url = "https://files.example/numpy-2.2.1-cp311-cp311-macosx_14_0_arm64.whl", hash = "{_h(4)}", size = 10 }},
]

[[package]]
name = "nvidia-cudnn-cu13"
version = "{cudnn}"
{PYPI}
wheels = [{{ url = "https://files.example/nvidia_cudnn_cu13-{cudnn}-py3-none-manylinux_2_27_x86_64.whl", hash = "{_h(5)}" }}]

[[package]]
name = "torch"
version = "{torch}"
source = {{ registry = "https://download.pytorch.org/whl/cu130" }}
resolution-markers = ["sys_platform != 'darwin'"]
dependencies = [{{ name = "nvidia-cudnn-cu13", marker = "sys_platform == 'linux'" }}]
wheels = [{{ url = "https://download.pytorch.org/whl/cu130/torch-{torch}-cp311-cp311-linux_x86_64.whl", hash = "{_h(6)}" }}]

[[package]]
name = "torch"
version = "2.0.0"
{PYPI}
resolution-markers = ["sys_platform == 'darwin'"]
wheels = [{{ url = "https://files.example/torch-2.0.0-cp311-none-macosx_11_0_arm64.whl", hash = "{_h(7)}" }}]
"""  # noqa: E501


def _read(folder: Path, text: str, name: str = "uv.lock") -> Requirements:
    (folder / name).write_text(text)
    return read_requirements(name, {})


def _good(folder: Path) -> Requirements:
    return _read(folder, _uv_lock(_pinned("torch"), _pinned("nvidia-cudnn-cu13")))


def _line(text: str, start: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(start))


# -- uv.lock -----------------------------------------------------------------------------------------------------


def test_a_uv_lock_is_installed_with_every_hash_and_require_hashes(tmp_path: Path) -> None:
    p = plan(CUDA13, requirements=_good(tmp_path))
    torch = _pinned("torch")
    assert _files(p)["requirements.txt"].splitlines() == [
        "# --requirements uv.lock, as torchyard read it (index options are in the build's pip settings, a secret)",
        "# the image's own, checked against its pins, not installed again: nvidia-cudnn-cu13=="
        f"{_pinned('nvidia-cudnn-cu13')}; sys_platform == 'linux'",
        f"# the image's own, checked against its pins, not installed again: torch=={torch}; sys_platform != 'darwin'",
        "# the image's own, checked against its pins, not installed again: torch==2.0.0; sys_platform == 'darwin'",
        f"colorama==0.4.6; sys_platform == 'win32' --hash={_h(1)}",
        f"numpy==2.2.1 --hash={_h(2)} --hash={_h(3)} --hash={_h(4)}",
    ]
    assert "-r /opt/torchyard/requirements.txt --require-hashes" in p.dockerfile
    assert "-c /opt/torchyard/constraints.txt" in p.dockerfile  # under the image's pins, as every addition
    assert (
        "uv sync" not in p.dockerfile and "my-model" not in _files(p)["requirements.txt"]
    )  # the darwin torch: no pin checked


def test_the_lines_are_read_with_the_lock_s_own_line_numbers(tmp_path: Path) -> None:
    text = _uv_lock(_pinned("torch"), _pinned("nvidia-cudnn-cu13"))
    reqs = _read(tmp_path, text)
    numpy = _line(text, 'name = "numpy"') - 1
    assert [(e.where, e.name) for e in reqs.entries] == [
        (f"uv.lock:{_line(text, '[[package]]')}", "colorama"),
        (f"uv.lock:{numpy}", "numpy"),
    ]
    assert reqs.require_hashes and reqs.indexes is None  # torch's index is the image's business, not the install's


def test_a_fork_and_the_edges_into_a_package_give_its_marker(tmp_path: Path) -> None:
    text = (
        _uv_lock(_pinned("torch"), _pinned("nvidia-cudnn-cu13"))
        .replace('{ name = "numpy" },', '{ name = "numpy", marker = "python_full_version >= \'3.11\'" },')
        .replace(
            'name = "numpy"\nversion',
            'name = "numpy"\nresolution-markers = ["platform_machine == \'x86_64\'"]\nversion',
        )
    )
    lines = {e.name: e.line for e in _read(tmp_path, text).entries}
    assert lines["numpy"] == "numpy==2.2.1; (platform_machine == 'x86_64') and (python_full_version >= '3.11')"


def test_another_index_joins_the_build_s_as_an_extra_index_and_its_credentials_stay_in_the_secret(
    tmp_path: Path,
) -> None:
    text = _uv_lock(_pinned("torch"), _pinned("nvidia-cudnn-cu13")).replace(
        'name = "colorama"\nversion = "0.4.6"\n' + PYPI,
        'name = "colorama"\nversion = "0.4.6"\nsource = { registry = "https://u:s3cr3t@pypi.corp.example/simple" }',
    )
    reqs = _read(tmp_path, text)
    assert reqs.indexes is not None and reqs.indexes.extra_index_urls == ("https://u:s3cr3t@pypi.corp.example/simple",)
    assert reqs.indexes.index_url is None
    p = plan(CUDA13, requirements=reqs, network=with_file_indexes(no_host_network(), reqs, None))
    assert "s3cr3t" not in p.dockerfile and not any(b"s3cr3t" in data for _, data in p.context_files)


def test_a_torch_pin_the_lock_contradicts_is_refused_naming_both(tmp_path: Path) -> None:
    text = _uv_lock("2.5.1", _pinned("nvidia-cudnn-cu13"))
    reqs = _read(tmp_path, text)
    at = _line(text, 'wheels = [{ url = "https://download.pytorch.org') - 6
    with pytest.raises(RenderError) as refused:
        plan(CUDA13, requirements=reqs)
    assert str(refused.value) == (
        f"--requirements uv.lock:{at}: \"torch==2.5.1; sys_platform != 'darwin'\" contradicts the image's torch "
        f"{_pinned('torch')} (pinned by constraints.txt); choose the release with --torch instead"
    )


def test_an_nvidia_pin_the_lock_contradicts_is_refused(tmp_path: Path) -> None:
    reqs = _read(tmp_path, _uv_lock(_pinned("torch"), "9.1.0.70"))
    with pytest.raises(
        RenderError,
        match=r"^--requirements uv.lock:\d+: \"nvidia-cudnn-cu13==9.1.0.70; .*\" contradicts "
        rf"the image's nvidia-cudnn-cu13 {_pinned('nvidia-cudnn-cu13')} \(pinned by torch 2.14.1\)",
    ):
        plan(CUDA13, requirements=reqs)


def test_a_lock_of_only_the_image_s_own_packages_installs_nothing_more(tmp_path: Path) -> None:
    torch = _pinned("torch")
    text = f'version = 1\n\n[[package]]\nname = "torch"\nversion = "{torch}"\n{PYPI}\nwheels = [{{ url = ' \
        f'"https://files.example/torch.whl", hash = "{_h(6)}" }}]\n'  # fmt: skip
    p = plan(CUDA13, requirements=_read(tmp_path, text))
    assert "/opt/torchyard/requirements.txt" not in p.dockerfile
    assert f"not installed again: torch=={torch}" in _files(p)["requirements.txt"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('{ git = "https://github.com/o/r.git?rev=v1#0123abc" }', "package r: a git source has no hash, and a hashed "
         "install takes none; publish it to an index, or give it with --pip git+https://..."),
        ('{ directory = "../r" }', "package r: a directory source is a file or folder of the machine that locked it; "
         "give it with --pip ./path"),
        ('{ path = "r-1.0-py3-none-any.whl" }', "package r: a path source is a file or folder of the machine that "
         "locked it; give it with --pip ./path"),
        ('{ url = "https://u:pw@host/r-1.0.tar.gz" }', "package r: 'https://***@host/r-1.0.tar.gz': credentials in "
         "a URL the image would keep"),
        ('{ svn = "x" }', "package r: source {'svn': 'x'}: expected registry, url, git, path, directory, editable or "
         "virtual"),
    ],
)  # fmt: skip
def test_what_a_hashed_install_cannot_take_is_refused_in_one_located_line(
    tmp_path: Path, source: str, message: str
) -> None:
    text = f'version = 1\n\n[[package]]\nname = "r"\nversion = "1.0"\nsource = {source}\n' \
        f'sdist = {{ hash = "{_h(9)}" }}\n'  # fmt: skip
    with pytest.raises(UsageError) as refused:
        _read(tmp_path, text)
    assert str(refused.value) == f"--requirements uv.lock:6: {message}"


def test_a_url_source_is_a_direct_reference_with_its_hash(tmp_path: Path) -> None:
    text = f'version = 1\n\n[[package]]\nname = "r"\nversion = "1.0"\nsource = {{ url = ' \
        f'"https://host.example/r-1.0.tar.gz" }}\nsdist = {{ hash = "{_h(9)}" }}\n'  # fmt: skip
    (e,) = _read(tmp_path, text).entries
    assert (e.text(), e.kind) == (f"r @ https://host.example/r-1.0.tar.gz --hash={_h(9)}", "url")
    assert "--require-hashes" in plan(CUDA13, requirements=_read(tmp_path, text)).dockerfile


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('version = 1\n\n[[package]\nname = "r"\n', "--requirements uv.lock:3: not a uv.lock: "),
        ("version = 2\n", "--requirements uv.lock:1: version = 2: torchyard reads uv.lock version 1 (uv 0.5 and "
         "later)"),
        ('version = 1\n\n[[package]]\nname = "r"\nversion = "1.0"\n' + PYPI + '\nwheels = [{ hash = "md5:00" }]\n',
         "--requirements uv.lock:3: package r: hash 'md5:00': expected sha256:, sha384: or sha512: and hex digits"),
        ('version = 1\n\n[[package]]\nname = "r"\nversion = "1.0"\n' + PYPI + "\n",
         "--requirements uv.lock:3: package r: no hashed file (a wheel or sdist with a hash)"),
        ('version = 1\n\n[[package]]\nname = "r"\nversion = "1.0"\n' + PYPI + "\nwheels = 5\n",
         "--requirements uv.lock:7: package r: wheels: expected a list, found '5'"),
        ('version = 1\n\n[[package]]\nname = "r"\nversion = "1.0"\n' + PYPI + '\nresolution-markers = ["os_name == '
         "'posix'\\n-r /etc/passwd\"]\n" + f'wheels = [{{ hash = "{_h(1)}" }}]\n',
         "--requirements uv.lock:3: package r: \"r==1.0; os_name == 'posix'\\n-r /etc/passwd\" has a control "
         "character"),
    ],
)  # fmt: skip
def test_a_malformed_or_unknown_lock_is_one_located_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError) as refused:
        _read(tmp_path, text)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value), str(refused.value)


# -- pylock.toml (PEP 751) -------------------------------------------------------------------------------------------

PYLOCK = f"""lock-version = "1.0"
environments = ["sys_platform == 'linux'"]
requires-python = ">=3.11"
created-by = "uv"

[[packages]]
name = "numpy"
version = "2.2.1"
index = "https://pypi.org/simple"
sdist = {{ name = "numpy-2.2.1.tar.gz", url = "https://files.example/numpy-2.2.1.tar.gz", hashes = {{ sha256 = "{_h(2)[7:]}" }} }}
wheels = [
  {{ name = "numpy-2.2.1-cp311-cp311-manylinux_2_17_x86_64.whl", url = "https://files.example/n.whl", hashes = {{ sha256 = "{_h(3)[7:]}" }} }},
]

[[packages]]
name = "pywin32"
version = "308"
marker = "sys_platform == 'win32'"
wheels = [{{ url = "https://files.example/pywin32.whl", hashes = {{ sha256 = "{_h(4)[7:]}", md5 = "00" }} }}]

[[packages]]
name = "r"
archive = {{ url = "https://host.example/r-1.0.tar.gz", hashes = {{ sha256 = "{_h(9)[7:]}" }} }}
"""  # noqa: E501


def test_a_pylock_is_installed_with_its_markers_and_hashes(tmp_path: Path) -> None:
    p = plan(CUDA13, requirements=_read(tmp_path, PYLOCK, "pylock.toml"))
    assert _files(p)["requirements.txt"].splitlines()[1:] == [
        f"numpy==2.2.1 --hash={_h(2)} --hash={_h(3)}",
        f"pywin32==308; sys_platform == 'win32' --hash={_h(4)}",
        f"r @ https://host.example/r-1.0.tar.gz --hash={_h(9)}",
    ]
    assert "-r /opt/torchyard/requirements.txt --require-hashes" in p.dockerfile


def test_torchyard_s_own_pylock_reads_back(tmp_path: Path) -> None:
    text = pylock_toml(_exported(_pinned("torch")))
    reqs = _read(tmp_path, text, "pylock.toml")
    assert [e.name for e in reqs.entries] == ["numpy"]
    assert sorted(e.name or "" for e in reqs.base) == [next(n for n in image_pins(combination(CUDA13))
                                                           if n.startswith("nvidia-cudnn")), "torch"]  # fmt: skip
    plan(CUDA13, requirements=reqs)
    with pytest.raises(RenderError, match=r"^--requirements pylock.toml:\d+: 'torch==2.5.1' contradicts the image's"):
        plan(CUDA13, requirements=_read(tmp_path, pylock_toml(_exported("2.5.1")), "pylock.toml"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("1.0", "2.0"), "--requirements pylock.toml:1: lock-version = '2.0': torchyard reads PEP 751 "
         "lock-version 1.x"),
        (('archive = {', 'vcs = { type = "git", url = "https://x/r.git", commit-id = "ab" }\nx = {'),
         "--requirements pylock.toml:23: package r: a vcs package has no hash a hashed install can check"),
        (('url = "https://files.example/pywin32.whl"', 'path = "pywin32.whl"'),
         "--requirements pylock.toml:15: package pywin32: a file given by path, not url ('pywin32.whl')"),
        (("marker = \"sys_platform == 'win32'\"", "marker = \"'gpu' in extras\""),
         "--requirements pylock.toml:18: package pywin32: marker \"'gpu' in extras\" names the lock's extras or "
         "dependency groups"),
        (("sha256 = \"" + _h(4)[7:] + "\", ", ""),
         "--requirements pylock.toml:15: package pywin32: a file without a sha256, sha384 or sha512 hash"),
    ],
)  # fmt: skip
def test_what_a_pylock_cannot_give_a_hashed_install_is_refused(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    with pytest.raises(UsageError) as refused:
        _read(tmp_path, PYLOCK.replace(*change), "pylock.toml")
    assert str(refused.value).startswith(message), str(refused.value)


def test_the_reader_is_chosen_by_the_file_s_name(tmp_path: Path) -> None:
    assert [is_pylock(n) for n in ("pylock.toml", "pylock.gpu.toml", "pylock..toml", "my.pylock.toml")] == [
        True, True, False, False]  # fmt: skip
    assert [e.name for e in _read(tmp_path, PYLOCK, "pylock.gpu.toml").entries] == ["numpy", "pywin32", "r"]


# -- hadolint, the command, and the project -------------------------------------------------------------------------


def test_a_rendered_dockerfile_with_a_lock_passes_hadolint(tmp_path: Path) -> None:
    reqs = _good(tmp_path)
    files = []
    for installer in Installer:
        files.append(tmp_path / f"{installer.value}.Dockerfile")
        files[-1].write_text(plan(CUDA13, installer=installer, requirements=reqs).dockerfile)
    assert _lint(files, HADOLINT_CONFIG, tmp_path) == []


def test_render_requirements_uv_lock_writes_the_hashed_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("uv.lock").write_text(_uv_lock(_pinned("torch"), _pinned("nvidia-cudnn-cu13")))
    argv = ["render", "--torch", "2.14.1", "--variant", "cu130", "--python", "3.11", "--os", "debian12",
            "--any-host", "--no-host-settings", "-o", "out", "--requirements", "uv.lock"]  # fmt: skip
    code, _, err = cli(capsys, *argv)
    assert code == 0, err
    assert (tmp_path / "out" / "requirements.txt").read_text().endswith(f"numpy==2.2.1 --hash={_h(2)} --hash="
                                                                        f"{_h(3)} --hash={_h(4)}\n")  # fmt: skip
    assert "--require-hashes" in (tmp_path / "out" / "Dockerfile").read_text()
    Path("uv.lock").write_text("version = 7\n")
    assert cli(capsys, *argv) == (
        2, "", "torchyard: error: --requirements uv.lock:1: version = 7: torchyard reads uv.lock version 1 (uv 0.5 "
        "and later)\n")  # fmt: skip


def test_a_project_s_lock_is_installed_as_requirements_passes_it_and_locked_by_its_sha256(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = project_folder(tmp_path, monkeypatch)
    text = 'version = 1\n\n[[package]]\nname = "numpy"\nversion = "2.2.1"\n' + PYPI + \
        f'\nwheels = [{{ url = "https://files.example/n.whl", hash = "{_h(3)}" }}]\n'  # fmt: skip
    (folder / "uv.lock").write_text(text)
    (folder / "torchyard.toml").write_text(f'[torch]\nid = "{NEW}"\n\n[dependencies]\nlock = "uv.lock"\n')
    code, _, err = cli(capsys, "render", "-o", "out", "--no-host-settings")
    assert code == 0, err
    written = {p.relative_to(folder / "out"): p.read_text() for p in (folder / "out").rglob("*") if p.is_file()}
    hashed = [name for name, data in written.items() if data.endswith(f"numpy==2.2.1 --hash={_h(3)}\n")]
    assert [name.name for name in hashed] == ["requirements.txt"]
    assert any("-r /opt/torchyard/requirements.txt --require-hashes" in data for data in written.values())
    locked = read_project_lock(folder / "torchyard.lock")
    assert locked is not None and [f.path for f in locked.files] == ["uv.lock"]
    assert cli(capsys, *DRY, "--requirements", "uv.lock")[2] == "torchyard: error: --requirements: the project " \
        "names its lockfile (torchyard.toml: dependencies.lock); add it there\n"  # fmt: skip
