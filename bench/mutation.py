"""Mutation testing of the modules where a wrong change does harm (issue 24), with mutmut, on the unit tier.

For each module group: a copy of the checkout in a work folder, a setup.cfg [mutmut] section that mutates only
that group's files and runs only the unit test files that exercise them, `mutmut run`, then a score: the share
of mutants the tests caught (killed or timed out) among those that ran. Survivors are printed with their diff
(`mutmut show`); the ones accepted as equivalent are listed, each with why, in docs/mutation.md.

mutmut is not a dependency of torchyard or of its unit tier: it is the optional extra `mutation` (pinned, as the
bench reads its result formats). Install it into the venv first:

    .venv/bin/pip install -e '.[dev,mutation]'
    nice -n 10 .venv/bin/python bench/mutation.py [GROUP ...] [--jobs 2] [--work /tmp/torchyard-mutation]
    .venv/bin/python bench/mutation.py --list
    nice -n 10 .venv/bin/python bench/mutation.py GROUP --work W --rerun [--mutants NAME ...]

--rerun reuses W's earlier run of the group after tests were written for its survivors: it brings the copy's tests
and unmutated code up to the checkout, runs the survivors again (or the mutants named) and scores the whole run. It
refuses when a mutated file changed since (mutmut numbers its mutants anew).

mutmut 3 mutates code inside functions and methods (it switches mutants through a trampoline per function):
module-level constants, such as redact.py's regular expressions, are not mutated by it. Those are held by
tests/unit/test_mutants.py, which applies listed changes to a copy of a module's text.
"""

from __future__ import annotations

import argparse
import configparser
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mutation_undecorate import undecorate

ROOT = Path(__file__).resolve().parents[1]
MUTMUT = "3.8.1"  # the version pyproject's `mutation` extra pins
UNIT = "tests/unit"
DESELECT = (
    # mutmut's trampolines deepen every call: this case of 1000 nested requirement files then hits Python's
    # recursion limit on the clean code, and mutmut stops before its first mutant.
    "tests/unit/test_hostile.py::test_hostile_input[--requirements deep nesting]",
    # hadolint over every shape of rendered Dockerfile: 122 s of the resolve group's 184 s of tests (measured in
    # mutmut's stats, 2026-12-02, load average 2-6), and it reaches nearly every resolve function, so each mutant
    # that survives the other tests would run it too (a run of the group would take hours). What it holds is the
    # templates' Dockerfile syntax, not resolve's choices; the unit tier runs it.
    "tests/unit/test_render_matrix.py::test_every_rendered_dockerfile_passes_hadolint",
)


@dataclass(frozen=True)
class Group:
    name: str
    files: tuple[str, ...]  # globs under the repository root: what is mutated
    tests: tuple[str, ...] = ()  # test files beyond those that import a mutated module
    # its code also runs in .venv-torch's Python, started by the tests (tests/unit/sim_kit.py): bench/mutmut_bridge
    children: bool = False
    deselect: tuple[str, ...] = ()  # beyond DESELECT, for this group's runs only


