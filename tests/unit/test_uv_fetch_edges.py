"""Edges of uv's download in the uv stage (builder/image/uv_fetch.py): what a simple page yields, which wheel is
taken, what is sent (Accept, Authorization, a link's query, the timeout), what each failing index prints, the CA
bundle over real TLS, the locale, and main's arguments. An index is served on 127.0.0.1 by threads of this test, as
in test_uv_fetch.py; nothing reaches the network."""

from __future__ import annotations

import datetime
import hashlib
import io
import ipaddress
import os
import platform
import ssl
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from builder.image import uv_fetch

VERSION = "0.13.9"
X86 = f"uv-{VERSION}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
ARM = f"uv-{VERSION}-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl"
BINARY = {X86: b"\x7fELF uv x86_64", ARM: b"\x7fELF uv aarch64"}


def wheel(binary: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"uv-{VERSION}.data/scripts/uv", binary)
    return buffer.getvalue()


WHEELS = {name: wheel(binary) for name, binary in BINARY.items()}
SHA = {name: hashlib.sha256(data).hexdigest() for name, data in WHEELS.items()}


def html(*hrefs: str) -> bytes:
    return ("<html><body>" + "".join(f'<a href="{h}">x</a>' for h in hrefs) + "</body></html>").encode()


def page(*names: str) -> bytes:
    """A simple page whose links lead to /files/<name> on its host, each with its right digest."""
    return html(*(f"/files/{name}#sha256={SHA[name]}" for name in names))


@dataclass
class Answer:
    body: bytes = b""
    status: int = 200
    kind: str | None = "text/html"  # None: no Content-Type header at all
    close: bool = False  # close the connection without an answer
    stall: bool = False  # hold the connection, answering nothing, until the test ends


@dataclass
class Served:
    host: str
    routes: dict[str, Answer]
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def paths(self) -> list[str]:
        return [path for path, _ in self.seen]


def _serve(context: ssl.SSLContext | None = None) -> Iterator[Served]:
    released = threading.Event()
    served = Served(
        "", {f"/files/{name}": Answer(data, kind="application/octet-stream") for name, data in WHEELS.items()}
    )

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.seen.append((self.path, dict(self.headers.items())))
            answer = served.routes.get(self.path, Answer(b"", status=404))
            if answer.stall:
                released.wait(10)
            if answer.close or answer.stall:
                self.close_connection = True
                return
            self.send_response(answer.status)
            if answer.kind is not None:
                self.send_header("Content-Type", answer.kind)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    served.host = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield served
    released.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def served() -> Iterator[Served]:
    yield from _serve()


@dataclass(frozen=True)
class Tls:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


def _tls() -> Tls:
    """A CA and a server certificate for 127.0.0.1 signed by it, made now (nothing secret is kept)."""
    now = datetime.datetime.now(datetime.UTC)

    def build(
        subject: str, issuer: str, key: ec.EllipticCurvePrivateKey, signer: ec.EllipticCurvePrivateKey, ca: bool
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False)
        )
        if ca:
            usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
            builder = builder.add_extension(usage, critical=True)
        else:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
            )
            builder = builder.add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = build("torchyard test CA", "torchyard test CA", ca_key, ca_key, True)
    cert = build("127.0.0.1", "torchyard test CA", key, ca_key, False)
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return Tls(ca.public_bytes(pem), cert.public_bytes(pem), key_pem)


@pytest.fixture
def tls_served(tmp_path: Path) -> Iterator[tuple[Served, Tls]]:
    tls = _tls()
    (tmp_path / "server.pem").write_bytes(tls.cert_pem + tls.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tmp_path / "server.pem"))
    for served in _serve(context):
        yield served, tls


def conf(tmp_path: Path, *urls: str) -> str:
    extra = f"extra-index-url = {' '.join(urls[1:])}\n" if urls[1:] else ""
    path = tmp_path / "pip.conf"
    path.write_text(f"[global]\nindex-url = {urls[0]}\n{extra}", encoding="utf-8")
    return str(path)


# ---- what a page yields, which wheel is taken ----


