"""The checks that need no GPU, run in-process against fake torch modules (tests/unit/fake_torch.py).

model.train itself needs real torch: these tests replace it (FakeTrainer) and check what train.cpu
makes of its result; the real training run is left to the integration tier (docs/smoke.md).
"""

from __future__ import annotations

import ctypes
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fake_torch import Extension, FakeImage, FakeTrainer, Installer
from fatbin_kit import ELF, Entry, container, entry, ptx, raw_container, sass, shared_library
from smoke_kit import context, outcome, run

from builder.smoke import checks_cpu
from builder.smoke.compat import cpu_threads
from builder.smoke.expect import load
from builder.smoke.framework import FAIL, PASS, SKIP, Context


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Installer:
    return Installer(monkeypatch)


# --- versions --------------------------------------------------------------------------------------


def test_every_version_matches_the_manifest(install: Installer, tmp_path: Path) -> None:
    install(FakeImage())
    ctx = context(tmp_path)
    found = {name: outcome(f"version.{name}", ctx) for name in ("torch", "torchvision", "torchaudio", "cuda")}
    found |= {name: outcome(f"version.{name}", ctx) for name in ("cudnn", "nccl", "python", "os")}
    assert found == {
        "torch": (PASS, "2.14.1+cu130"),
        "torchvision": (PASS, "0.29.1"),  # the wheels' local tags (+cu130, +cu132) are not compared
        "torchaudio": (PASS, "2.11.1"),
        "cuda": (PASS, "13.0"),
        "cudnn": (PASS, "92400"),
        "nccl": (PASS, "2.30.7"),
        "python": (PASS, f"{sys.version_info[0]}.{sys.version_info[1]}"),
        "os": (PASS, checks_cpu.os_name()),
    }
    assert ctx.observed["cudnn"] == 92400


@pytest.mark.parametrize(
    ("check", "image", "changes", "message"),
    [
        ("version.cudnn", {}, {"cudnn": "9.1.0.70"}, "cudnn: the image has 92400, expected 90100"),
        ("version.cudnn", {"cudnn": 8907}, {}, "cudnn: the image has 8907, expected 92400"),
        ("version.torch", {"torch": "2.14.1+cu128"}, {}, "torch: the image has 2.14.1+cu128, expected 2.14.1+cu130"),
        ("version.torch", {"torch": "2.14.1"}, {}, "torch: the image has 2.14.1, expected 2.14.1+cu130"),
        ("version.torchvision", {"torchvision": "0.28.0+cu130"}, {}, "torchvision: the image has 0.28.0, expected"),
        ("version.torchaudio", {}, {"torchaudio": "2.10.0"}, "torchaudio: the image has 2.11.1, expected 2.10.0"),
        ("version.cuda", {"cuda": "12.8"}, {}, "cuda: the image has 12.8, expected 13.0"),
        ("version.nccl", {"nccl": (2, 28, 3)}, {}, "nccl: the image has 2.28.3, expected 2.30.7"),
        ("version.python", {}, {"python": "3.9"}, "python: the image has "),
        ("version.os", {}, {"os": "ubuntu22.04"}, "os: the image has "),
    ],
)
def test_a_wrong_expectation_fails_naming_the_mismatch(
    install: Installer, tmp_path: Path, check: str, image: dict[str, Any], changes: dict[str, Any], message: str
) -> None:
    install(FakeImage().with_(**image))
    status, text = outcome(check, context(tmp_path, **changes))
    assert status == FAIL
    assert text.startswith(message)


def test_a_four_part_nccl_expectation_compares_three_parts(install: Installer, tmp_path: Path) -> None:
    install(FakeImage())
    assert outcome("version.nccl", context(tmp_path, nccl="2.30.7.1")) == (PASS, "2.30.7")


