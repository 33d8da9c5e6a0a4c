"""Input people paste (issue 39, item 6), through `builder.cli.main:main` as a person types it: a driver branch newer
than every one matrix.toml records is "not recorded" (CANNOT TELL, never RUNS, never refused); the "CUDA Version" of
nvidia-smi's header given as --driver is refused in one line naming the branch that reports it; torch.__version__
given as --torch (2.5.1+cu124) is --torch 2.5.1 --variant cu124."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from host_kit import RTX4090_520, machine
from matrix_kit import combo, query, real
from test_inspect import FOREIGN, foreign

import builder.engine
from builder.cli.main import main
from builder.core import env
from builder.core.archs import Arch
from builder.core.errors import UsageError
from builder.core.versions import cuda_form, parse_driver
from builder.host.choose import choose_here, host_query
from builder.host.probe import probe
from builder.matrix.drivers import READ_DRIVER, driver_flag
from builder.resolve import rules
from builder.resolve.facts import Facts
from builder.resolve.query import Query, RawQuery, parse_query, torch_build
from builder.resolve.rules.check import Missing, Status, not_checked
from builder.resolve.verdict import Answer, verdict

M = real()
F = Facts(M)
NEWEST = max(b.branch for b in M.driver_branches)
BEYOND = (
    f"the driver branch 999 is newer than every recorded one (newest: {NEWEST}); a newer driver runs older CUDA "
    "builds, but what this one reports and supports is not recorded"
)
TO_TELL = f"driver-gpu, driver-cuda: {BEYOND} (record it in matrix.toml, with its source)"
PINNED = ("--torch", "2.5.1", "--python", "3.11", "--os", "debian12")


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Cli = Callable[..., Run]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.delenv("TORCHYARD_DEBUG", raising=False)
    monkeypatch.delenv("TORCHYARD_MATRIX", raising=False)

    def run(*args: str) -> Run:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        out, err = capsys.readouterr()
        assert isinstance(exc.value.code, int)
        return Run(exc.value.code, out, err)

    return run


# --- a driver branch newer than every recorded one ---------------------------------------------------------


@pytest.mark.parametrize("driver", ["999", "999.12.34", str(NEWEST + 1)])
def test_explain_cannot_tell_for_a_branch_newer_than_every_recorded_one(cli: Cli, driver: str) -> None:
    r = cli("explain", "--driver", driver, "--gpu", "RTX 4090", *PINNED, "--variant", "cu124")
    beyond = BEYOND.replace("999", driver.split(".", maxsplit=1)[0])
    assert (r.code, r.err) == (6, "")
    lines = r.out.splitlines()
    assert lines[0] == "torch2.5.1-cu124-py3.11-debian12: CANNOT TELL"
    assert lines[3:6] == [
        f"  NOT CHECKED  driver-gpu       {beyond}",
        f"  NOT CHECKED  driver-cuda      {beyond}",
        "  PASS         arch-torch       sm_89 runs the sm_86 SASS (same major, lower minor)",
    ]
    assert lines[-1] == f"  to tell: driver-gpu, driver-cuda: {beyond} (record it in matrix.toml, with its source)"


def test_the_newest_recorded_branch_is_still_checked(cli: Cli) -> None:
    r = cli("explain", "--driver", str(NEWEST), "--gpu", "RTX 4090", *PINNED, "--variant", "cu124", "--json")
    checks = {c["rule"]: c["status"] for c in r.json()["checks"]}
    assert (checks["driver-gpu"], checks["driver-cuda"]) == ("pass", "pass")


def test_lookup_lists_every_build_as_cannot_tell_newest_cuda_first_with_a_note(cli: Cli) -> None:
    r = cli("lookup", "--driver", "999", "--gpu", "RTX 4090", *PINNED)
    assert (r.code, r.err) == (0, "")
    lines = r.out.splitlines()
    assert "  driver: " not in r.out  # no driver mode is known: none is claimed
    assert f"  answer: CANNOT TELL: {TO_TELL}" in lines
    table = lines.index("TORCH         CUDA  CUDNN     DRIVER  GPU CODE   PYTHON  OS")
    assert lines[table + 1 : table + 4] == [
        "2.5.1+cu124*  12.4  9.1.0.70  ?       via sm_86  3.11    debian12",
        "2.5.1+cu121*  12.1  9.1.0.70  ?       via sm_86  3.11    debian12",
        "2.5.1+cu118*  11.8  9.1.0.70  ?       via sm_86  3.11    debian12",
    ]
    assert lines[-1] == f"* cannot tell: 3 row(s) not fully checked ({BEYOND})"


def test_lookup_json_says_cannot_tell_and_no_driver_mode(cli: Cli) -> None:
    first = cli("lookup", "--driver", "999", "--gpu", "RTX 4090", *PINNED, "--json").json()["results"][0]
    assert (first["id"], first["verdict"], first["driver_mode"]) == (
        "torch2.5.1-cu124-py3.11-debian12",
        "cannot-tell",
        None,
    )
    assert first["to_tell"] == [TO_TELL]


def test_a_legacy_gpu_past_its_last_branch_still_fails(cli: Cli) -> None:
    # Volta ends with R580: that much the matrix records for every later branch, recorded or not.
    r = cli("explain", "--driver", "999", "--gpu", "V100", "--json")
    assert r.code == 1
    (driver_gpu,) = [c for c in r.json()["checks"] if c["rule"] == "driver-gpu"]
    assert (driver_gpu["status"], driver_gpu["reason"]) == (
        "fail",
        "NVIDIA V100 (Volta) is supported up to the 580 driver branch (legacy); driver 999 (any 999.x, read as the "
        "newest) no longer supports it: use a 580.x driver",
    )


@pytest.mark.parametrize("gpu", [(), ("--gpu", "RTX 4090"), ("--gpu", "H100"), ("--arch", "sm_120")])
def test_a_newer_branch_removes_nothing_the_newest_recorded_one_runs_and_claims_none(
    cli: Cli, gpu: tuple[str, ...]
) -> None:
    def found(driver: str) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = cli("lookup", "--driver", driver, *gpu, "--limit", "0", "--json").json()[
            "results"
        ]
        return results

    newest, newer = found(str(NEWEST)), found("999")
    assert {r["id"] for r in newest} <= {r["id"] for r in newer}
    assert {r["verdict"] for r in newer if r["cuda"] is not None} == {"cannot-tell"}


def test_a_cpu_build_needs_no_driver_at_all(cli: Cli) -> None:
    assert cli("explain", "--driver", "999", "--variant", "cpu", *PINNED).out.splitlines()[0] == (
        "torch2.5.1-cpu-py3.11-debian12: RUNS"
    )


def test_ptx_jit_is_not_checked_either() -> None:
    # A post-Blackwell GPU served only by 2.8 cu129's compute_120 PTX (test_rules' sm_130).
    q = Query(driver=parse_driver("999"), archs=(Arch(13, 0),))
    check = rules.rule_ptx_driver(F, q, combo(M, "2.8.0", "cu129"))
    assert (check.status, check.missing, check.reason) == (Status.NOT_CHECKED, Missing.FACT, BEYOND)


def test_inspect_cannot_tell_with_the_start_check_not_checked_too(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builder.engine, "DockerEngine", foreign)
    r = cli("inspect", FOREIGN, "--driver", "999", "--gpu", "RTX 4090")
    assert r.code == 6
    lines = r.out.splitlines()
    question = lines.index("driver 999 (any 999.x, read as the newest) on GeForce RTX 4090: CANNOT TELL")
    assert lines[question + 1 :] == [
        "  PASS         platform         torch 2.5.1 cu124 has linux/amd64 wheels",
        f"  NOT CHECKED  driver-gpu       {BEYOND}",
        f"  NOT CHECKED  driver-cuda      {BEYOND}",
        "  PASS         arch-torch       sm_89 runs the sm_86 SASS (same major, lower minor)",
        "  PASS         ptx-jit-driver   no PTX JIT involved: the build has SASS for the GPU",
        "  PASS         cudnn-cuda       cuDNN 9.1.0.70 has a CUDA 12 build (tested: 11.8 (11.0-11.7 dynamic only); "
        "12.0-12.6)",
        f"  NOT CHECKED  container-start  {BEYOND}",
        f"  to tell: driver-gpu, driver-cuda, container-start: {BEYOND} (record it in matrix.toml, with its source)",
    ]


def test_render_says_it_cannot_tell(cli: Cli, tmp_path: Any) -> None:
    r = cli("render", "--any-host", "--driver", "999", "--gpu", "RTX 4090", *PINNED, "-o", str(tmp_path))
    assert r.code == 0
    assert f"torchyard: cannot tell whether torch2.5.1-cu124-py3.11-debian12 runs there: {BEYOND}" in r.err.splitlines()


def test_matrix_show_driver_says_the_same(cli: Cli) -> None:
    data = cli("matrix", "show", "driver", "999", "--json").json()
    assert (data["reports_cuda"], data["archs"], data["note"]) == (None, [], BEYOND)
    assert "sm_89" in data["archs_not_recorded"] and "sm_70" in data["archs_not_supported"]


def test_identical_reasons_of_several_rules_are_one_line_to_tell() -> None:
    open_ = [not_checked(rule, "x is not recorded", (), Missing.FACT) for rule in ("driver-gpu", "driver-cuda")]
    assert verdict(open_) == verdict(open_ + open_[:1])
    assert verdict(open_).answer is Answer.CANNOT_TELL
    assert verdict(open_).unknown == (
        "driver-gpu, driver-cuda: x is not recorded (record it in matrix.toml, with its source)",
    )


# --- a CUDA version given as the driver --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12", (12, None)),
        ("12.2", (12, 2)),
        ("13.0.2", (13, 0)),
        (" 11.8 ", (11, 8)),
        ("9.2", (9, 2)),
        ("99", (99, None)),  # the form of one; the matrix says it is no CUDA major
        ("535", None),
        ("535.104.05", None),
        ("1000", None),
        ("12.2.1.1", None),
        ("12.", None),
        ("\uff11\uff12.\uff12", None),  # full-width digits
    ],
)
def test_a_cuda_version_is_written_with_a_one_or_two_digit_major(text: str, expected: tuple[int, int | None]) -> None:
    assert cuda_form(text) == expected


CUDA_LINES = {
    "12.2": "--driver: '12.2' is a CUDA version (nvidia-smi's \"CUDA Version\"), not a driver; driver branch 535 "
    f"reports CUDA 12.2: give --driver 535, or the exact driver: {READ_DRIVER}",
    "13.0.2": "--driver: '13.0.2' is a CUDA version (nvidia-smi's \"CUDA Version\"), not a driver; driver branch 580 "
    f"reports CUDA 13.0: give --driver 580, or the exact driver: {READ_DRIVER}",
    "12": "--driver: '12' is a CUDA version (nvidia-smi's \"CUDA Version\"), not a driver; driver branches 525 to 575 "
    f"report CUDA 12.x: give the driver: {READ_DRIVER}",
    "13.9": "--driver: '13.9' is a CUDA version (nvidia-smi's \"CUDA Version\"), not a driver; no recorded driver "
    f"branch reports CUDA 13.9: give the driver: {READ_DRIVER}",
}
COMMANDS = (("lookup",), ("explain",), ("inspect", "img:1"), ("render", "--any-host"), ("build", "--dry-run"))


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
@pytest.mark.parametrize("text", list(CUDA_LINES))
def test_a_cuda_version_as_the_driver_is_one_line_exit_2(cli: Cli, command: tuple[str, ...], text: str) -> None:
    r = cli(*command, "--driver", text)
    assert (r.code, r.out, r.err) == (2, "", f"torchyard: error: {CUDA_LINES[text]}\n")


def test_matrix_show_driver_refuses_a_cuda_version_in_its_own_words(cli: Cli) -> None:
    r = cli("matrix", "show", "driver", "12.2")
    assert (r.code, r.err) == (
        2,
        "torchyard: error: " + CUDA_LINES["12.2"].replace("--driver", "matrix show driver") + "\n",
    )


@pytest.mark.parametrize("text", ["99", "1000", "9.2", "2.5.1", "535.", "\uff15\uff13\uff15"])
def test_what_is_neither_is_not_a_driver_version(text: str) -> None:
    with pytest.raises(UsageError) as refused:
        driver_flag(M, text)
    assert str(refused.value) == (
        f"--driver: {text!r} is not an NVIDIA driver version (examples: 535, 550.54.15, 570.124.06)"
    )


@pytest.mark.parametrize("text", ["535", "535.104.05", "384", "620", "999.1"])
def test_a_driver_is_read_as_one(text: str) -> None:
    assert str(driver_flag(M, text)) == text


# --- torch.__version__ given as --torch --------------------------------------------------------------------


@pytest.mark.parametrize(("pasted", "variant"), [("2.5.1+cu124", "cu124"), ("2.5.1+cpu", "cpu")])
def test_a_pasted_torch_version_is_the_release_and_its_variant(cli: Cli, pasted: str, variant: str) -> None:
    rest = ("--python", "3.11", "--os", "debian12")
    assert (
        cli("lookup", "--torch", pasted, *rest).out
        == cli("lookup", "--torch", "2.5.1", "--variant", variant, *rest).out
    )
    explicit = cli("explain", "--torch", "2.5.1", "--variant", variant, *rest)
    both = cli("explain", "--torch", pasted, "--variant", variant, *rest)
    assert both == explicit and explicit.out.startswith(f"torch2.5.1-{variant}-py3.11-debian12: RUNS")


DISAGREE = (
    "torchyard: error: --torch '2.5.1+cu124' is the cu124 build, --variant 'cu121' another: give one of them "
    "(--torch 2.5.1 --variant cu124, or --torch 2.5.1 --variant cu121)\n"
)


TORCH_COMMANDS = tuple(c for c in COMMANDS if c[0] != "inspect")  # inspect reads the torch of its IMAGE


@pytest.mark.parametrize("command", TORCH_COMMANDS, ids=[c[0] for c in TORCH_COMMANDS])
def test_a_pasted_torch_and_another_variant_is_one_line_exit_2(cli: Cli, command: tuple[str, ...]) -> None:
    r = cli(*command, "--torch", "2.5.1+cu124", "--variant", "cu121")
    assert (r.code, r.out, r.err) == (2, "", DISAGREE)


def test_a_local_part_that_is_no_variant_names_the_torch_flag(cli: Cli) -> None:
    known = ", ".join(sorted({v.name for t in M.torch for v in t.variants}))
    r = cli("lookup", "--torch", "2.5.1+rocm6.2")
    assert (r.code, r.err) == (2, f"torchyard: error: --torch '2.5.1+rocm6.2': 'rocm6.2' is not a wheel variant in the "
                                  f"matrix (known: {known})\n")  # fmt: skip


def test_render_takes_the_pasted_build(cli: Cli, tmp_path: Any) -> None:
    r = cli(
        "render", "--any-host", "--torch", "2.5.1+cu121", "--python", "3.11", "--os", "debian12", "-o", str(tmp_path)
    )
    assert r.code == 0, r.err
    assert r.out.startswith("chose torch2.5.1-cu121-py3.11-debian12 (the best of 1 valid combinations)\n")


def test_the_split_is_done_once_and_ranges_are_left_alone() -> None:
    raw = torch_build(M, RawQuery(torch=" 2.5.1+cu124 "))
    assert (raw.torch, raw.variant) == ("2.5.1", "cu124")
    assert torch_build(M, raw) == raw
    for spec in (">=2.5,<2.7", "2.5", "2.5+x" * 20):
        assert torch_build(M, RawQuery(torch=spec)) == RawQuery(torch=spec)
    assert parse_query(M, RawQuery(torch="2.5+cu124")).variant == "cu124"


def test_the_machine_does_not_override_a_pasted_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    # No GPU here: an open wish gets the CPU image; --torch 2.5.1+cu124 asked for cu124, so it keeps it.
    monkeypatch.delenv(env.ANY_HOST, raising=False)
    host = probe(M, machine(None, toolkit=False))
    assert host_query(M, host, RawQuery(torch="2.5.1+cu124")).query.variant == "cu124"
    assert host_query(M, host, RawQuery(torch="2.5.1")).query.variant == "cpu"
    with pytest.raises(UsageError, match=r"^--torch '2\.5\.1\+rocm6\.2': 'rocm6\.2' is not a wheel variant"):
        host_query(M, host, RawQuery(torch="2.5.1+rocm6.2"))


@pytest.mark.parametrize("smi", [None, RTX4090_520])
def test_the_chooser_of_doctor_and_run_reads_it_as_the_explicit_flags(smi: str | None) -> None:
    # A 520 driver runs no cu124 build: with the variant asked, no CPU image stands in for it.
    host = probe(M, machine(smi, driver="520.61.05") if smi else machine(None, toolkit=False))
    pasted = choose_here(M, host, RawQuery(torch="2.5.1+cu124", python="3.11"))
    assert pasted == choose_here(M, host, RawQuery(torch="2.5.1", variant="cu124", python="3.11"))
    assert not pasted.fallback


def test_query_helper_reads_the_pasted_form() -> None:
    assert query(M, torch="2.5.1+cu118").variant == "cu118"


@pytest.mark.parametrize("command", ["verify", "sync"])
def test_matrix_commands_that_take_a_release_name_it(cli: Cli, command: str) -> None:
    # Before any upstream index is asked: these read whole releases, every variant of them.
    r = cli("matrix", command, "--torch", "2.16.0+cu130")
    assert (r.code, r.out, r.err) == (
        2,
        "",
        f"torchyard: error: --torch: '2.16.0+cu130' is a torch build (torch.__version__); matrix {command} takes a "
        "release: --torch 2.16.0\n",
    )