def test_an_html_page_yields_the_hrefs_of_a_tags_only() -> None:
    body = b'<link rel="stylesheet" href="/style.css"><base href="/b/"><a name="top">no href</a><a href="x.whl">x</a>'
    assert uv_fetch.page_links(body, "text/html") == ["x.whl"]


def test_an_html_page_that_is_not_utf8_is_read_with_replacements() -> None:
    body = b'<p>caf\xe9</p><a href="a.whl#sha256=1">a</a><a href="b\xff.whl">b</a>'
    assert uv_fetch.page_links(body, "text/html; charset=latin-1") == ["a.whl#sha256=1", "b\ufffd.whl"]


def test_a_link_that_is_the_bare_file_name_is_taken() -> None:
    assert uv_fetch.wheel_for([f"{X86}#sha256=1"], VERSION, "x86_64") == f"{X86}#sha256=1"


def test_links_of_other_files_before_the_wheel_are_passed_over() -> None:
    hrefs = ["../../files/README.md", f"../../files/uv-{VERSION}.tar.gz", f"../../files/{X86}#sha256=1"]
    assert uv_fetch.wheel_for(hrefs, VERSION, "x86_64") == f"../../files/{X86}#sha256=1"


def test_each_compressed_platform_tag_is_weighed_on_its_own() -> None:
    musl_first = f"uv-{VERSION}-py3-none-musllinux_1_1_x86_64.manylinux_2_17_x86_64.whl"
    arm_and_musl = f"uv-{VERSION}-py3-none-manylinux_2_17_armv7l.musllinux_1_1_x86_64.whl"
    assert uv_fetch.wheel_for([musl_first], VERSION, "x86_64") == musl_first
    assert uv_fetch.wheel_for([arm_and_musl], VERSION, "x86_64") is None  # no manylinux tag of x86_64
    assert uv_fetch.wheel_for([arm_and_musl], VERSION, "armv7l") == arm_and_musl


def test_a_pip_conf_that_is_not_ascii_is_read_as_utf8_whatever_the_locale(tmp_path: Path, c_locale: None) -> None:
    path = tmp_path / "pip.conf"
    text = "[global]\n# the café's mirror\nindex-url = https://idx.example/simple\nextra-index-url = https://b/s\n"
    path.write_bytes(text.encode("utf-8"))
    assert uv_fetch.indexes(str(path)) == ["https://idx.example/simple", "https://b/s"]


# ---- the CA bundle ----


def test_the_context_is_the_oss_when_no_bundle_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    context = uv_fetch._context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_a_bundle_named_but_missing_is_an_error_not_the_oss_cas(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "absent.pem"))
    with pytest.raises(FileNotFoundError):
        uv_fetch._context()