# The smoke checks on real torch: the suite runs in a child Python (sim_kit), which bench/mutmut_bridge reaches.
# Every GPU check in one suite run on two simulated GPUs: 95-145 s, and it reaches every check, so each mutant the
# single-check tests let live ran it too (about one mutant a minute, 2026-12-02). Without it a score can only be
# lower. Every GPU check but gpu.extensions (which the simulation cannot run) has a single-check test that passes
# (test_gpu_sim.py; gpu.onnx in test_smoke_onnx_torch.py), with its figures where the simulation can fix them.
WHOLE_SUITE = "tests/unit/test_gpu_sim.py::test_every_gpu_check_runs_on_two_simulated_gpus"
TORCH_TESTS = (
    "test_gpu_sim.py",
    "test_smoke_onnx_torch.py",
    "test_smoke_train_compile_torch.py",
    "test_smoke_workflows_torch.py",
)
GROUPS = (
    Group("core/redact", ("builder/core/redact.py",), ("test_render_secrets.py", "test_render_safety.py")),
    Group("core/files", ("builder/core/files.py",), ("test_matrix_errors.py", "test_hostile.py")),
    Group("core/names", ("builder/core/names.py",), ("test_build_cli.py",)),
    Group("render/tags", ("builder/render/tags.py",), ("test_platforms.py", "test_publish_platforms.py")),
    Group("net", ("builder/net/*.py",)),
    Group("oci", ("builder/oci/*.py",), ("test_registry.py", "test_publish_run.py")),
    Group("image", ("builder/image/*.py",)),
    Group("host", ("builder/host/*.py",), ("test_doctor.py", "test_inspect.py")),
    Group("publish", ("builder/publish/*.py",), ("test_publish_platforms.py", "test_publish_set.py")),
    Group("resolve", ("builder/resolve/*.py", "builder/resolve/rules/*.py"), ("test_rules.py", "test_one_answer.py")),
    Group(
        "smoke/checks",
        ("builder/smoke/checks_*.py", "builder/smoke/ddp_rank.py"),  # ddp_rank: the ranks ddp's checks start
        TORCH_TESTS,
        children=True,
        deselect=(WHOLE_SUITE,),
    ),
)
BRIDGE = ROOT / "bench" / "mutmut_bridge"
TORCH_PYTHON = ROOT / ".venv-torch" / "bin" / "python"  # scripts/setup makes it


def mutated_files(group: Group) -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for pattern in group.files for p in ROOT.glob(pattern))


def test_files(group: Group) -> list[str]:
    """The unit test files that import one of the group's modules, and the group's named extras; and the plain
    checks of tests/unit/test_mutants.py (its mutant proofs read the sources, which mutmut rewrites)."""
    modules = [f[:-3].replace("/", ".") for f in mutated_files(group)]
    packages = {m.rsplit(".", 1)[0] for m in modules if m.endswith("__init__")}
    names = [re.escape(m) for m in modules if not m.endswith("__init__")] + [re.escape(p) + r"\b" for p in packages]
    # `from builder.smoke import checks_cpu` (one line, or a parenthesised list) imports the module too
    names += [
        rf"from\s+{re.escape(m.rsplit('.', 1)[0])}\s+import\s+\(?[\w\s,]*\b{re.escape(m.rsplit('.', 1)[1])}\b"
        for m in modules
        if "." in m and not m.endswith("__init__")
    ]
    wanted = re.compile("|".join(names))
    found = {f.name for f in (ROOT / UNIT).glob("test_*.py") if f.name != "test_mutants.py"}
    chosen = {name for name in found if wanted.search((ROOT / UNIT / name).read_text(encoding="utf-8"))}
    chosen |= {name for name in group.tests if name in found}
    return [f"{UNIT}/{name}" for name in sorted(chosen)] + [f"{UNIT}/test_mutants.py::test_the_code_as_it_is_passes"]


def listed() -> list[str]:
    """What git tracks or would track (no ignored file): what a copy of the checkout holds."""
    names = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [n for n in names if (ROOT / n).is_file() and not (ROOT / n).is_symlink()]


def prepare(group: Group, work: Path) -> Path:
    """A copy of the checkout with the group's [mutmut] configuration."""
    folder = work / group.name.replace("/", "-")
    shutil.rmtree(folder, ignore_errors=True)
    for name in listed():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, folder / name)
    for name in mutated_files(group):  # mutmut skips decorated functions: plain defs + assignments in the copy
        path = folder / name
        path.write_text(undecorate(path.read_text(encoding="utf-8")), encoding="utf-8")
    configure(group, folder)
    return folder


