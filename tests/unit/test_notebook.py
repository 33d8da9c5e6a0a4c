"""The notebook flavor (issue 41): its pins in matrix.toml ([[notebook_tool]]), the render's stage, tags, labels
and context files, the combinations without it and why, its HEALTHCHECK script and the smoke checks' pieces that
run without a server (the server and the kernels run in the docker tier: tests/integration/test_notebook_image.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from matrix_kit import BASE
from render_kit import instructions, matrix, plan

from builder.core.errors import MatrixError
from builder.core.kinds import Flavor, Target
from builder.image import notebook_health
from builder.matrix.loader import load_matrix
from builder.render import notebook as contract
from builder.smoke import checks_notebook as nb
from builder.smoke.expect import Expectations
from builder.smoke.framework import Context, Failed, Skipped

M = matrix()
IMAGE_DIR = Path(notebook_health.__file__).parent
PINS = ("jupyterlab==4.6.6", "ipykernel==7.4.0", "ipywidgets==8.1.9")


def test_the_notebook_pins_are_in_matrix_toml_with_their_pypi_release_pages() -> None:
    assert tuple(f"{t.name}=={t.version}" for t in M.notebook_tools) == PINS
    for tool in M.notebook_tools:
        (source,) = tool.sources
        assert M.sources[source].url == f"https://pypi.org/project/{tool.name}/{tool.version}/"
    assert {t.name: str(t.python) for t in M.notebook_tools} == {
        "jupyterlab": ">=3.10", "ipykernel": ">=3.11", "ipywidgets": ">=3.7"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("python", "expected"),
    [
        ('"3.11"', "is not a version specifier like '>=9.0,<9.6'"),
        ('">=3.11"\nsource = ["nowhere"]', "unknown source 'nowhere'"),
    ],
)
def test_a_malformed_notebook_pin_is_one_located_error(tmp_path: Path, python: str, expected: str) -> None:
    path = tmp_path / "matrix.toml"
    source = "" if "source" in python else '\nsource = ["pypi"]'
    path.write_text(BASE + f'\n[[notebook_tool]]\nname = "jupyterlab"\nversion = "4.6.6"\npython = {python}{source}\n')
    with pytest.raises(MatrixError) as exc:
        load_matrix(path)
    assert str(exc.value).startswith(f"{path}:") and expected in str(exc.value)


def test_the_notebook_stage_pins_jupyterlab_on_the_shared_venv_with_docker_stacks_contract() -> None:
    p = plan("torch2.14.1-cu130-py3.11-debian12")
    assert p.spec.notebook_pip == PINS
    target = p.target(Flavor.NOTEBOOK)
    assert target.tags.immutable == "2.14.1-cuda13.0-cudnn9-py3.11-debian12-notebook"
    assert dict(target.labels)["io.torchyard.notebook"] == " ".join(PINS)
    assert dict(target.labels)["io.torchyard.flavor"] == "notebook"
    assert "io.torchyard.notebook" not in dict(p.target(Flavor.RUNTIME).labels)
    stage = dict(instructions(p.dockerfile, "notebook"))
    steps = instructions(p.dockerfile, "notebook")
    assert steps[0] == ("FROM", "venv AS notebook")
    installs = [args for kind, args in steps if kind == "RUN" and "jupyterlab" in args]
    assert len(installs) == 1  # one layer: the pins under the image's constraints, then the venv's folders
    assert "-c /opt/torchyard/constraints.txt 'jupyterlab==4.6.6' 'ipykernel==7.4.0' 'ipywidgets==8.1.9'" in installs[0]
    assert "find /opt/venv -type d" in installs[0] and "chgrp 100" in installs[0]
    assert (stage["USER"], stage["WORKDIR"], stage["CMD"]) == ("1000:100", "/home/jovyan/work", '["start-notebook.sh"]')
    assert stage["HEALTHCHECK"].startswith("--interval=3s --timeout=2s --start-period=20s --retries=3")
    assert "/usr/local/bin/notebook-healthcheck.py" in stage["HEALTHCHECK"]
    env = next(args for kind, args in steps if kind == "ENV" and "NB_USER" in args)
    for setting in ("NB_USER=jovyan", "NB_UID=1000", "NB_GID=100", "HOME=/home/jovyan", "JUPYTER_PORT=8888"):
        assert setting in env


def test_the_scripts_reach_the_build_context_from_builder_image() -> None:
    files = dict(plan("torch2.14.1-cu130-py3.11-debian12").context_files)
    for name, source, target in contract.SCRIPTS:
        assert files[name] == (IMAGE_DIR / source).read_bytes(), name
        assert target.startswith("/usr/local/bin/")
    assert files["notebook/start.sh"].startswith(b"#!/bin/bash\n")
    assert b"setpriv --reuid" in files["notebook/start.sh"]


def test_a_python_below_a_pins_requires_python_has_no_notebook_image_and_says_why() -> None:
    p = plan("torch2.14.1-cu130-py3.10-debian12")
    assert dict(p.unavailable)[Flavor.NOTEBOOK] == (
        "ipykernel 7.4.0 requires Python >=3.11 (https://pypi.org/project/ipykernel/7.4.0/), not 3.10"
    )
    assert "AS notebook" not in p.dockerfile
    assert not any(name.startswith("notebook/") for name, _ in p.context_files)


def test_the_family_and_target_all_leave_the_notebook_out() -> None:
    assert Flavor.NOTEBOOK not in Target.ALL.flavors()
    assert Target.NOTEBOOK.flavors() == (Flavor.NOTEBOOK,)


# -- the HEALTHCHECK ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "url"),
    [
        ({}, "http://127.0.0.1:8888/api"),
        ({"JUPYTER_PORT": "9999"}, "http://127.0.0.1:9999/api"),
        ({"JUPYTER_BASE_URL": "/nb/"}, "http://127.0.0.1:8888/nb/api"),
        ({"JUPYTER_BASE_URL": "nb"}, "http://127.0.0.1:8888/nb/api"),
        ({"JUPYTER_BASE_URL": "/", "JUPYTER_PORT": ""}, "http://127.0.0.1:8888/api"),
        ({"NOTEBOOK_ARGS": "--ServerApp.base_url=/hidden/"}, "http://127.0.0.1:8888/api"),  # not read: unhealthy
    ],
)
def test_the_health_check_asks_the_api_under_the_port_and_base_url_of_the_environment(
    env: dict[str, str], url: str
) -> None:
    assert notebook_health.api_url(env) == url


@pytest.mark.parametrize(("status", "code"), [(200, 0), (404, 1), (403, 1), ("ConnectionRefusedError: refused", 1)])
def test_only_a_200_is_healthy(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], status: int | str, code: int
) -> None:
    monkeypatch.setattr(notebook_health, "status_of", lambda url: status)
    assert notebook_health.main({"JUPYTER_PORT": "9000"}) == code
    assert capsys.readouterr().out == f"GET http://127.0.0.1:9000/api: {status}\n"


# -- the smoke checks' pieces -------------------------------------------------------------------------------------


def _ctx(flavor: str | None) -> Context:
    return Context(expect=Expectations(flavor=flavor), arch=None, require_gpu=False)


@pytest.mark.parametrize("flavor", ["runtime", "inference", None])
def test_both_checks_skip_images_of_other_flavors(monkeypatch: pytest.MonkeyPatch, flavor: str | None) -> None:
    monkeypatch.setattr(nb, "_cuda", lambda ctx: None)  # a GPU is there: gpu.notebook asks torch first
    for func in (nb.notebook_server, nb.notebook_gpu):
        with pytest.raises(Skipped, match="not a notebook image"):
            func(_ctx(flavor))


def test_a_notebook_image_without_start_notebook_sh_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("builder.smoke.checks_notebook.shutil.which", lambda name: None)
    with pytest.raises(Failed, match=r"a notebook image without start-notebook\.sh on PATH"):
        nb.notebook_server(_ctx("notebook"))


def test_a_notebook_image_without_jupyter_client_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jupyter_client.manager", None)  # import raises ImportError
    with pytest.raises(Failed, match="a notebook image without jupyter_client"):
        nb.run_in_kernel("1", 1.0)


def test_the_server_gets_its_port_and_token_and_none_of_the_callers_url_settings() -> None:
    base = {"PATH": "/opt/venv/bin", "NOTEBOOK_ARGS": "--x", "JUPYTER_BASE_URL": "/nb/", "RESTARTABLE": "yes",
            "JUPYTER_TOKEN": "theirs", "JUPYTER_PORT": "1"}  # fmt: skip
    assert nb.server_env(base, 4242, "ours") == {
        "PATH": "/opt/venv/bin",
        "JUPYTER_PORT": "4242",
        "JUPYTER_TOKEN": "ours",
    }


def _reply(status: str, **content: Any) -> dict[str, Any]:
    return {"content": {"status": status, **content}}


def test_the_kernels_report_is_its_last_json_line_and_an_error_fails_with_its_name() -> None:
    printed = 'warming up\n{"torch": "2.15.0+cu132", "cuda": true, "devices": 1}\n'
    assert nb.kernel_result(_reply("ok"), printed) == {"torch": "2.15.0+cu132", "cuda": True, "devices": 1}
    with pytest.raises(Failed, match="the kernel's `import torch` failed: ModuleNotFoundError: No module named"):
        nb.kernel_result(_reply("error", ename="ModuleNotFoundError", evalue="No module named 'torch'"), "")
    with pytest.raises(Failed, match="the kernel printed no report"):
        nb.kernel_result(_reply("ok"), "nothing\n")
