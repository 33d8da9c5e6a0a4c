"""Hostile and mistaken input, table-driven across every command and file input (docs/security.md).

Each case runs the command in-process, in a temporary working folder with a temporary HOME, and asserts: the
exit code of the README's table, exactly one `torchyard: error:` line on stderr (or none on success), no
traceback, no secret marker anywhere in the output or in what was written, nothing written outside the
temporary folder, and an answer within the time bound (named pipes and /dev/zero must not hang a command).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from builder.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-MARKER-7f1"
SECONDS = 20
Make = Callable[[Path], str]  # builds a file input in the temporary folder, returns its path


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    code: int
    files: dict[str, Make] = field(default_factory=dict)  # "@name" in argv -> the file made for it
    env: dict[str, str] = field(default_factory=dict)


# --- values of flags ---------------------------------------------------------------------------------------

BAD_VALUES = {
    "empty": "",
    "blank": "   ",
    "substitution": "$(id)",
    "backticks": "`id`",
    "newline": "12\nRUN id",
    "full-width": "\uff15\uff13\uff15",  # 535 in full-width digits
    "traversal": "../../etc",
    "long": "9" * 300,
    "format": "%s{0}",
    "semicolon": "1; rm -rf /",
}
COMBINATION_FLAGS = ("--driver", "--arch", "--gpu", "--torch", "--cuda", "--python", "--os", "--variant", "--platform")
QUERY_COMMANDS = (("lookup",), ("explain",), ("render", "-o", "@out"), ("build", "--dry-run", "-o", "@out"))


def _query_cases() -> Iterator[Case]:
    for command in QUERY_COMMANDS:
        for flag in COMBINATION_FLAGS:
            for label, value in BAD_VALUES.items():
                yield Case(f"{command[0]} {flag} {label}", (*command, flag, value), 2)


# Values pasted from elsewhere (issue 39): nvidia-smi's "CUDA Version" as the driver, torch.__version__ as --torch.
PASTED: dict[str, tuple[str, ...]] = {
    "cuda version as driver": ("--driver", "12.2"),
    "cuda major as driver": ("--driver", "12"),
    "cuda patch release as driver": ("--driver", "13.0.2"),
    "four-digit driver": ("--driver", "1000"),
    "full-width cuda version": ("--driver", "\uff11\uff12.\uff12"),
    "torch local substitution": ("--torch", "2.5.1+$(id)"),
    "torch local long": ("--torch", "2.5.1+" + "cu" * 200),
    "torch local non-ascii": ("--torch", "2.5.1+cu\u00b9\u00b2\u2074"),
    "torch local unknown": ("--torch", "2.5.1+rocm6.2"),
    "torch local twice": ("--torch", "2.5.1+cu124+cu121"),
    "torch local empty": ("--torch", "2.5.1+"),
    "torch local against variant": ("--torch", "2.5.1+cu124", "--variant", "cu121"),
    "torch local against bad variant": ("--torch", "2.5.1+cu124", "--variant", "$(id)"),
}


def _pasted_cases() -> Iterator[Case]:
    for command in QUERY_COMMANDS:
        for label, args in PASTED.items():
            yield Case(f"{command[0]} {label}", (*command, *args), 2)
    yield Case("inspect cuda version as driver", ("inspect", "img:1", "--driver", "12.2"), 2)
    yield Case("matrix show cuda version as driver", ("matrix", "show", "driver", "12.2"), 2)
    for verb in ("verify", "sync"):
        yield Case(f"matrix {verb} torch build", ("matrix", verb, "--torch", "2.5.1+cu124"), 2)


BAD_REPOS = {
    "upper": "Team/Torch",
    "empty": "",
    "colons": "a:b:c",
    "traversal": "../x",
    "space": "team torch",
    "scheme": "https://ghcr.io/org/torch",
    "long": "a" * 300,
    "bake-attributes": "ref,type=local,dest=/tmp/x",
    "substitution": "ghcr.io/org/$(id)",
    "credentials": f"user:{SECRET}@ghcr.io/org/torch",
}
REPO_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("render", "-o", "@out", "--repo"),
    ("build", "--dry-run", "-o", "@out", "--repo"),
    ("publish", "--dry-run", "--repo"),
    ("matrix", "ci", "--format", "github", "--repo"),
    ("matrix", "ci", "--format", "bake", "-o", "@out", "--cache-repo"),
    ("doctor", "--repo"),
    ("matrix", "html", "-o", "@out", "--repo"),
    ("run", "--dry-run", "--repo"),
)


IMAGE_COMMANDS = (("smoke",), ("inspect",), ("inspect", "--pull"), ("run", "--dry-run"), ("doctor", "--check"))


IMAGE_COMMANDS = (("smoke",), ("inspect",), ("inspect", "--pull"), ("run", "--dry-run"), ("doctor", "--check"))


def _repo_cases() -> Iterator[Case]:
    for command in REPO_COMMANDS:
        for label, value in BAD_REPOS.items():
            yield Case(f"{' '.join(command[:2])} repo {label}", (*command, value), 2)
    for label, value in {**BAD_REPOS, "upper-image": "Upper/Case:1", "bad-digest": "img@sha256:xyz"}.items():
        if value.startswith("a" * 10) or label == "bake-attributes":
            continue
        for image_command in IMAGE_COMMANDS:
            if image_command == ("doctor", "--check") and not value:
                continue  # `--check ""` is `--check`: the recommended image
            yield Case(f"{' '.join(image_command)} image {label}", (*image_command, value), 2)


# --- files -------------------------------------------------------------------------------------------------


def fifo(tmp: Path) -> str:
    path = tmp / "pipe"
    os.mkfifo(path)
    return str(path)


def directory(tmp: Path) -> str:
    (tmp / "folder").mkdir()
    return str(tmp / "folder")


def text(content: bytes, name: str = "file.txt") -> Make:
    def make(tmp: Path) -> str:
        (tmp / name).write_bytes(content)
        return str(tmp / name)

    return make


def link_to(target: str) -> Make:
    def make(tmp: Path) -> str:
        (tmp / "link").symlink_to(target)
        return str(tmp / "link")

    return make


def unreadable(tmp: Path) -> str:
    path = tmp / "secret.txt"
    path.write_text("x")
    path.chmod(0)
    return str(path)


BAD_FILES: dict[str, Make] = {
    "named pipe": fifo,
    "dev zero": lambda tmp: "/dev/zero",
    "link to dev zero": link_to("/dev/zero"),
    "directory": directory,
    "missing": lambda tmp: str(tmp / "missing.txt"),
    "not utf-8": text(b"numpy\n\xff\xfe\n"),
    "too large": text(b"#" * (5 << 20)),
    "deep nesting": text(b"x = " + b"[" * 20000 + b"]" * 20000 + b"\n"),
    "binary": text(bytes(range(256)) * 4),
}
if os.geteuid() != 0:  # root reads a mode-0 file anyway
    BAD_FILES["unreadable"] = unreadable


def _file_cases() -> Iterator[Case]:
    for label, make in BAD_FILES.items():
        yield Case(f"--matrix {label}", ("--matrix", "@file", "lookup"), 2, {"@file": make})
        yield Case(f"matrix check {label}", ("matrix", "check", "@file"), 2, {"@file": make})
        yield Case(f"--requirements {label}", ("render", "-o", "@out", "--requirements", "@file"), 2, {"@file": make})
        yield Case(f"--ca-bundle {label}", ("render", "-o", "@out", "--ca-bundle", "@file"), 2, {"@file": make})
        yield Case(f"$PIP_CERT {label}", ("render", "-o", "@out"), 2, {"@file": make}, {"PIP_CERT": "@file"})
    yield Case("--matrix with a BOM", ("--matrix", "@file", "matrix", "check"), 0,
               {"@file": _bom_matrix})  # fmt: skip
    secret_line = f"--index-url https://user:{SECRET}@pypi.corp.example/simple\n".encode()
    # the file's index goes into the pipconf secret: rendered, and the secret is in no file written, nor printed
    yield Case("requirements with an index secret", ("render", "-o", "@out", "--requirements", "@file"), 0,
               {"@file": text(b"numpy\n" + secret_line)})  # fmt: skip


def _bom_matrix(tmp: Path) -> str:
    path = tmp / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + (ROOT / "matrix.toml").read_bytes())
    return str(path)


# --- output folders, extensions, secrets, contradictions -----------------------------------------------------


def foreign_folder(tmp: Path) -> str:
    folder = tmp / "project"
    folder.mkdir()
    (folder / "Dockerfile").write_text("FROM theirs\n")
    return str(folder)


def extension(extra: Callable[[Path], None], name: str = "myext") -> Make:
    def make(tmp: Path) -> str:
        folder = tmp / name
        folder.mkdir()
        (folder / "setup.py").write_text("from setuptools import setup\nsetup(name='myext')\n")
        extra(folder)
        return str(folder)

    return make


def _other_cases() -> Iterator[Case]:
    for command in (("render",), ("build", "--dry-run")):
        yield Case(f"{command[0]} -o foreign folder", (*command, "-o", "@dir"), 2, {"@dir": foreign_folder})
        yield Case(f"{command[0]} -o a file", (*command, "-o", "@dir"), 2, {"@dir": text(b"x")})
        yield Case(f"{command[0]} -o empty", (*command, "-o", ""), 2)
    ext = ("render", "-o", "@out", "--torch", "2.14.1", "--arch", "sm_89", "--extension", "@ext")
    yield Case("extension links out", ext, 2, {"@ext": extension(lambda f: (f / "key").symlink_to("/etc/passwd"))})
    yield Case("extension dev zero", ext, 2, {"@ext": extension(lambda f: (f / "zero").symlink_to("/dev/zero"))})
    yield Case("extension named pipe", ext, 2, {"@ext": extension(lambda f: os.mkfifo(f / "pipe"))})
    yield Case("extension redirect name", ext, 2, {"@ext": extension(lambda f: None, "x>y")})
    yield Case("extension glob name", ext, 2, {"@ext": extension(lambda f: None, "a*[b]")})
    for flag, url in (
        ("--torch-index-url", f"https://mirror.example/whl?token={SECRET}"),
        ("--torch-index-url", f"https://bob:{SECRET}@mirror.example/whl"),
        ("--apt-mirror", f"http://mirror.example/?access_token={SECRET}"),
        ("--pip-index-url", f"https://alice:{SECRET}@pypi.example/sim ple"),
        ("--pip-extra-index-url", f"https://pypi.example/simple?api_key={SECRET}&x= y"),
        ("--extension", f"y @ git+https://user:{SECRET}@github.com/x/y.git"),
        ("--pip", f"y @ https://h/x.whl?token={SECRET}"),
    ):
        yield Case(f"secret in {flag}", ("render", "-o", "@out", flag, url), 2)
    yield Case("index secret from the environment", ("render", "-o", "@out"), 2,
               env={"PIP_INDEX_URL": f"https://u:{SECRET}@pypi.example/a b"})  # fmt: skip
    yield Case("pip against the torch pin", ("render", "-o", "@out", "--torch", "2.14.1", "--pip", "torch==1.0.0"), 2)
    yield Case("aliases-only with no-push", ("publish", "--dry-run", "--aliases-only", "--no-push"), 2)
    yield Case("password without a user", ("build", "--dry-run", "-o", "@out"), 2,
               env={"TORCHYARD_REGISTRY_PASSWORD": SECRET})  # fmt: skip
    yield Case("user without a password", ("build", "--dry-run", "-o", "@out", "--registry-user", "bob"), 2)
    yield Case("gpus nonsense", ("build", "--dry-run", "-o", "@out", "--gpus", "-1"), 2)
    yield Case("limit negative", ("lookup", "--limit", "-5"), 2)
    yield Case("unknown target", ("render", "-o", "@out", "--target", "debug"), 2)
    yield Case("strategy typo", ("render", "-o", "@out", "--strategy", "cuda_base"), 2)
    yield Case("label namespace", ("render", "-o", "@out", "--label", "io.torchyard.version=1"), 2)
    yield Case("label injection", ("render", "-o", "@out", "--label", 'a=b" RUN id'), 2)
    yield Case("user root", ("render", "-o", "@out", "--user", "root"), 2)
    yield Case("refresh token injection", ("render", "-o", "@out", "--refresh", "2026;id"), 2)
    yield Case("matrix show unknown kind", ("matrix", "show", "gpu", "x"), 2)
    yield Case("matrix show bad driver", ("matrix", "show", "driver", "$(id)"), 2)
    yield Case("publish only matches nothing", ("publish", "--dry-run", "--only", "nothing*"), 2)
    yield Case("publish report under a file", ("publish", "--dry-run", "--report", "/dev/null/r.json"), 2)
    yield Case("publish report onto a device", ("publish", "--dry-run", "--report", "/dev/null"), 2)
    yield Case("smoke report under a device", ("smoke", "img:1", "--report", "/dev/zero/r.json"), 2)
    yield Case("smoke expect from a pipe-like device", ("smoke", "img:1", "--expect", "/dev/zero"), 2)
    yield Case("smoke arch nonsense", ("smoke", "img:1", "--arch", "sm_1x"), 2)
    yield from _run_cases()


def _run_cases() -> Iterator[Case]:
    """`torchyard run` and `doctor --check`: every value is refused before the engine is asked."""
    run = ("run", "--dry-run")
    for label, name in {"empty": "", "digit first": "1A=x", "space": "A B=x", "substitution": "$(id)=1",
                        "only a value": "=x", "newline": "A\nB=1", "dash": "-rm=1"}.items():  # fmt: skip
        yield Case(f"run -e {label}", (*run, "-e", name, "img:1"), 2)
    for label, size in {"empty": "", "unit": "16q", "injection": "1g;id", "negative": "-1", "zero": "0",
                        "spaces": "16 g", "long": "9" * 40}.items():  # fmt: skip
        yield Case(f"run --shm-size {label}", (*run, "--shm-size", size, "img:1"), 2)
    yield Case("run image and --here", (*run, "img:1", "--here"), 2)
    yield Case("run options without a second --", (*run, "img:1", "--", "--network", "host", "python"), 2)
    yield Case("run python spec nonsense", (*run, "--python", "$(id)"), 2)
    yield Case("run torch spec nonsense", (*run, "--torch", "2.x;id"), 2)
    yield Case("run os traversal", (*run, "--os", "../../etc"), 2)
    yield Case("doctor check timeout negative", ("doctor", "--check", "--check-timeout", "-1"), 2)
    yield Case("inspect platform unknown", ("inspect", "img:1", "--platform", "linux/s390x"), 2)
    yield Case("inspect platform injection", ("inspect", "img:1", "--platform", "linux/amd64;id"), 2)


CASES = [*_query_cases(), *_pasted_cases(), *_repo_cases(), *_file_cases(), *_other_cases()]


def test_there_are_at_least_300_cases() -> None:
    assert len(CASES) >= 300


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    before = sorted(p.name for p in ROOT.iterdir())
    yield work
    assert sorted(p.name for p in ROOT.iterdir()) == before, "a command wrote into the checkout"


def _timeout(signum: int, frame: object) -> None:
    raise TimeoutError(f"the command did not answer within {SECONDS} s")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input(
    case: Case, sandbox: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made = {key: make(sandbox) for key, make in case.files.items()}
    argv = [made.get(a, str(sandbox / "out") if a == "@out" else a) for a in case.argv]
    for key, value in case.env.items():
        monkeypatch.setenv(key, made.get(value, value))
    previous = signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(SECONDS)
    try:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    assert exit_.value.code == case.code, (out + err)[-2000:]
    assert "Traceback" not in out + err
    errors = [line for line in err.splitlines() if line.startswith("torchyard: error: ")]
    assert len(errors) == (0 if case.code == 0 else 1), err
    if case.code == 2:
        assert err.count("\n") == 1, err  # one line, nothing else
    assert SECRET not in out + err
    inputs = {Path(p) for p in made.values()}
    for path in sandbox.rglob("*"):
        if path in inputs or any(parent in inputs for parent in path.parents) or path.is_symlink():
            continue
        if path.is_file() and path.stat().st_size < (1 << 20) and os.access(path, os.R_OK):
            assert SECRET.encode() not in path.read_bytes(), path