def test_a_cpu_build_matches_a_manifest_without_cuda(install: Installer, tmp_path: Path) -> None:
    install(FakeImage(torch="2.14.1+cpu", cuda=None, cudnn=None, arch_list=()))
    ctx = context(tmp_path, torch="2.14.1+cpu", cuda=None, cudnn=None, nccl=None)
    assert [outcome(f"version.{k}", ctx)[0] for k in ("torch", "cuda", "cudnn", "nccl")] == [PASS] * 4


def test_without_expectations_versions_are_skipped_never_passed(install: Installer) -> None:
    install(FakeImage())
    ctx = Context(expect=load(None, {}), arch=None, require_gpu=False)
    assert outcome("version.torch", ctx) == (SKIP, "found 2.14.1+cu130; no expectation (give --expect or flags)")
    assert outcome("version.cudnn", ctx)[0] == SKIP
    assert ctx.observed["torch"] == "2.14.1+cu130"


def test_with_some_flags_and_no_manifest_the_rest_is_skipped(install: Installer) -> None:
    # `torchyard smoke someone/else:image --expect-value torch=...`: only torch has an expectation.
    install(FakeImage())
    ctx = Context(expect=load(None, {"torch": "2.14.1+cu130"}), arch=None, require_gpu=False)
    assert outcome("version.torch", ctx) == (PASS, "2.14.1+cu130")
    assert outcome("version.torchvision", ctx) == (SKIP, "found 0.29.1; no expectation (give --expect or flags)")
    assert outcome("version.cudnn", ctx)[0] == SKIP


# --- compiled architectures ------------------------------------------------------------------------


