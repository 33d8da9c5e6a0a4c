"""One chooser for a machine (issue 18): on recorded hosts, doctor (host.doctor.diagnose), `lookup --here`,
`build --dry-run` and `render` name the same combination; with no GPU (or a driver that fails) doctor and
`lookup --here` agree on the CPU image, and every --here verdict on the GPU part is CANNOT TELL, never RUNS."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from host_kit import (
    A10_580,
    DOCKER_WITH_TOOLKIT,
    H100X2_570,
    P100_470,
    RTX4090_535,
    RTX5090_575,
    SMI,
    SMI_BROKEN,
    SMI_NO_CC,
    T4_470_NO_CC,
    FakeSystem,
    machine,
)
from matrix_kit import real

import builder.host.probe
from builder.cli.main import main
from builder.core import env
from builder.host.choose import choose_here
from builder.host.doctor import diagnose
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.host.system import Ran
from builder.resolve.gpus import catalogue
from builder.resolve.query import RawQuery, parse_query
from builder.resolve.resolver import first_valid, lookup, valid_newer
from builder.site.data import _Picks

M = real()


@dataclass(frozen=True)
class Host:
    name: str
    system: FakeSystem
    gpu: bool  # a GPU the driver runs: build and render choose for it too
    page: tuple[str, str] | None = None  # the page's cell for it: driver branch, GPU name


def _p100() -> FakeSystem:
    system = machine(P100_470, driver="470.82.01")
    system.commands = {**system.commands, SMI: Ran(2, T4_470_NO_CC), SMI_NO_CC: Ran(0, P100_470)}
    return system


HOSTS = [
    Host("rtx4090-535", machine(RTX4090_535, driver="535.104.05"), True, ("535", "GeForce RTX 4090")),
    Host("2xh100-570", machine(H100X2_570, driver="570.124.06"), True, ("570", "NVIDIA H100")),
    Host("rtx5090-575", machine(RTX5090_575, driver="575.57.08"), True, ("575", "GeForce RTX 5090")),
    Host("p100-470", _p100(), True, ("470", "Tesla P100")),
    Host("a10-580", machine(A10_580, driver="580.65.06"), True, ("580", "NVIDIA A10")),
    Host("no-gpu", machine(None, toolkit=False), False),
    Host("driver-failing", machine(SMI_BROKEN, smi_code=9, driver="535.104.05"), False),
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    code = exit_.value.code
    assert isinstance(code, int)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def on(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv(env.ANY_HOST, raising=False)
    return monkeypatch


def _doctor(system: FakeSystem) -> str | None:
    d = diagnose(M, probe(M, system), read_runtime(system, lambda: DOCKER_WITH_TOOLKIT), RawQuery(), "torchyard")
    return d.recommended.result.combo.id if d.recommended else None


@pytest.mark.parametrize("host", HOSTS, ids=[h.name for h in HOSTS])
def test_every_surface_names_the_same_combination(
    host: Host, on: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    on.setattr(builder.host.probe, "RealSystem", lambda: host.system)
    chosen = choose_here(M, probe(M, host.system), RawQuery())
    assert chosen.result is not None
    answer = chosen.result.combo.id
    assert _doctor(host.system) == answer
    code, out, _ = run(capsys, "lookup", "--here", "--json")
    assert code == 0
    assert json.loads(out)["results"][0]["id"] == answer
    if not host.gpu:
        assert chosen.result.combo.variant.cuda is None  # what runs here: the CPU image, as doctor says
        return
    assert host.page is not None
    assert _page_choice(*host.page) == answer
    code, out, _ = run(capsys, "render", "-o", str(tmp_path / "render"), "--json")
    assert (code, json.loads(out)["id"]) == (0, answer)
    code, out, _ = run(capsys, "build", "--dry-run", "-o", str(tmp_path / "build"))
    assert code == 0
    assert next(line for line in out.splitlines() if line.startswith("chose ")).split()[1] == answer


def _page_choice(branch: str, gpu: str) -> str | None:
    """The compatibility page's choice for a driver branch and a GPU, as page_data computes every cell."""
    assert gpu in {k.gpu.name for k in catalogue(M)}  # a name the page's selector offers
    q = parse_query(M, RawQuery(driver=branch, gpus=(gpu,), platform="linux/amd64"))
    picks = _Picks(M, "torchyard", set())
    at = picks.pick(q)
    return None if at is None else str(picks.choices[at]["id"])


