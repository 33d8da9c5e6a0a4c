"""One question, one answer: lookup, explain, render, build --dry-run, doctor (a recorded machine) and inspect
(the image of the answer, and one of a ruled-out combination) agree on every question."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_engine import Contents, FakeEngine
from host_kit import DOCKER_WITH_TOOLKIT, machine
from matrix_kit import real

from builder.cli.main import main
from builder.engine import ImageInfo
from builder.host.doctor import diagnose
from builder.host.image_inspect import judge, read_facts
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.resolve.query import RawQuery, parse_query
from builder.resolve.resolver import lookup

M = real()


@dataclass(frozen=True)
class Question:
    name: str
    flags: tuple[str, ...]  # as lookup takes them
    smi: str  # what nvidia-smi prints on such a machine
    driver: str
    machine: str  # uname -m
    answer: str | None  # the combination every command must choose (None: nothing runs)


QUESTIONS = [
    Question(
        "rtx4090-535",
        ("--driver", "535.104.05", "--gpu", "RTX 4090", "--platform", "linux/amd64"),
        "0, NVIDIA GeForce RTX 4090, 8.9, 24564, 535.104.05, [N/A]\n",
        "535.104.05",
        "x86_64",
        "torch2.14.1-cu126-py3.13-debian13",
    ),
    Question(
        "h100-580",
        ("--driver", "580.65.06", "--gpu", "H100", "--platform", "linux/amd64"),
        "0, NVIDIA H100 80GB HBM3, 9.0, 81559, 580.65.06, Disabled\n",
        "580.65.06",
        "x86_64",
        "torch2.15.0-cu132-py3.13-debian13",
    ),
    Question(
        "gh200-580",
        ("--driver", "580.126.09", "--gpu", "GH200"),
        "0, NVIDIA GH200 480GB, 9.0, 97871, 580.126.09, Disabled\n",
        "580.126.09",
        "aarch64",
        "torch2.15.0-cu132-py3.13-debian13-arm64",
    ),
    Question(
        "v100-590",
        ("--driver", "590.48.01", "--gpu", "V100", "--platform", "linux/amd64"),
        "0, Tesla V100-SXM2-16GB, 7.0, 16384, 590.48.01, Disabled\n",
        "590.48.01",
        "x86_64",
        None,
    ),
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    code = exit_.value.code
    assert isinstance(code, int)
    return code, capsys.readouterr().out


def first_line_id(out: str) -> str:
    return out.splitlines()[0].split(":")[0]


def chosen_id(out: str) -> str:
    line = next(line for line in out.splitlines() if line.startswith("chose "))
    return line.split()[1]


@pytest.mark.parametrize("q", QUESTIONS, ids=[q.name for q in QUESTIONS])
def test_every_command_gives_the_same_answer(q: Question, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out = run(capsys, "lookup", *q.flags, "--json")
    assert (code == 0) is (q.answer is not None)
    if q.answer is not None:
        assert json.loads(out)["results"][0]["id"] == q.answer
    code, out = run(capsys, "explain", *q.flags)
    assert code == (0 if q.answer else 1)
    if q.answer is not None:
        assert first_line_id(out) == q.answer
    code, out = run(capsys, "render", *q.flags, "-o", str(tmp_path / "render"), "--json")
    assert code == (0 if q.answer else 1)
    if q.answer is not None:
        assert json.loads(out)["id"] == q.answer
    code, out = run(capsys, "build", *q.flags, "--dry-run", "-o", str(tmp_path / "build"))
    assert code == (0 if q.answer else 1)
    if q.answer is not None:
        assert chosen_id(out) == q.answer
    assert _doctor(q) == q.answer


def _doctor(q: Question) -> str | None:
    system = machine(q.smi, arch=q.machine, driver=q.driver)
    d = diagnose(M, probe(M, system), read_runtime(system, lambda: DOCKER_WITH_TOOLKIT), RawQuery(), "torchyard")
    if d.recommended is None or d.recommended.result.combo.variant.cuda is None:
        return None  # a CPU image: no GPU image runs there
    return d.recommended.result.combo.id


def _image_of(combo_id: str) -> FakeEngine:
    torch, variant, python, os_name = combo_id.removeprefix("torch").split("-")[:4]
    manifest: dict[str, Any] = {"id": combo_id, "torch": f"{torch}+{variant}", "python": python[2:], "os": os_name}
    platform = "linux/arm64" if combo_id.endswith("-arm64") else "linux/amd64"
    labels = {"io.torchyard.version": "0.1.0", "io.torchyard.combination": combo_id}
    info = ImageInfo(id="sha256:i", labels=labels, tags=("img:1",), digests=(), size=1, platform=platform)
    fake = FakeEngine({"x": Contents({}, {})})
    fake.images[info.id] = info
    fake.tags["img:1"] = info.id
    fake.files[(info.id, "/etc/torchyard/manifest.json")] = json.dumps(manifest).encode()
    return fake


@pytest.mark.parametrize("q", [q for q in QUESTIONS if q.answer], ids=[q.name for q in QUESTIONS if q.answer])
def test_inspect_runs_the_answer_and_refuses_what_lookup_ruled_out(q: Question) -> None:
    flags = dict(zip(q.flags[::2], q.flags[1::2], strict=True))
    raw = RawQuery(driver=flags["--driver"], gpus=(flags["--gpu"],), platform=flags.get("--platform"))
    asked = parse_query(M, raw)
    assert q.answer is not None
    image = _image_of(q.answer)
    checks = judge(M, read_facts(image, "img:1"), asked)
    assert all(c.ok for c in checks), [(c.rule, c.reason) for c in checks if not c.ok]
    found = lookup(M, asked)
    runtime = {"platform", "driver-gpu", "driver-cuda", "arch-torch", "ptx-jit-driver", "cudnn-cuda"}
    ruled_out = next(
        (r for r in found.rejected if r.first_failure and r.first_failure.rule in runtime and r.combo.variant.cuda),
        None,
    )
    if ruled_out is None:  # GH200 + 580: no runtime rule refuses a build; what is missing is recorded facts
        assert q.name == "gh200-580" and any(r.unrecorded for r in found.valid)
        return
    refused = judge(M, read_facts(_image_of(ruled_out.combo.id), "img:1"), asked)
    assert not all(c.ok for c in refused), ruled_out.combo.id