def configure(group: Group, folder: Path) -> None:
    """setup.cfg's [mutmut] section: what is mutated, which tests run, and the plugins."""
    # tests read them (test_docs_truth checks that every file the docs name exists: .ci/run, bench/*.py;
    # test_render_matrix lints with .hadolint.yaml, and hadolint given a missing config prints no JSON)
    copied = (
        "matrix.toml",
        "templates",
        "examples",
        "README.md",
        "docs",
        "scripts",
        ".github",
        ".ci",
        "bench",
        ".hadolint.yaml",
    )
    lines = ["[mutmut]", "source_paths = builder", "also_copy =", *(f"    {c}" for c in copied)]
    lines += ["only_mutate =", *(f"    {f}" for f in mutated_files(group))]
    lines += [
        "pytest_add_cli_args =",
        "    -p",
        "    no:cacheprovider",
        "    -q",
        *(f"    --deselect={d}" for d in (*DESELECT, *group.deselect)),
        "    -p",
        "    mutmut_fast_first",
    ]
    shutil.copy2(BRIDGE / "fast_first.py", folder / UNIT / "mutmut_fast_first.py")
    if group.children:
        bridge(folder)
        lines += ["    -p", "    mutmut_bridge_plugin"]
    lines += ["pytest_add_cli_args_test_selection =", *(f"    {t}" for t in test_files(group))]
    lines += ["use_git_change_detection = false", ""]
    (folder / "setup.cfg").write_text("\n".join(lines), encoding="utf-8")


def refresh(group: Group, folder: Path) -> str | None:
    """For --rerun: an earlier run's folder brought up to the checkout (its tests, the code it does not mutate, the
    test selection), keeping the mutants and what mutmut recorded. None, or why the folder cannot be reused: a
    mutated file that changed since has its mutants numbered anew, so the earlier results name other changes."""
    if not (folder / "mutants").is_dir():
        return f"{folder} holds no earlier run of {group.name} (run it once without --rerun)"
    mutated = set(mutated_files(group))
    for name in sorted(mutated):
        earlier = folder / name
        now = undecorate((ROOT / name).read_text(encoding="utf-8"))
        if not earlier.is_file() or earlier.read_text(encoding="utf-8") != now:
            return f"{name} changed since the run in {folder}: its mutants are numbered anew; run without --rerun"
    for name in listed():
        if name in mutated:
            continue
        copies = [folder]
        if (folder / "mutants" / name.split("/")[0]).exists():  # mutmut's copy holds what it was told to copy
            copies.append(folder / "mutants")
        for base in copies:
            (base / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, base / name)
    configure(group, folder)
    return None


def mutmut_results(folder: Path) -> str:
    """`mutmut results --all true` in the folder: a line per mutant, `NAME: STATUS`."""
    argv = [sys.executable, "-m", "mutmut", "results", "--all", "true"]
    return subprocess.run(argv, cwd=folder, capture_output=True, text=True, check=False).stdout


def named(listing: str, *statuses: str) -> list[str]:
    """The names of the mutants of `mutmut_results` whose status is one of these."""
    wanted = tuple(f": {status}" for status in statuses)
    return [line.split(":")[0].strip() for line in listing.splitlines() if line.rstrip().endswith(wanted)]


def alive(folder: Path) -> list[str]:
    """The mutants an earlier run let live or reached with no test: what a rerun is for."""
    return named(mutmut_results(folder), "survived", "no tests", "suspicious")


FULL_NAME = """

def _full(module: str) -> str:
    return "builder." + module if module.split(".")[0] == "smoke" else module
"""


def bridge(folder: Path) -> None:
    """The child Python's `mutmut` (tests/gpu_sim is on its path, not on the test process's) and the plugin that
    hands its hits to mutmut (bench/mutmut_bridge/plugin.py). The child's trampoline is mutmut's own, with one
    change: the suite run as a folder imports its checks as `smoke.checks_x`, which mutmut names
    `builder.smoke.checks_x` (the hits' names, and which mutant is active)."""
    found = importlib.util.find_spec("mutmut")  # an optional extra: not imported, so mypy needs no stubs without it
    if found is None or found.origin is None:
        raise SystemExit(f"mutmut is not installed in {sys.prefix}")
    real = Path(found.origin).parent
    child = folder / "tests" / "gpu_sim" / "mutmut"
    for name in ("__init__.py", "mutation/__init__.py", "utils/__init__.py"):
        (child / name).parent.mkdir(parents=True, exist_ok=True)
        (child / name).write_text("", encoding="utf-8")
    for name in ("core.py", "utils/format_utils.py", "mutation/trampoline_templates.py"):
        shutil.copy2(real / name, child / name)
    shutil.copy2(BRIDGE / "stats.py", child / "stats.py")
    trampoline = (real / "mutation" / "trampoline.py").read_text(encoding="utf-8")
    changes = (
        ('f"{orig_func.__module__}.', 'f"{_full(orig_func.__module__)}.'),
        ("if module != decorated_func.__module__:", "if module != _full(decorated_func.__module__):"),
    )
    for old, new in changes:
        if trampoline.count(old) != 1:
            raise SystemExit(f"mutmut {MUTMUT}'s trampoline.py changed: {old!r} not found once (bench/mutation.py)")
        trampoline = trampoline.replace(old, new)
    trampoline += FULL_NAME
    (child / "mutation" / "trampoline.py").write_text(trampoline, encoding="utf-8")
    shutil.copy2(BRIDGE / "plugin.py", folder / UNIT / "mutmut_bridge_plugin.py")