def test_first_valid_is_lookups_first_row() -> None:
    """The chooser's fast path (newest release first) names what lookup ranks first, on every driver branch
    for GPUs of every generation and with no GPU."""
    for branch in [None, *(str(b.branch) for b in M.driver_branches)]:
        for gpus in [
            (),
            ("Tesla P100",),
            ("NVIDIA A10",),
            ("GeForce RTX 4090",),
            ("NVIDIA H100",),
            ("GeForce RTX 5090",),
        ]:
            q = parse_query(M, RawQuery(driver=branch, gpus=gpus))
            found = lookup(M, q)
            best = first_valid(M, q)
            assert (best and best.combo.id) == (found.valid[0].combo.id if found.valid else None), (branch, gpus)


def test_valid_newer_is_lookups_rows_newer_than_the_choice() -> None:
    """doctor's question about newer torch builds asks only the newer releases: the same rows, in lookup's order
    (including the unrecorded ones a known-good choice ranks above)."""
    for branch in [None, "470", "535", "580", "590"]:
        for gpus in [(), ("NVIDIA A10",), ("GeForce RTX 5090",), ("Tesla V100-SXM2-16GB",)]:
            q = parse_query(M, RawQuery(driver=branch, gpus=gpus))
            found = lookup(M, q)
            if not found.valid:
                continue
            than = found.valid[0].combo.torch.version
            want = [r.combo.id for r in found.valid if r.combo.torch.version > than]
            assert [r.combo.id for r in valid_newer(M, q, than)] == want, (branch, gpus)
    q = parse_query(M, RawQuery(driver="580", gpus=("NVIDIA H100",)))
    assert valid_newer(M, q, M.torch[0].version)  # a question with newer rows, so the equality above has bite


def test_the_recorded_hosts_get_gpu_answers() -> None:
    """The answers themselves (a change in the matrix that moves them shows here, on purpose)."""
    answers = {h.name: choose_here(M, probe(M, h.system), RawQuery()).result for h in HOSTS}
    cuda = {name: r.combo.variant.name for name, r in answers.items() if r is not None}
    assert cuda["no-gpu"] == "cpu" and cuda["driver-failing"] == "cpu"
    assert all(cuda[h.name] != "cpu" for h in HOSTS if h.gpu)


def test_a_failing_driver_is_a_driver_problem_with_its_fix() -> None:
    system = machine(SMI_BROKEN, smi_code=9, driver="535.104.05")
    d = diagnose(M, probe(M, system), read_runtime(system, lambda: DOCKER_WITH_TOOLKIT), RawQuery(), "torchyard")
    driver = [p for p in d.problems if p.check == "driver"]
    assert len(driver) == 1
    assert driver[0].message.startswith("nvidia-smi failed (exit 9)")
    assert "reboot" in driver[0].fix
    assert any(u.startswith("GPU checks: the driver is installed but fails") for u in d.unchecked)


def test_explain_here_without_a_driver_never_says_runs_for_a_gpu_build(
    on: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on.setattr(builder.host.probe, "RealSystem", lambda: machine(SMI_BROKEN, smi_code=9, driver="535.104.05"))
    code, out, err = run(capsys, "explain", "--here", "--variant", "cu126", "--json")
    data = json.loads(out)
    assert (code, data["verdict"]) == (6, "cannot-tell")
    assert "GPU images: CANNOT TELL" in err
    assert not any(c["status"] == "pass" for c in data["checks"] if c["rule"] in ("driver-cuda", "arch-torch"))
