"""Secrets stay secrets: a CA bundle and pip index credentials reach the build only as BuildKit secrets,
never the Dockerfile, the build context, a build arg, or the plan; and the host's usual settings are picked
up (with a fixed precedence) unless --no-host-settings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from render_kit import combination, matrix, options

from builder.cli.main import main
from builder.core.errors import RenderError
from builder.core.kinds import Flavor
from builder.engine import build_command
from builder.pipeline.context_dir import write_context
from builder.pipeline.plan import Plan, build_request, make_plan, plan_json
from builder.render.network import Network, NetworkFlags, resolve_network

IDENT = "torch2.14.1-cu130-py3.11-debian12"
USER, PASSWORD = "alice", "s3cr3t-token"
INDEX = f"https://{USER}:{PASSWORD}@pypi.corp.example/simple"
EXTRA = "https://bob:extra-pa55@mirror.corp.example/pytorch/whl/cu130"
CA_CONTENT = "-----BEGIN CERTIFICATE-----\nTORCHYARD-TEST-CA-9f3c2e7d1b\n-----END CERTIFICATE-----\n"
SECRET_WORDS = (USER, PASSWORD, "bob", "extra-pa55", "TORCHYARD-TEST-CA-9f3c2e7d1b")


@pytest.fixture
def ca_bundle(tmp_path: Path) -> Path:
    path = tmp_path / "corp-ca-bundle.pem"
    path.write_text(CA_CONTENT)
    return path


@pytest.fixture
def network(ca_bundle: Path) -> Network:
    flags = NetworkFlags(
        ca_bundle=str(ca_bundle), pip_index_url=INDEX, pip_extra_index_urls=(EXTRA,), use_host_settings=False
    )
    return resolve_network(flags, env={})


@pytest.fixture
def secret_plan(network: Network) -> Plan:
    return make_plan(matrix(), combination(IDENT), options(network=network))


def _assert_absent(text: str, where: str, *also: str) -> None:
    for word in (*SECRET_WORDS, *also):
        assert word not in text, f"{word!r} appears in {where}"


def test_neither_the_ca_nor_the_credentials_reach_the_dockerfile_or_context(secret_plan: Plan, ca_bundle: Path) -> None:
    _assert_absent(secret_plan.dockerfile, "the Dockerfile", str(ca_bundle), ca_bundle.name)
    for name, data in secret_plan.context_files:
        _assert_absent(data.decode(), f"context file {name}", str(ca_bundle), ca_bundle.name)
    assert secret_plan.build_args == ()


def test_the_dockerfile_reads_them_only_through_secret_mounts(secret_plan: Plan) -> None:
    # No COPY, ARG or ENV of them: each mention is a secret mount or the /run/secrets file it provides.
    for line in secret_plan.dockerfile.splitlines():
        for name in ("cacert", "pipconf"):
            if name in line:
                rest = line.replace(f"--mount=type=secret,id={name}", "").replace(f"/run/secrets/{name}", "")
                assert name not in rest, line
        assert not line.startswith(("ARG PIP", "ARG CA", "ENV PIP_CERT", "ENV PIP_CONFIG")), line


def test_the_plan_and_the_build_command_carry_only_the_secret_source(
    secret_plan: Plan, ca_bundle: Path, tmp_path: Path
) -> None:
    data = plan_json(secret_plan, "registry.corp.example/ml/torch", tmp_path)
    secrets = data.pop("secrets")
    assert [(s["id"], s["source"]) for s in secrets] == [("cacert", str(ca_bundle)), ("pipconf", "generated")]
    _assert_absent(json.dumps(secrets), "the plan's secrets")
    _assert_absent(json.dumps(data), "plan.json", str(ca_bundle))
    request = build_request(secret_plan, Flavor.DEVEL, tmp_path, "torchyard", {"pipconf": "/run/user/0/pip.conf"})
    argv = build_command(request)
    _assert_absent(" ".join(argv), "the build argv")
    assert f"id=cacert,src={ca_bundle}" in argv
    assert "id=pipconf,src=/run/user/0/pip.conf" in argv
    assert [a for a in argv if str(ca_bundle) in a] == [f"id=cacert,src={ca_bundle}"]
    assert "--build-arg" not in argv


def test_the_pip_conf_secret_holds_the_credentials_and_the_description_redacts_them(network: Network) -> None:
    assert network.pip_conf() == f"[global]\nindex-url = {INDEX}\nextra-index-url = {EXTRA}\n"
    pipconf = next(s for s in network.secrets() if s.id == "pipconf")
    assert pipconf.description == (
        "pip.conf with index https://***@pypi.corp.example/simple, https://***@mirror.corp.example/pytorch/whl/cu130"
    )
    _assert_absent(" ".join(network.origins), "the network origins")


def test_nothing_written_or_printed_by_render_holds_them(
    ca_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TORCHYARD_DEBUG", raising=False)
    out = tmp_path / "ctx"
    argv = ["render", "--torch", "2.14.1", "--target", "all", "--no-host-settings", "-o", str(out)]
    argv += ["--ca-bundle", str(ca_bundle), "--pip-index-url", INDEX, "--pip-extra-index-url", EXTRA]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    printed = capsys.readouterr()
    assert exc.value.code == 0, printed.err
    _assert_absent(printed.out + printed.err, "the output")
    assert "secret pipconf: pip.conf with index https://***@pypi.corp.example/simple" in printed.out
    written = sorted(p for p in out.rglob("*") if p.is_file())
    assert {p.name for p in written} >= {"Dockerfile", "plan.json", "constraints.txt", "manifest-runtime.json"}
    for path in written:
        _assert_absent(path.read_bytes().decode(errors="replace"), str(path.relative_to(out)))


def test_write_context_writes_no_secret_file(secret_plan: Plan, tmp_path: Path) -> None:
    out = tmp_path / "context"
    write_context(secret_plan, out)
    names = {p.name for p in out.rglob("*")}
    assert "Dockerfile" in names
    assert not names & {"pip.conf", "cacert", "pipconf", "corp-ca-bundle.pem"}


# --- host settings --------------------------------------------------------------------------------------


@pytest.fixture
def cas(tmp_path: Path) -> dict[str, str]:
    found = {}
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "flag"):
        path = tmp_path / f"{name}.pem"
        path.write_text(CA_CONTENT)
        found[name] = str(path)
    return found


@pytest.mark.parametrize(
    ("present", "winner"),
    [
        (("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"), "PIP_CERT"),
        (("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"), "REQUESTS_CA_BUNDLE"),
        (("SSL_CERT_FILE",), "SSL_CERT_FILE"),
    ],
)
def test_the_host_ca_bundle_is_picked_up_in_order_of_precedence(
    cas: dict[str, str], present: tuple[str, ...], winner: str
) -> None:
    network = resolve_network(NetworkFlags(), env={name: cas[name] for name in present})
    assert network.ca_bundle == Path(cas[winner])
    assert network.origins == (f"CA bundle from ${winner}",)


def test_a_flag_beats_every_host_variable(cas: dict[str, str]) -> None:
    env = {
        "PIP_CERT": cas["PIP_CERT"],
        "PIP_INDEX_URL": "https://env.example/simple",
        "PIP_EXTRA_INDEX_URL": "https://e/x",
    }
    flags = NetworkFlags(ca_bundle=cas["flag"], pip_index_url=INDEX, pip_extra_index_urls=(EXTRA,))
    network = resolve_network(flags, env=env)
    assert (network.ca_bundle, network.pip_index_url, network.pip_extra_index_urls) == (
        Path(cas["flag"]),
        INDEX,
        (EXTRA,),
    )
    assert network.origins == ("CA bundle from --ca-bundle", "pip index from --pip-index-url")


def test_host_index_settings_are_picked_up_and_split_like_pip_does() -> None:
    env = {"PIP_INDEX_URL": INDEX, "PIP_EXTRA_INDEX_URL": "https://a.example/simple  https://b.example/simple"}
    network = resolve_network(NetworkFlags(), env=env)
    assert network.pip_index_url == INDEX
    assert network.pip_extra_index_urls == ("https://a.example/simple", "https://b.example/simple")
    assert network.origins == ("pip index from $PIP_INDEX_URL", "pip extra index from $PIP_EXTRA_INDEX_URL")
    assert [s.id for s in network.secrets()] == ["pipconf"]


def test_no_host_settings_ignores_them_all(cas: dict[str, str]) -> None:
    env = {"PIP_CERT": cas["PIP_CERT"], "SSL_CERT_FILE": cas["SSL_CERT_FILE"], "PIP_INDEX_URL": INDEX}
    env["REQUESTS_CA_BUNDLE"] = cas["REQUESTS_CA_BUNDLE"]
    env["PIP_EXTRA_INDEX_URL"] = EXTRA
    network = resolve_network(NetworkFlags(use_host_settings=False), env=env)
    assert network == Network()


def test_a_host_ca_bundle_that_is_not_a_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    with pytest.raises(RenderError, match=r"nope\.pem: cannot read: No such file or directory"):
        resolve_network(NetworkFlags(), env={"SSL_CERT_FILE": missing})


def test_an_unsafe_host_variable_is_refused_under_its_own_name() -> None:
    with pytest.raises(RenderError, match=r"^\$PIP_EXTRA_INDEX_URL: 'https://x.example/\$\(id\)' contains"):
        resolve_network(NetworkFlags(), env={"PIP_EXTRA_INDEX_URL": "https://x.example/$(id)"})


def test_render_says_which_host_settings_it_picked_up_and_no_host_settings_drops_them(
    cas: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CERT", cas["PIP_CERT"])
    monkeypatch.setenv("PIP_INDEX_URL", INDEX)

    def render(*extra: str) -> str:
        with pytest.raises(SystemExit) as exc:
            main(["render", "--torch", "2.14.1", "-o", str(tmp_path / "o"), *extra])
        printed = capsys.readouterr()
        assert exc.value.code == 0, printed.err
        return printed.out

    picked = render()
    assert "network: CA bundle from $PIP_CERT\nnetwork: pip index from $PIP_INDEX_URL\n" in picked
    assert f"--secret id=cacert,src={cas['PIP_CERT']}" in picked
    assert '--secret "id=pipconf,src=${TORCHYARD_PIPCONF}"' in picked
    _assert_absent(picked, "the output")
    dropped = render("--no-host-settings")
    assert "network:" not in dropped and "--secret" not in dropped