def test_the_bundle_of_ssl_cert_file_verifies_the_index(
    tls_served: tuple[Served, Tls], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served, tls = tls_served
    (tmp_path / "ca.pem").write_bytes(tls.ca_pem)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    served.routes["/simple/uv/"] = Answer(page(X86))
    dest = tmp_path / "uv"
    assert uv_fetch.fetch(VERSION, str(dest), conf(tmp_path, f"https://{served.host}/simple"), "x86_64") == X86
    assert dest.read_bytes() == BINARY[X86]
    assert served.paths() == ["/simple/uv/", f"/files/{X86}"]


def test_the_page_and_the_wheel_are_both_verified_with_the_builds_context(
    tls_served: tuple[Served, Tls], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the context fetch builds trusts the test CA (no SSL_CERT_FILE): each request must use it."""
    served, tls = tls_served
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    trusting = ssl.create_default_context(cadata=tls.ca_pem.decode())
    monkeypatch.setattr(uv_fetch, "_context", lambda: trusting)
    served.routes["/simple/uv/"] = Answer(page(X86))
    dest = tmp_path / "uv"
    assert uv_fetch.fetch(VERSION, str(dest), conf(tmp_path, f"https://{served.host}/simple"), "x86_64") == X86
    assert dest.read_bytes() == BINARY[X86]
    assert served.paths() == ["/simple/uv/", f"/files/{X86}"]


def test_open_verifies_with_the_context_it_is_given(
    tls_served: tuple[Served, Tls], monkeypatch: pytest.MonkeyPatch
) -> None:
    served, tls = tls_served
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    served.routes["/x"] = Answer(b"body", kind="text/plain")
    context = ssl.create_default_context(cadata=tls.ca_pem.decode())
    assert uv_fetch._open(f"https://{served.host}/x", context) == (b"body", "text/plain")


# ---- what is sent ----


def test_the_page_asks_for_pep_691_json_first_and_the_wheel_for_anything(served: Served, tmp_path: Path) -> None:
    served.routes["/simple/uv/"] = Answer(page(X86))
    uv_fetch.fetch(VERSION, str(tmp_path / "uv"), conf(tmp_path, f"http://{served.host}/simple"), "x86_64")
    assert [(path, headers.get("Accept")) for path, headers in served.seen] == [
        ("/simple/uv/", uv_fetch.SIMPLE_ACCEPT),
        (f"/files/{X86}", "*/*"),
    ]
    assert uv_fetch.SIMPLE_ACCEPT.startswith("application/vnd.pypi.simple.v1+json, ")


def test_a_links_query_travels_with_the_download(served: Served, tmp_path: Path) -> None:
    served.routes["/simple/uv/"] = Answer(html(f"../../files/{X86}?token=a%2Fb&x=1#sha256={SHA[X86]}"))
    served.routes[f"/files/{X86}?token=a%2Fb&x=1"] = Answer(WHEELS[X86], kind="application/octet-stream")
    del served.routes[f"/files/{X86}"]
    dest = tmp_path / "uv"
    assert uv_fetch.fetch(VERSION, str(dest), conf(tmp_path, f"http://{served.host}/simple"), "x86_64") == X86
    assert dest.read_bytes() == BINARY[X86]
    assert served.paths()[-1] == f"/files/{X86}?token=a%2Fb&x=1"


def test_a_user_without_a_password_is_sent_with_an_empty_one(served: Served, tmp_path: Path) -> None:
    served.routes["/simple/uv/"] = Answer(page(X86))
    uv_fetch.fetch(VERSION, str(tmp_path / "uv"), conf(tmp_path, f"http://token@{served.host}/simple"), "x86_64")
    assert {headers.get("Authorization") for _, headers in served.seen} == {"Basic dG9rZW46"}  # "token:"


def test_an_answer_without_a_content_type_gives_an_empty_one(served: Served) -> None:
    served.routes["/bare"] = Answer(b"<a href='x'>x</a>", kind=None)
    assert uv_fetch._open(f"http://{served.host}/bare", ssl.create_default_context()) == (b"<a href='x'>x</a>", "")


def test_an_index_that_does_not_answer_times_out_and_the_next_is_asked(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(uv_fetch, "TIMEOUT", 1.0)  # the index that answers must do so within it, loaded or not
    served.routes["/stall/uv/"] = Answer(stall=True)
    served.routes["/simple/uv/"] = Answer(page(X86))
    pip_conf = conf(tmp_path, f"http://{served.host}/stall", f"http://{served.host}/simple")
    assert uv_fetch.fetch(VERSION, str(tmp_path / "uv"), pip_conf, "x86_64") == X86
    assert capsys.readouterr().err == f"uv_fetch: http://{served.host}/stall/uv/: timed out\n"


# ---- the indexes in turn ----


def test_each_failing_index_prints_one_line_and_the_next_one_is_asked(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served.routes["/closed/uv/"] = Answer(close=True)
    served.routes["/empty/uv/"] = Answer(page(ARM))  # no x86_64 wheel there: nothing printed
    served.routes["/simple/uv/"] = Answer(page(ARM, X86))
    host = served.host
    urls = ("file:///opt/wheels", f"http://u:pw@{host}/missing", f"http://{host}/closed", f"http://{host}/empty/")
    dest = tmp_path / "uv"
    assert uv_fetch.fetch(VERSION, str(dest), conf(tmp_path, *urls, f"http://{host}/simple/"), "x86_64") == X86
    assert dest.read_bytes() == BINARY[X86]
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == (
        f"uv_fetch: http://{host}/missing/uv/: Not Found\n"
        f"uv_fetch: http://{host}/closed/uv/: Remote end closed connection without response\n"
    )
    assert served.paths() == ["/missing/uv/", "/closed/uv/", "/empty/uv/", "/simple/uv/", f"/files/{X86}"]


def test_an_index_path_is_kept_as_written_but_its_trailing_slashes(served: Served, tmp_path: Path) -> None:
    served.routes["/pypi/LINUX/uv/"] = Answer(page(X86))
    dest = tmp_path / "uv"
    assert uv_fetch.fetch(VERSION, str(dest), conf(tmp_path, f"http://{served.host}/pypi/LINUX//"), "x86_64") == X86
    assert served.paths() == ["/pypi/LINUX/uv/", f"/files/{X86}"]


def test_the_machine_given_wins_and_else_it_is_this_machines(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    served.routes["/simple/uv/"] = Answer(page(ARM, X86))
    pip_conf = conf(tmp_path, f"http://{served.host}/simple")
    assert uv_fetch.fetch(VERSION, str(tmp_path / "a"), pip_conf, "x86_64") == X86
    assert uv_fetch.fetch(VERSION, str(tmp_path / "b"), pip_conf) == ARM
    assert (tmp_path / "a").read_bytes() == BINARY[X86] and (tmp_path / "b").read_bytes() == BINARY[ARM]


def test_a_dest_without_a_folder_lands_in_the_working_directory_alone(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served.routes["/simple/uv/"] = Answer(page(X86))
    pip_conf = conf(tmp_path, f"http://{served.host}/simple")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert uv_fetch.fetch(VERSION, "uv", pip_conf, "x86_64") == X86
    assert os.listdir(work) == ["uv"] and (work / "uv").read_bytes() == BINARY[X86]


def test_a_link_on_another_scheme_without_a_path_is_still_refused_by_name(served: Served, tmp_path: Path) -> None:
    served.routes["/simple/uv/"] = Answer(html(f"https:{X86}"))
    with pytest.raises(SystemExit) as raised:
        uv_fetch.fetch(VERSION, str(tmp_path / "uv"), conf(tmp_path, f"http://{served.host}/simple"), "x86_64")
    assert str(raised.value) == f"uv_fetch: {X86}: the index gives no sha256 for it; refusing an unverified download"


# ---- main ----


def test_main_with_a_pip_conf_uses_its_index_and_says_what_it_wrote(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(uv_fetch, "PYPI", f"http://{served.host}/nothing")  # never PyPI itself
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    served.routes["/simple/uv/"] = Answer(page(X86))
    pip_conf = conf(tmp_path, f"http://{served.host}/simple")
    dest = tmp_path / "bin" / "uv"
    assert uv_fetch.main([VERSION, str(dest), pip_conf]) == 0
    assert capsys.readouterr() == (f"uv_fetch: {dest} from {X86}\n", "")
    assert dest.read_bytes() == BINARY[X86]
    assert Path(pip_conf).read_text() == f"[global]\nindex-url = http://{served.host}/simple\n"


def test_main_without_a_pip_conf_asks_pypi(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(uv_fetch, "PYPI", f"http://{served.host}/pypi")
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    served.routes["/pypi/uv/"] = Answer(page(X86))
    dest = tmp_path / "uv"
    assert uv_fetch.main([VERSION, str(dest)]) == 0
    assert capsys.readouterr() == (f"uv_fetch: {dest} from {X86}\n", "")
    assert dest.read_bytes() == BINARY[X86]


@pytest.mark.parametrize("argv", [[VERSION], [VERSION, "/d", "/c", "extra"]])
def test_main_with_the_wrong_number_of_arguments_prints_its_usage(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert uv_fetch.main(argv) == 2
    assert capsys.readouterr() == ("", "usage: uv_fetch.py VERSION DEST [PIP_CONF]\n")
