"""`matrix verify` against recorded upstream documents (tests/unit/data/upstream): the small test matrix
(tests/unit/matrix_kit.py: torch 2.5.1 with cu124 on PyPI, cu118 and cpu on PyTorch's index) checked
against PyPI's real PEP 691 pages and the real METADATA of its wheels, then against staged drift: a missing
version, a yanked one, a changed pin, a renamed platform tag, more Pythons upstream, a busy index, a broken
one, a timeout, a truncated wheel, a redirect; base images and the lock against an in-memory registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
from http_kit import Answer, Net, Sent
from matrix_kit import BASE, edit, line_of
from registry_kit import MemoryRegistry
from upstream_kit import FILES, Upstream, with_pin

from builder.cli.main import main
from builder.matrix import load_matrix
from builder.matrix.lock import BaseLock, LockedImage
from builder.net.cache import DiskCache
from builder.net.http import Policy
from builder.oci.client import Distribution
from builder.upstream.report import Report, Status, markdown, text
from builder.upstream.verify import VerifyOptions, verify

WHEELS = frozenset({"torch", "companions"})


@pytest.fixture
def up() -> Upstream:
    """Upstream as recorded, plus the cp313 companion wheels PyPI lacks (so that everything holds)."""
    found = Upstream.recorded()
    for project in ("torchvision", "torchaudio"):
        template = next(f for f in found.page(project)["files"] if "cp312-cp312-manylinux1_x86_64" in f["filename"])
        extra = dict(template, filename=template["filename"].replace("cp312", "cp313"))
        extra["url"] = template["url"].replace("cp312", "cp313")
        found.page(project)["files"].append(extra)
        found.metadata[extra["filename"]] = found.metadata[template["filename"]]
    return found


def run(
    up: Upstream,
    tmp_path: Path,
    text_: str = BASE,
    *,
    only: frozenset[str] = WHEELS,
    policy: Policy | None = None,
    cache: DiskCache | None = None,
    net: Net | None = None,
    lock: BaseLock | None = None,
    mirror: str | None = None,
) -> Report:
    path = tmp_path / "matrix.toml"
    path.write_text(text_)
    net = up.attach(net or Net())
    http = net.http(policy or Policy(workers=1), cache)
    options = VerifyOptions(only=only, registry_mirror=mirror)
    return verify(load_matrix(path), http, Distribution(http, docker_login=False), options, lock)


def drift(report: Report) -> list[tuple[str, str, str]]:
    return [(f.status.value, f.subject, f.check) for f in report.drift]


def only(report: Report, status: Status) -> list[Any]:
    return [f for f in report.findings if f.status is status]


def test_the_recorded_upstream_shows_the_real_gap_pypi_has(tmp_path: Path) -> None:
    """As recorded, PyPI has torch 2.5.1 cp313 wheels but no cp313 torchvision 0.20.1 / torchaudio 2.5.1."""
    report = run(Upstream.recorded(), tmp_path)
    assert drift(report) == [
        ("missing", "torchvision 0.20.1 (PyPI) linux/amd64", "Python 3.13 wheel"),
        ("missing", "torchaudio 2.5.1 (PyPI) linux/amd64", "Python 3.13 wheel"),
    ]
    assert report.drift[0].where == f"matrix.toml:{line_of(BASE, '[[torchvision]]')}"
    assert report.exit_code == 1


def test_everything_holds(up: Upstream, tmp_path: Path) -> None:
    report = run(up, tmp_path)
    assert (drift(report), report.unreachable, report.exit_code) == ([], [], 0)
    ok = {(f.subject, f.check) for f in only(report, Status.OK)}
    for pin in ("cuDNN pin", "NCCL pin", "CUDA runtime pin"):
        assert ("torch 2.5.1 cu124 (PyPI) linux/amd64", pin) in ok
    assert ("torchvision 0.20.1 (PyPI) linux/amd64", "torch requirement pin") in ok
    wheels = next(f for f in only(report, Status.OK) if f.check == "wheels" and "cu124" in f.subject)
    assert wheels.claim == "3.9, 3.10, 3.11, 3.12, 3.13"


def test_a_missing_version_names_its_neighbours(up: Upstream, tmp_path: Path) -> None:
    up.drop("torch", r"-2\.5\.1-")
    report = run(up, tmp_path)
    found = next(f for f in report.drift if f.check == "release" and "PyPI" in f.subject)
    assert found.status is Status.MISSING
    assert found.upstream == "https://pypi.org/simple/torch/ lists no torch 2.5.1 wheels (nearest: 2.5.0)"
    assert report.exit_code == 1


def test_a_yanked_release_and_a_yanked_wheel(up: Upstream, tmp_path: Path) -> None:
    for f in up.page("torch")["files"]:
        if "-2.5.1-" in f["filename"]:
            f["yanked"] = "broken CUDA pins"
    report = run(up, tmp_path)
    assert [(f.status, f.check) for f in report.drift] == [(Status.YANKED, "release")]
    assert report.drift[0].upstream.endswith("is yanked: broken CUDA pins")

    single = Upstream.recorded()
    single.file("torch", "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl")["yanked"] = True
    found = [(f.status, f.check) for f in run(single, tmp_path).drift if "torch 2.5.1" in f.subject]
    assert found == [(Status.YANKED, "Python 3.11 wheel")]


def test_a_changed_pin_is_drift_with_the_matrix_line_and_the_wheel(up: Upstream, tmp_path: Path) -> None:
    wheel = "torch-2.5.1-cp312-cp312-manylinux1_x86_64.whl"
    up.metadata[wheel] = with_pin(
        up.metadata[wheel], "nvidia-cudnn-cu12 (==9.1.0.70)", "nvidia-cudnn-cu12 (==9.1.0.71)"
    )
    report = run(up, tmp_path)
    (found,) = report.drift
    assert (found.status, found.check, found.claim) == (Status.DIFFERENT, "cuDNN pin", "cuDNN ==9.1.0.70")
    assert found.upstream == f"nvidia-cudnn-cu12==9.1.0.71 (read from {wheel} METADATA)"
    cudnn_line = line_of(BASE, 'cuda_runtime = "nvidia-cuda-runtime-cu12') + 1
    assert found.where == f"matrix.toml:{cudnn_line}"
    assert ("torch 2.5.1 cu124 (PyPI) linux/amd64", "cuDNN pin") in {
        (f.subject, f.check) for f in only(report, Status.OK)
    }


def test_a_pin_the_matrix_does_not_record_is_reported_not_drift(up: Upstream, tmp_path: Path) -> None:
    report = run(up, tmp_path, edit(BASE, 'nccl = "2.21.5"\n', ""))
    (found,) = only(report, Status.UNRECORDED)
    assert (found.check, found.claim) == ("NCCL pin", "NCCL: not recorded")
    assert found.upstream.startswith("nvidia-nccl-cu12==2.21.5 (read from torch-2.5.1-cp39-cp39-")
    assert found.upstream.endswith(" and 4 more wheels)")
    assert report.exit_code == 0


def test_a_renamed_platform_tag_and_pythons_the_matrix_leaves_out(up: Upstream, tmp_path: Path) -> None:
    text_ = edit(BASE, 'platform_tag = "manylinux1_x86_64"', 'platform_tag = "manylinux_2_28_x86_64"')
    renamed = run(up, tmp_path, text_).drift
    assert {f.status for f in renamed} == {Status.RENAMED} and len(renamed) == 5
    assert renamed[0].upstream == "torch-2.5.1-cp39-cp39-manylinux1_x86_64.whl is tagged manylinux1_x86_64"
    fewer = edit(BASE, 'python = ["3.9", "3.10", "3.11", "3.12", "3.13"]', 'python = ["3.9", "3.10", "3.11"]')
    (found,) = run(up, tmp_path, fewer).drift
    assert (found.status, found.check) == (Status.DIFFERENT, "Python list")
    assert found.upstream == "manylinux1_x86_64 wheels also exist for cp312, cp313 (the list claims to be complete)"


def test_a_companion_requirement_is_compared_on_the_matrix_s_torch_releases(up: Upstream, tmp_path: Path) -> None:
    """Drift is a torch release the matrix pairs that the wheel refuses; a wheel that accepts more is
    reported, not drift (the aarch64 torchvision 0.14 wheels declare `torch` unpinned)."""
    for name in [f["filename"] for f in up.page("torchvision")["files"]]:
        up.metadata[name] = with_pin(up.metadata[name], "torch (==2.5.1)", "torch (==2.5.0)")
    (found,) = run(up, tmp_path).drift
    assert (found.subject, found.check, found.claim) == (
        "torchvision 0.20.1 (PyPI) linux/amd64",
        "torch requirement pin",
        "torch requirement ==2.5.1",
    )
    assert found.upstream.startswith("torch==2.5.0: refuses torch 2.5.1, which the matrix accepts (read from ")
    for name in [f["filename"] for f in up.page("torchvision")["files"]]:
        up.metadata[name] = with_pin(up.metadata[name], "torch (==2.5.0)", "torch")
    report = run(
        up,
        tmp_path,
        edit(BASE, 'version = "0.20.1"\nrequires_torch = "==2.5.1"', 'version = "0.20.1"\nrequires_torch = ">=2.5"'),
    )
    assert report.exit_code == 0
    (looser,) = [f for f in report.findings if f.check == "torch requirement pin" and "torchvision" in f.subject]
    assert looser.status is Status.OK


def test_a_companion_python_range_narrower_than_its_wheels_is_fine_a_refused_one_is_not(
    up: Upstream, tmp_path: Path
) -> None:
    text_ = edit(
        BASE,
        'version = "0.20.1"\nrequires_torch = "==2.5.1"',
        'version = "0.20.1"\nrequires_torch = "==2.5.1"\npython = "<3.13"',
    )
    assert run(up, tmp_path, text_).exit_code == 0
    for f in up.page("torchvision")["files"]:
        up.metadata[f["filename"]] = with_pin(
            up.metadata[f["filename"]], "Requires-Python: >=3.8", "Requires-Python: >=3.10"
        )
    refused = [(f.status, f.check, f.upstream.split(" (read")[0]) for f in run(up, tmp_path, text_).drift]
    assert refused == [(Status.DIFFERENT, "Requires-Python", "Requires-Python: >=3.10 refuses Python 3.9")]


def test_429_then_success_is_waited_out(up: Upstream, tmp_path: Path) -> None:
    busy = iter([Answer(429, b"", {"Retry-After": "3"})])
    net = Net().on(lambda sent: next(busy, None) if sent.url == "https://pypi.org/simple/torch/" else None)
    report = run(up, tmp_path, net=net)
    assert (report.exit_code, net.waits) == (0, [3.0])
    assert report.cost["retries"] == 1


def test_a_500_that_lasts_is_not_a_pass(up: Upstream, tmp_path: Path) -> None:
    net = Net().on(lambda sent: Answer(500, b"") if sent.url == "https://pypi.org/simple/torchvision/" else None)
    report = run(up, tmp_path, net=net, policy=Policy(retries=2, workers=1))
    unreachable = [(f.subject, f.check) for f in report.unreachable]
    assert unreachable == [("torchvision 0.20.1 (PyPI) linux/amd64", "release")]
    assert report.unreachable[0].upstream.endswith("answered HTTP 500")
    assert report.exit_code == 5


def test_a_timeout_on_the_files_host(up: Upstream, tmp_path: Path) -> None:
    timeout = requests.exceptions.ReadTimeout("read timed out")
    net = Net().on(lambda sent: timeout if sent.url.startswith(FILES) else None)
    report = run(up, tmp_path, net=net)
    assert {f.check for f in report.unreachable} == {"METADATA"}
    assert report.unreachable[0].upstream.startswith("files.pythonhosted.org is unreachable: ReadTimeout")
    assert report.exit_code == 5


def test_a_truncated_wheel_is_not_a_pass(up: Upstream, tmp_path: Path) -> None:
    def truncated(sent: Sent) -> Answer | None:
        if "torchaudio-2.5.1-cp311" not in sent.url:
            return None
        return Answer(206, b"not a zip at all", {"Content-Range": "bytes 0-15/16"})

    report = run(up, tmp_path, net=Net().on(truncated))
    (found,) = report.unreachable
    assert found.check == "METADATA" and "cannot read METADATA" in found.upstream and "truncated" in found.upstream
    assert report.exit_code == 5


def test_wheels_behind_a_redirect(up: Upstream, tmp_path: Path) -> None:
    for page in up.pages.values():
        for f in page["files"]:
            f["url"] = f["url"].replace(FILES, "https://pypi.org/redirect")
    net = Net().on(
        lambda sent: (
            Answer(302, b"", {"Location": sent.url.replace("https://pypi.org/redirect", FILES)})
            if sent.url.startswith("https://pypi.org/redirect")
            else None
        )
    )
    report = run(up, tmp_path, net=net)
    assert report.exit_code == 0
    assert report.cost["by_host"]["pypi.org"] > 3


def test_an_unreachable_variant_index_is_reported_per_item(up: Upstream, tmp_path: Path) -> None:
    refused = requests.ConnectionError("refused")
    net = Net().on(lambda sent: refused if "download.pytorch.org" in sent.url else None)
    report = run(up, tmp_path, net=net)
    assert {f.subject for f in report.unreachable} == {
        f"{name} {variant} (https://download.pytorch.org/whl/{variant}) linux/amd64"
        for name in ("torch 2.5.1", "torchvision 0.20.1", "torchaudio 2.5.1")
        for variant in ("cu118", "cpu")
    }
    assert report.exit_code == 5
    assert "UNREACHABLE download.pytorch.org: 6 item(s) not checked" in text(report)
    assert "| unreachable | 6 item(s) |" in markdown(report)


def test_a_rerun_from_the_cache_sends_nothing(up: Upstream, tmp_path: Path) -> None:
    first = run(up, tmp_path, cache=DiskCache(tmp_path / "cache"))
    net = Net()
    again = run(up, tmp_path, cache=DiskCache(tmp_path / "cache"), net=net)
    assert first.cost["requests"] > 20 and again.cost["requests"] == 0 and net.sent == []
    assert [f.as_json() for f in again.findings] == [f.as_json() for f in first.findings]


# --- base images and the lock -------------------------------------------------------------------------------

MIRROR = "127.0.0.1:5000"


def registry_with(images: dict[str, str]) -> tuple[Net, MemoryRegistry]:
    net = Net()
    registry = MemoryRegistry(MIRROR).attach(net)
    for ref, arch in images.items():
        name, tag = ref.split(":")
        registry.add_image(name if "/" in name else f"library/{name}", tag, arch=arch)
    return net, registry


def test_base_images_exist_for_the_platforms_built(up: Upstream, tmp_path: Path) -> None:
    images = {"debian:bookworm-slim": "amd64", "python:3.12-slim-bookworm": "arm64"}
    net, _ = registry_with(images)
    report = run(up, tmp_path, only=frozenset({"images"}), net=net, mirror=MIRROR)
    statuses = {(f.subject.split(" ")[0], f.status, f.check) for f in report.findings}
    assert ("debian:bookworm-slim", Status.OK, "linux/amd64 image") in statuses
    assert ("python:3.12-slim-bookworm", Status.MISSING, "linux/amd64 image") in statuses
    missing_tag = {f.subject.split(" ")[0] for f in report.findings if f.check == "tag"}
    assert "nvidia/cuda:12.4.1-base-debian12" in missing_tag
    assert report.exit_code == 1


def test_a_lock_that_upstream_moved(up: Upstream, tmp_path: Path) -> None:
    net, registry = registry_with({"debian:bookworm-slim": "amd64"})
    now = registry.manifests["library/debian", "bookworm-slim"][0]
    current = "sha256:" + __import__("hashlib").sha256(now).hexdigest()
    old = "sha256:" + "1" * 64
    lock = BaseLock(
        str(tmp_path / "matrix.lock"),
        "2026-11-01T00:00:00Z",
        (
            LockedImage("debian:bookworm-slim", current, {"linux/amd64": current}),
            LockedImage("python:3.12-slim-bookworm", old, {"linux/amd64": old}),
        ),
    )
    report = run(up, tmp_path, only=frozenset({"lock"}), net=net, mirror=MIRROR, lock=lock)
    by = {f.subject: f for f in report.findings}
    assert by["debian:bookworm-slim linux/amd64"].status is Status.OK
    assert by["python:3.12-slim-bookworm linux/amd64"].status is Status.MOVED
    assert by["nvidia/cuda:12.4.1-base-debian12 linux/amd64"].status is Status.MISSING
    assert report.exit_code == 1


# --- the command ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only", "torhc"], "--only: 'torhc' is not one of torch, companions, images, lock (did you mean 'torch'?)"),
        (["--torch", "9.9"], "--torch 9.9: no torch release in the matrix matches"),
        (["--json", "--markdown"], "--json and --markdown: pick one"),
        (["--jobs", "0"], "--max-requests, --timeout and --jobs take positive numbers"),
        (
            ["--ca-bundle", "/nonexistent"],
            "CA bundle '/nonexistent' is not a readable file (--ca-bundle, or $PIP_CERT/$SSL_CERT_FILE)",
        ),
    ],
)
def test_bad_input_is_exit_2_and_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["matrix", "verify", *argv])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == f"torchyard: error: {message}\n"


def test_the_command_prints_json_and_exits_with_the_reports_code(
    up: Upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "matrix.toml").write_text(BASE)
    net = up.attach(Net())
    monkeypatch.setattr("requests.Session", net.session)
    monkeypatch.setattr("builder.net.http.time.sleep", net.waits.append)
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", str(tmp_path / "matrix.toml"), "matrix", "verify", "--only", "torch,companions", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert exit_.value.code == data["exit_code"] == 0
    assert data["schema"] == 1 and data["total"] == len(data["findings"]) and data["counts"]["ok"] > 10
    assert set(data["findings"][0]) == {"kind", "status", "subject", "check", "claim", "upstream", "where"}


def test_a_mirror_s_credentials_never_reach_the_report(up: Upstream, tmp_path: Path) -> None:
    net = Net().on(lambda sent: Answer(500, b"") if "torchvision" in sent.url else None)
    path = tmp_path / "matrix.toml"
    path.write_text(BASE)
    http = up.attach(net).http(Policy(retries=0, workers=1))
    options = VerifyOptions(only=WHEELS, pypi_url="https://ci:s3cret-token@pypi.org/simple")
    report = verify(load_matrix(path), http, Distribution(http, docker_login=False), options)
    assert report.unreachable and "s3cret" in report.unreachable[0].upstream  # held, never shown:
    shown = text(report, verbose=True) + markdown(report) + json.dumps([f.as_json() for f in report.findings])
    assert "s3cret" not in shown and "ci:" not in shown