def test_arch_torch_names_its_verdict(install: Installer, tmp_path: Path) -> None:
    install(FakeImage())
    ctx = context(tmp_path, arch_list=["sm_89", "sm_90"])
    assert outcome("arch.torch", ctx) == (PASS, "sm_89: compatible (sm_86); sm_90: native")
    assert ctx.observed["arch_verdicts"] == {"torch": ["sm_89: compatible (sm_86)", "sm_90: native"]}
    assert ctx.observed["torch_arch_list"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert ctx.observed["torch_arch_source"] == "torch.cuda.get_arch_list()"


def test_arch_flag_overrides_what_the_image_was_built_for(install: Installer, tmp_path: Path) -> None:
    install(FakeImage(arch_list=("sm_80", "sm_90", "compute_90")))
    assert outcome("arch.torch", context(tmp_path, arch="sm_120")) == (PASS, "sm_120: ptx (compute_90)")


def test_arch_torch_fails_when_no_code_runs_on_the_target(install: Installer, tmp_path: Path) -> None:
    install(FakeImage(arch_list=("sm_80", "sm_90")))
    assert outcome("arch.torch", context(tmp_path, arch="sm_100")) == (
        FAIL,
        "torch has no code for sm_100 (SASS: sm_80 sm_90; PTX: none)",
    )


def test_arch_torch_without_a_target_or_on_a_cpu_build_is_skipped(install: Installer, tmp_path: Path) -> None:
    install(FakeImage())
    assert outcome("arch.torch", context(tmp_path, arch_list=[])) == (
        SKIP,
        "no target architecture (give --arch); torch has sm_75 sm_80 sm_86 sm_90 sm_100 sm_120",
    )
    install(FakeImage(cuda=None))
    assert outcome("arch.torch", context(tmp_path)) == (SKIP, "CPU build of torch: no GPU code")


def test_arch_torchvision_reads_its_fat_binary(install: Installer, tmp_path: Path) -> None:
    (tmp_path / "_C.so").write_bytes(shared_library(container(*sass(80, 90), *ptx(90))))
    install(FakeImage(torchvision_dir=str(tmp_path)))
    assert outcome("arch.torchvision", context(tmp_path, arch_list=["sm_89"])) == (PASS, "sm_89: compatible (sm_80)")
    assert outcome("arch.torchvision", context(tmp_path, arch="sm_120")) == (PASS, "sm_120: ptx (compute_90)")
    assert outcome("arch.torchvision", context(tmp_path, arch="sm_75")) == (
        FAIL,
        "torchvision has no code for sm_75 (SASS: sm_80 sm_90; PTX: compute_90)",
    )


@pytest.mark.parametrize(
    ("library", "message"),
    [(None, "torchvision ships no compiled _C library"), (b"", "torchvision's _C library carries no GPU code")],
)
def test_arch_torchvision_without_gpu_code_is_skipped(
    install: Installer, tmp_path: Path, library: bytes | None, message: str
) -> None:
    if library is not None:
        (tmp_path / "_C.so").write_bytes(shared_library(library))
    install(FakeImage(torchvision_dir=str(tmp_path)))
    assert outcome("arch.torchvision", context(tmp_path)) == (SKIP, message)


def test_arch_torchvision_on_a_cpu_build_is_skipped(install: Installer, tmp_path: Path) -> None:
    (tmp_path / "_C.so").write_bytes(shared_library(container(*sass(89))))
    install(FakeImage(cuda=None, torchvision_dir=str(tmp_path)))
    assert outcome("arch.torchvision", context(tmp_path)) == (SKIP, "CPU build: no GPU code")


def extension_image(tmp_path: Path, *archs: int) -> FakeImage:
    where = tmp_path / "addone"
    where.mkdir(exist_ok=True)
    if archs:
        (where / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(shared_library(container(*sass(*archs))))
    return FakeImage(extensions=(Extension(name="addone", directory=str(where)),))


def test_arch_extensions_need_native_code(install: Installer, tmp_path: Path) -> None:
    install(extension_image(tmp_path, 89))
    ctx = context(tmp_path, extensions=["addone"])
    assert outcome("arch.extensions", ctx) == (PASS, "addone: sm_89: native")
    install(extension_image(tmp_path, 86))  # would run on sm_89, but was not built for it
    assert outcome("arch.extensions", ctx) == (
        FAIL,
        "addone has no native code for sm_89 (SASS: sm_86; PTX: none)",
    )


def two_extensions(tmp_path: Path) -> FakeImage:
    """addone (sm_89) and add_two (sm_89 and sm_90), the second declared as the distribution name add-two."""
    one = extension_image(tmp_path, 89).extensions[0]
    where = tmp_path / "add_two"
    where.mkdir(exist_ok=True)
    (where / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(shared_library(container(*sass(89, 90))))
    return FakeImage(extensions=(one, Extension(name="add_two", directory=str(where))))


def test_arch_and_import_of_two_extensions_one_named_with_a_hyphen(install: Installer, tmp_path: Path) -> None:
    install(two_extensions(tmp_path))
    ctx = context(tmp_path, extensions=["addone", "add-two"])
    assert outcome("arch.extensions", ctx) == (PASS, "addone: sm_89: native; add_two: sm_89: native")
    assert ctx.observed["arch_verdicts"] == {"addone": ["sm_89: native"], "add_two": ["sm_89: native"]}
    assert outcome("import.extensions", ctx) == (PASS, "imported addone, add-two")


def test_arch_extensions_without_a_library_fail(install: Installer, tmp_path: Path) -> None:
    install(extension_image(tmp_path))
    assert outcome("arch.extensions", context(tmp_path, extensions=["addone"])) == (
        FAIL,
        "extension addone has no compiled library",
    )


def test_extension_checks_are_skipped_when_the_image_declares_none(install: Installer, tmp_path: Path) -> None:
    install(FakeImage())
    ctx = context(tmp_path)
    assert outcome("arch.extensions", ctx) == (SKIP, "the image declares no extensions")
    assert outcome("import.extensions", ctx) == (SKIP, "the image declares no extensions")


# --- libraries and imports -------------------------------------------------------------------------


def test_libs_cuda_fails_when_torch_did_not_load_a_library(install: Installer, tmp_path: Path) -> None:
    install(FakeImage())  # the fake loads nothing, so /proc/self/maps has no libcudnn
    assert outcome("libs.cuda", context(tmp_path)) == (FAIL, "libcudnn.so is not loaded by torch")


def test_libs_cuda_reports_what_loaded(install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []

    class Library:
        def __init__(self, path: str) -> None:
            opened.append(path)
            self.cudnnGetVersion = lambda: 92400
            self.cublasGetCudartVersion = lambda: 13000

    monkeypatch.setattr(checks_cpu, "_loaded", lambda fragment: f"/venv/lib/{fragment}.9")
    monkeypatch.setattr(ctypes, "CDLL", Library)
    install(FakeImage())
    ctx = context(tmp_path)
    assert outcome("libs.cuda", ctx) == (PASS, "libcudnn.so.9=92400, libcublas.so.9=13000, libnccl.so.9")
    assert ctx.observed["libraries"] == {
        "cudnn": "libcudnn.so.9=92400",
        "cublas": "libcublas.so.9=13000",
        "nccl": "libnccl.so.9",
    }
    assert opened == [f"/venv/lib/{name}.so.9" for name in ("libcudnn", "libcublas", "libnccl")]


def test_libs_cuda_on_a_cpu_build_is_skipped(install: Installer, tmp_path: Path) -> None:
    install(FakeImage(cuda=None))
    assert outcome("libs.cuda", context(tmp_path)) == (SKIP, "CPU build: no CUDA libraries")


def test_loaded_finds_a_library_of_this_process() -> None:
    assert checks_cpu._loaded("libc.so") is not None
    assert checks_cpu._loaded("libcudnn.so") is None


def test_companion_imports_compute_something(install: Installer, tmp_path: Path) -> None:
    install(FakeImage())
    ctx = context(tmp_path)
    assert outcome("import.torchvision", ctx) == (PASS, "torchvision 0.29.1+cu130: nms ok")
    assert outcome("import.torchaudio", ctx) == (PASS, "torchaudio 2.11.1+cu132: amplitude_to_DB ok")
    install(FakeImage(nms_keep=(0, 1, 2), amplitude_db=(0.0, 1.0, 2.0)))
    assert outcome("import.torchvision", ctx) == (FAIL, "torchvision.ops.nms returned [0, 1, 2], expected [0, 2]")
    assert outcome("import.torchaudio", ctx) == (
        FAIL,
        "torchaudio amplitude_to_DB gave [0.0, 1.0, 2.0], expected [0, 10, 20]",
    )


def test_import_extensions(install: Installer, tmp_path: Path) -> None:
    install(extension_image(tmp_path, 89))
    assert outcome("import.extensions", context(tmp_path, extensions=["addone"])) == (PASS, "imported addone")
    status, message = outcome("import.extensions", context(tmp_path, extensions=["addone", "no-such-ext"]))
    assert (status, message) == (FAIL, "ModuleNotFoundError: No module named 'no_such_ext'")


# --- devel.nvcc: a fake nvcc program on PATH, so no compiler runs ------------------------------------


# A real program on PATH, started by the check as it starts nvcc: what it is asked (argv, the kernel's source) is
# recorded, and it answers as CUDA 13.0's nvcc does (--version's five lines; a fat binary for -fatbin).
NVCC = """#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, {kit!r})
from fatbin_kit import container, sass
with open(os.path.join(here, "nvcc.json")) as handle:
    conf = json.load(handle)
source = open(sys.argv[-1]).read() if sys.argv[-1].endswith(".cu") and os.path.exists(sys.argv[-1]) else None
with open(os.path.join(here, "calls.jsonl"), "a") as handle:
    handle.write(json.dumps({{"argv": sys.argv, "source": source}}) + "\\n")
release = conf["release"]
if sys.argv[1] == "--version":
    if conf["version_fails"]:
        sys.stderr.write("nvcc fatal   : Could not open output file\\n")
        sys.exit(1)
    print("nvcc: NVIDIA (R) Cuda compiler driver\\nCopyright (c) 2005-2025 NVIDIA Corporation")
    print(f"Built on Wed_Aug_20_01:58:59_PM_PDT_2025\\nCuda compilation tools, release {{release}}, V{{release}}.88")
    print(f"Build cuda_{{release}}.r{{release}}/compiler.36424714_0")
    sys.exit(0)
if conf["compile_fails"] == "silently":
    sys.exit(1)
if conf["compile_fails"]:
    print("k.cu")  # stdout has a line too: the error is on stderr
    sys.stderr.write("nvcc warning : a warning first\\n" + conf["compile_fails"] + "\\n")
    sys.exit(2)
arch = int(sys.argv[2].rpartition("=sm_")[2].rstrip("af"))
code = bytes.fromhex(conf["code"]) if conf["code"] else container(*sass(conf["writes"] or arch))
with open(sys.argv[sys.argv.index("-o") + 1], "wb") as handle:
    handle.write(code)
"""
BUILT = "Build cuda_13.0.r13.0/compiler.36424714_0"


class FakeNvcc:
    def __init__(
        self,
        release: str = "13.0",
        writes: int | None = None,
        code: bytes | None = None,
        compile_fails: str = "",
        version_fails: bool = False,
    ) -> None:
        self.conf = {
            "release": release,
            "writes": writes,
            "code": code.hex() if code else None,  # the fatbin written, as it is
            "compile_fails": compile_fails,  # the error line it prints, exiting 2 ("silently": none, exiting 1)
            "version_fails": version_fails,
        }
        self.folder: Path | None = None

    def install(self, folder: Path) -> str:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "nvcc.json").write_text(json.dumps(self.conf))
        program = folder / "nvcc"
        program.write_text(NVCC.format(python=sys.executable, kit=str(Path(__file__).parent)))
        program.chmod(0o755)
        return str(program)

    @property
    def calls(self) -> list[dict[str, Any]]:
        assert self.folder is not None
        log = self.folder / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    @property
    def argv(self) -> list[list[str]]:
        return [call["argv"] for call in self.calls]


def nvcc_ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nvcc: FakeNvcc | None, **changes: Any) -> Context:
    """nvcc (or none) alone on PATH; a Context expecting manifest(**changes)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    if nvcc is not None:
        nvcc.install(folder)
    monkeypatch.setenv("PATH", str(folder))
    return context(tmp_path, **changes)


def test_nvcc_compiles_for_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvcc = FakeNvcc()
    ctx = nvcc_ctx(tmp_path, monkeypatch, nvcc, flavor="devel")
    assert outcome("devel.nvcc", ctx) == (PASS, f"{BUILT}; compiled a kernel for sm_89")
    program = str(tmp_path / "bin" / "nvcc")
    assert nvcc.argv[0] == [program, "--version"]
    compiled = nvcc.calls[1]
    assert compiled["argv"][:4] == [program, "-fatbin", "-gencode=arch=compute_89,code=sm_89", "-o"]
    assert compiled["argv"][4].endswith("/k.fatbin") and compiled["argv"][5].endswith("/k.cu")
    assert Path(compiled["argv"][4]).parent == Path(compiled["argv"][5]).parent != Path.cwd()  # a private folder
    assert compiled["source"] == checks_cpu._KERNEL
    assert not Path(compiled["argv"][4]).parent.exists()  # and it is removed


def test_nvcc_of_another_cuda_or_without_the_arch_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = nvcc_ctx(tmp_path, monkeypatch, FakeNvcc(release="12.8"), flavor="devel")
    assert outcome("devel.nvcc", ctx) == (FAIL, "nvcc is not CUDA 13.0: Build cuda_12.8.r12.8/compiler.36424714_0")
    ctx = nvcc_ctx(tmp_path, monkeypatch, FakeNvcc(writes=86), flavor="devel", arch_list=["sm_90"])
    assert outcome("devel.nvcc", ctx) == (FAIL, "nvcc compiled for sm_90 but the fatbin holds ['sm_86']")


def test_nvcc_that_fails_is_a_failure_with_its_last_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    error = 'k.cu(1): error: identifier "threadIdx" is undefined'
    ctx = nvcc_ctx(tmp_path, monkeypatch, FakeNvcc(compile_fails=error), flavor="devel")
    assert outcome("devel.nvcc", ctx) == (FAIL, f"nvcc failed to compile a kernel for sm_89 (exit code 2): {error}")
    ctx = nvcc_ctx(tmp_path, monkeypatch, FakeNvcc(compile_fails="silently"), flavor="devel")
    assert outcome("devel.nvcc", ctx) == (
        FAIL,
        "nvcc failed to compile a kernel for sm_89 (exit code 1): it printed nothing",
    )
    ctx = nvcc_ctx(tmp_path, monkeypatch, FakeNvcc(version_fails=True), flavor="devel")
    assert outcome("devel.nvcc", ctx) == (
        FAIL,
        "nvcc failed to say its version (exit code 1): nvcc fatal   : Could not open output file",
    )


@pytest.mark.parametrize("target", ["sm89", "89; rm -rf /", "sm_"])
def test_nvcc_refuses_a_target_that_is_no_architecture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    nvcc = FakeNvcc()
    ctx = nvcc_ctx(tmp_path, monkeypatch, nvcc, flavor="devel")
    ctx.arch = target
    assert outcome("devel.nvcc", ctx) == (FAIL, f"{target!r} is not an architecture name like sm_89")
    assert nvcc.argv == [[str(tmp_path / "bin" / "nvcc"), "--version"]]  # it never reached the compiler


def test_nvcc_compiles_for_a_ptx_target_s_architecture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvcc = FakeNvcc()
    ctx = nvcc_ctx(tmp_path, monkeypatch, nvcc, flavor="devel")
    ctx.arch = "compute_89"
    assert outcome("devel.nvcc", ctx) == (PASS, f"{BUILT}; compiled a kernel for sm_89")
    assert nvcc.argv[1][2] == "-gencode=arch=compute_89,code=sm_89"


ARCH_SPECIFIC = 0x100000  # the entry flag of sm_90a-style code (builder/smoke/fatbin.py)
SM_90A = raw_container(entry(Entry(ELF, 90), flags=ARCH_SPECIFIC))


@pytest.mark.parametrize(
    ("arch_list", "gencode", "code", "compiled"),
    [
        (["sm_90a"], "arch=compute_90,code=sm_90a", SM_90A, "sm_90a"),
        (["sm_100f"], "arch=compute_100,code=sm_100f", container(*sass(100)), "sm_100f"),
        ([], "arch=compute_75,code=sm_75", container(*sass(75)), "sm_75"),  # no target: the oldest CUDA 13 runs
        (["sm_120", "sm_89"], "arch=compute_120,code=sm_120", container(*sass(120)), "sm_120"),  # the first target
    ],
)
def test_nvcc_compiles_arch_specific_family_and_default_targets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arch_list: list[str], gencode: str, code: bytes, compiled: str
) -> None:
    nvcc = FakeNvcc(code=code)
    ctx = nvcc_ctx(tmp_path, monkeypatch, nvcc, flavor="devel", arch_list=arch_list)
    assert outcome("devel.nvcc", ctx) == (PASS, f"{BUILT}; compiled a kernel for {compiled}")
    assert nvcc.argv[1][1:3] == ["-fatbin", f"-gencode={gencode}"]
    assert ctx.observed["nvcc"] == BUILT


def test_nvcc_for_sm_90a_needs_the_arch_specific_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = nvcc_ctx(tmp_path, monkeypatch, FakeNvcc(code=container(*sass(90))), flavor="devel", arch_list=["sm_90a"])
    assert outcome("devel.nvcc", ctx) == (FAIL, "nvcc compiled for sm_90a but the fatbin holds ['sm_90']")


def test_nvcc_without_a_declared_cuda_is_not_held_to_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = nvcc_ctx(tmp_path, monkeypatch, FakeNvcc(release="12.8"), flavor="devel", cuda=None)
    assert outcome("devel.nvcc", ctx) == (
        PASS,
        "Build cuda_12.8.r12.8/compiler.36424714_0; compiled a kernel for sm_89",
    )


def test_nvcc_on_a_runtime_image_that_has_one_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = nvcc_ctx(tmp_path, monkeypatch, FakeNvcc(), flavor="runtime")
    assert outcome("devel.nvcc", ctx) == (PASS, f"{BUILT}; compiled a kernel for sm_89")


def test_nvcc_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert outcome("devel.nvcc", nvcc_ctx(tmp_path, monkeypatch, None, flavor="runtime")) == (
        SKIP,
        "not a devel image (no nvcc)",
    )
    assert outcome("devel.nvcc", nvcc_ctx(tmp_path, monkeypatch, None, flavor="devel")) == (
        FAIL,
        "devel image without nvcc on PATH",
    )


# --- train.cpu: model.train replaced -----------------------------------------------------------------


def test_train_cpu_passes_when_the_loss_halves(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer = FakeTrainer(first_loss=2.5, last_loss=1.0)
    monkeypatch.setitem(sys.modules, "builder.smoke.model", trainer.module())
    modules = install(FakeImage())
    ctx = context(tmp_path)
    status, message = outcome("train.cpu", ctx)
    assert (status, message.split(" (")[0]) == (PASS, "loss 2.500 -> 1.000 in 16 steps of 8")
    # 2 warm-up steps, then 14 timed: 16 steps in all whose losses count (issue 21: sized to prove the property)
    assert trainer.calls == [
        {"device": "cpu", "steps": 14, "batch": 8, "precision": "fp32", "warmup": 2, "size": 16, "width": 16}
    ]
    threads = cpu_threads()[0]
    assert modules["torch"].num_threads_set == [threads, 4]  # and the count it had is put back
    assert ctx.observed["train_cpu"]["last_loss"] == 1.0
    assert (ctx.observed["train_cpu"]["threads"], ctx.observed["train_cpu"]["batch"]) == (threads, 8)


def test_train_cpu_is_the_same_size_with_small(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --small (an emulated CPU) ran 8 images of 16x16 in 16 steps; that is now every run's size, and the loss must
    # still halve.
    trainer = FakeTrainer(first_loss=2.5, last_loss=1.0)
    monkeypatch.setitem(sys.modules, "builder.smoke.model", trainer.module())
    install(FakeImage())
    ctx = replace(context(tmp_path), small=True)
    status, message = outcome("train.cpu", ctx)
    assert (status, message.split(" (")[0]) == (PASS, "loss 2.500 -> 1.000 in 16 steps of 8")
    assert trainer.calls == [
        {"device": "cpu", "steps": 14, "batch": 8, "precision": "fp32", "warmup": 2, "size": 16, "width": 16}
    ]
    monkeypatch.setitem(sys.modules, "builder.smoke.model", FakeTrainer(first_loss=2.5, last_loss=1.5).module())
    assert outcome("train.cpu", ctx)[0] == FAIL


@pytest.mark.parametrize("last", [1.25, 2.5, float("nan")])
def test_train_cpu_fails_when_the_loss_does_not_halve(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, last: float
) -> None:
    monkeypatch.setitem(sys.modules, "builder.smoke.model", FakeTrainer(first_loss=2.5, last_loss=last).module())
    install(FakeImage())
    status, message = outcome("train.cpu", context(tmp_path))
    assert status == FAIL
    assert message.startswith("loss went 2.500 -> ")
    assert message.endswith("in 16 steps; expected below 50% of the start")


def test_a_check_that_raises_is_a_failure_with_the_exception(install: Installer, tmp_path: Path) -> None:
    install(FakeImage(torch="2.14.1+cu130"))
    del sys.modules["torch"].version  # e.g. a broken install
    result = run("version.cuda", context(tmp_path))
    assert (result.status, result.message) == (FAIL, "AttributeError: module 'torch' has no attribute 'version'")