_MUTANT = re.compile(r"^\s*(?P<module>[\w.]+?)\.x[_\u01c1](?P<rest>\S*): (?P<status>.+)$")


def tally(listing: str) -> dict[str, dict[str, int]]:
    """`mutmut results --all true` as module -> status -> count ("not checked": outside --mutants)."""
    counts: dict[str, dict[str, int]] = {}
    for line in listing.splitlines():
        found = _MUTANT.match(line)
        if found:
            statuses = counts.setdefault(found["module"], {})
            statuses[found["status"]] = statuses.get(found["status"], 0) + 1
    return counts


def score(statuses: dict[str, int]) -> dict[str, object]:
    """Caught (killed or timed out) among the mutants that ran; mutants no selected test reaches apart."""
    caught = statuses.get("killed", 0) + statuses.get("timeout", 0)
    ran = caught + sum(statuses.get(s, 0) for s in ("survived", "suspicious", "segfault"))
    return {
        "mutants": sum(n for s, n in statuses.items() if s != "not checked"),
        "caught": caught,
        "survived": statuses.get("survived", 0),
        "no_tests": statuses.get("no tests", 0),
        "score": round(100.0 * caught / ran, 1) if ran else None,
    }


ORDER_CHECK = "torchyard_order_check.x__mutmut_0"  # names no function: every trampoline runs the original


def order_check(folder: Path, env: dict[str, str]) -> str | None:
    """The selected tests on the code as it is, in the order fast_first gives them under a mutant. A test that
    fails only in that order would be counted as catching every mutant it runs for. None: all passed."""
    config = configparser.ConfigParser()
    config.read(folder / "setup.cfg", encoding="utf-8")
    args = [
        line.strip()
        for key in ("pytest_add_cli_args", "pytest_add_cli_args_test_selection")
        for line in config["mutmut"][key].splitlines()
        if line.strip()
    ]
    argv = [sys.executable, "-m", "pytest", "-x", *args]
    env = {**env, "MUTANT_UNDER_TEST": ORDER_CHECK}
    done = subprocess.run(argv, cwd=folder / "mutants", env=env, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return None
    return " | ".join((done.stdout + done.stderr).strip().splitlines()[-5:])


def run(group: Group, work: Path, jobs: int, mutants: list[str], check_order: bool, rerun: bool) -> dict[str, object]:
    if rerun:
        folder = work / group.name.replace("/", "-")
        why = refresh(group, folder)
        if why is not None:
            return {"group": group.name, "error": why}
        mutants = mutants or alive(folder)
        if not mutants:
            return {"group": group.name, "error": f"nothing to rerun in {folder}: every mutant was caught"}
    else:
        folder = prepare(group, work)
    mutmut = [sys.executable, "-m", "mutmut"]
    start = time.monotonic()
    argv = [*mutmut, "run", "--max-children", str(jobs), *mutants]
    env = dict(os.environ)
    if group.children:  # sim_kit's default is .venv-torch beside the tests: not in mutmut's copy
        env["TORCHYARD_SIM_PYTHON"] = str(TORCH_PYTHON)
    ran = subprocess.run(argv, cwd=folder, capture_output=True, text=True, check=False, env=env)
    seconds = time.monotonic() - start
    (folder / "run.log").write_text(ran.stdout + ran.stderr, encoding="utf-8")
    if ran.returncode != 0:
        tail = (ran.stdout + ran.stderr).strip().splitlines()[-5:]
        return {"group": group.name, "error": f"mutmut run exit {ran.returncode}: " + " | ".join(tail)}
    ordered = order_check(folder, env) if check_order else "not checked (--no-order-check)"
    listing = mutmut_results(folder)
    by_module = tally(listing)
    survivors = named(listing, "survived")
    diffs = [
        subprocess.run([*mutmut, "show", s], cwd=folder, capture_output=True, text=True, check=False).stdout
        for s in survivors
    ]
    (folder / "survivors.diff").write_text("\n".join(diffs), encoding="utf-8")
    together: dict[str, int] = {}
    for statuses in by_module.values():
        for status, count in statuses.items():
            together[status] = together.get(status, 0) + count
    return {
        "group": group.name,
        **score(together),
        "modules": {module: score(statuses) for module, statuses in sorted(by_module.items())},
        "only": mutants,
        "seconds": round(seconds),
        "tests": len(test_files(group)),
        "survivors": survivors,
        "diffs": str(folder / "survivors.diff"),
        "order_check": ordered or "passed",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("groups", nargs="*", help="group names (default: all); see --list")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/torchyard-mutation"))
    parser.add_argument("--list", action="store_true", help="the groups, their files and test files")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--mutants", nargs="+", default=[], metavar="GLOB", help="only these mutants, by mutmut's names ('builder.x.*')"
    )
    parser.add_argument(
        "--rerun",
        action="store_true",
        help="in --work's earlier run of the group: its survivors (or --mutants) again, with the checkout's tests now",
    )
    parser.add_argument(
        "--no-order-check",
        action="store_true",
        help="skip running the selected tests once more in fast_first's order on the code as it is",
    )
    args = parser.parse_args()
    chosen = [g for g in GROUPS if not args.groups or g.name in args.groups]
    unknown = set(args.groups) - {g.name for g in GROUPS}
    if unknown:
        print(f"unknown group(s): {', '.join(sorted(unknown))}; known: {', '.join(g.name for g in GROUPS)}")
        return 2
    if args.list:
        for g in chosen:
            print(f"{g.name}: {' '.join(mutated_files(g))}\n    tests: {' '.join(test_files(g))}")
        return 0
    try:
        found = importlib.metadata.version("mutmut")
    except importlib.metadata.PackageNotFoundError:
        print(f"mutmut is not installed in {sys.prefix}: run  {sys.prefix}/bin/pip install -e '.[dev,mutation]'")
        return 2
    if found != MUTMUT:
        print(f"warning: mutmut {found}, not {MUTMUT} (pyproject's `mutation` extra): scores may not compare")
    os.environ.setdefault("PYTHONHASHSEED", "0")
    results = []
    for group in chosen:
        result = run(group, args.work, args.jobs, args.mutants, not args.no_order_check, args.rerun)
        results.append(result)
        if "error" in result:
            print(f"{group.name}: {result['error']}", flush=True)
            continue
        print(
            f"{group.name}: {result['score']}% caught ({result['caught']} of {result['mutants']} mutants; "
            f"{result['survived']} survived, {result['no_tests']} without a test) in {result['seconds']} s"
            + (f", only {' '.join(args.mutants)}" if args.mutants else ""),
            flush=True,
        )
        modules: dict[str, dict[str, object]] = result["modules"]  # type: ignore[assignment]
        for module, part in modules.items() if len(modules) > 1 else ():
            print(f"    {module}: {part['score']}% ({part['caught']} of {part['mutants']}; {part['survived']} alive)")
        for name in result["survivors"]:  # type: ignore[attr-defined]
            print(f"    survived: {name}")
        if result["order_check"] != "passed":  # a kill may be the order's, not the mutant's
            print(f"    the tests in fast_first's order on the code as it is: {result['order_check']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
