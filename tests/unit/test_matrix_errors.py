"""Malformed matrix files: each gives exactly one located line, and `matrix check` exits 2 with it.

Every case is a targeted edit of the small valid matrix in matrix_kit.BASE. `{line}` in an expected
message is the line of the case's marker text in the edited file, found here independently of the
loader's own locator.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from matrix_kit import BASE, edit, line_of

from builder.cli.main import main
from builder.core.errors import MatrixError
from builder.matrix.loader import load_matrix


@dataclass(frozen=True)
class Case:
    id: str
    old: str
    new: str
    expected: str  # {line}: where the marker starts; {first}: where its first occurrence starts
    marker: str | None = None  # None: the message carries no line of ours (or the parser's line:col)
    nth: int = 1  # which occurrence of the marker is the offending one

    def text(self) -> str:
        return edit(BASE, self.old, self.new)

    def message(self, file: str) -> str:
        text = self.text()
        if self.marker is None:
            return f"{file}:{self.expected}"
        line = line_of(text, self.marker, self.nth)
        first = line_of(text, self.marker)
        return f"{file}:" + self.expected.format(line=line, first=first)


_CPU = '[[torch.variants]]\nname = "cpu"\nsource = "pypi"\n'
_SM90 = (
    '[[arch]]\nname = "sm_90"\nfamily = "Hopper"\nnvcc_added = "11.8"\n'
    + 'datacenter_gpus = ["NVIDIA H100"]\nsource = "nv"\n'
)
_CU120 = '[[cuda]]\nversion = "12.0.0"\nmin_driver = "525.60.13"\nsource = "nv"\n'
_END = 'name = "cpu"\nsource = "pypi"\n'
_PUBLISH = '\n[[publish]]\nname = "team"\ntorch = ">=2.5"\nos = ["debian12"]\n'


def _publish(case_id: str, extra: str, expected: str, marker: str, nth: int = 1, entry: str = _PUBLISH) -> Case:
    """A case that appends a [[publish]] entry (plus `extra` lines) to the small matrix."""
    return Case(case_id, _END, _END + entry + extra, expected, marker, nth)


CASES = [
    # --- TOML syntax: file:line:col -------------------------------------------------------------------
    Case("toml-invalid-value", "schema = 1", "schema = = 1", "1:10: TOML syntax error: Invalid value"),
    Case(
        "toml-unterminated-string",
        'family = "Hopper"',
        'family = "Hopper',
        "{line}:17: TOML syntax error: Illegal character '\\n'",
        'family = "Hopper',
    ),
    Case(
        "toml-unclosed-array",
        'gpus = ["GeForce RTX 3090"]',
        'gpus = ["GeForce RTX 3090"',
        "{line}:1: TOML syntax error: Unclosed array",
        'source = "nv"\n\n[[arch]]\nname = "sm_89"',  # the parser stops on the line after the array
    ),
    Case(
        "toml-table-twice",
        "[brand_sets]\n",
        "[brand_sets]\n[brand_sets]\n",
        "{line}:12: TOML syntax error: Cannot declare ('brand_sets',) twice",
        "[brand_sets]",
        2,
    ),
    # --- schema -------------------------------------------------------------------------------------
    Case(
        "schema-unsupported",
        "schema = 1",
        "schema = 2",
        "{line}: matrix.schema: schema 2 is not supported (this torchyard reads schema 1)",
        "schema = 2",
    ),
    Case(
        "schema-type", "schema = 1", 'schema = "1"', "{line}: matrix.schema: expected an integer, found '1'", "schema ="
    ),
    Case("schema-missing", "schema = 1\n", "\n", " matrix: missing required key 'schema'"),
    # --- unknown keys, with "did you mean" ------------------------------------------------------------
    Case(
        "unknown-top-level-key",
        "schema = 1\n",
        "schema = 1\nsourcez = 1\n",
        "{line}: matrix.sourcez: unknown key 'sourcez' (did you mean 'sources'?)",
        "sourcez",
    ),
    Case(
        "unknown-arch-key",
        'nvcc_added = "11.1"',
        'nvcc_add = "11.1"',
        "{line}: arch[sm_86].nvcc_add: unknown key 'nvcc_add' (did you mean 'nvcc_added'?)",
        "nvcc_add",
    ),
    Case(
        "unknown-variant-key",
        'nccl = "2.21.5"',
        'ncl = "2.21.5"',
        "{line}: torch[2.5.1].variants[cu124].ncl: unknown key 'ncl' (did you mean 'nccl'?)",
        "ncl =",
    ),
    Case(
        "unknown-key-no-suggestion",
        'family = "Kepler"',
        'family = "Kepler"\nwibble = 1',
        "{line}: arch[sm_37].wibble: unknown key 'wibble'",
        "wibble",
    ),
    Case(
        "unknown-source-key",
        'title = "PyPI"',
        'titel = "PyPI"',
        "{line}: sources.pypi.titel: unknown key 'titel' (did you mean 'title'?)",
        "titel",
    ),
    # --- malformed values and wrong types ---------------------------------------------------------------
    Case(
        "cuda-version-malformed",
        'version = "12.4.1"',
        'version = "12.4.x"',
        "{line}: cuda[12.4.x].version: '12.4.x' is not a dotted version like 2.5.1",
        "12.4.x",
    ),
    Case(
        "cuda-version-not-full",
        'version = "12.4.1"',
        'version = "12.4"',
        "{line}: cuda[12.4].version: expected a full toolkit version like 12.4.1, found '12.4'",
        'version = "12.4"',
    ),
    Case(
        "driver-malformed",
        'min_driver = "550.54.15"',
        'min_driver = "abc"',
        "{line}: cuda[12.4.1].min_driver: expected a full driver version like 525.60.13, found 'abc'",
        '"abc"',
    ),
    Case(
        "driver-bare-branch",
        'min_driver = "550.54.15"',
        'min_driver = "550"',
        "{line}: cuda[12.4.1].min_driver: expected a full driver version like 525.60.13, found '550'",
        'min_driver = "550"',
    ),
    Case(
        "reports-cuda-not-minor",
        'reports_cuda = "12.4"',
        'reports_cuda = "12"',
        "{line}: driver_branch[550].reports_cuda: expected MAJOR.MINOR like 12.4, found '12'",
        'reports_cuda = "12"',
    ),
    Case(
        "branch-type",
        "branch = 550",
        'branch = "550"',
        "{line}: driver_branch[550].branch: expected an integer, found '550'",
        'branch = "550"',
    ),
    Case(
        "gpus-not-a-list",
        'gpus = ["GeForce RTX 3090"]',
        'gpus = "GeForce RTX 3090"',
        "{line}: arch[sm_86].gpus: expected a list, found 'GeForce RTX 3090'",
        'gpus = "GeForce',
    ),
    Case(
        "family-empty",
        'family = "Hopper"',
        'family = ""',
        "{line}: arch[sm_90].family: expected a non-empty string, found ''",
        'family = ""',
    ),
    Case(
        "python-malformed",
        'python = ["3.9", "3.10", "3.11", "3.12", "3.13"]',
        'python = ["3.9", "three"]',
        "{line}: torch[2.5.1].python: 'three' is not a dotted version like 2.5.1",
        '"three"',
    ),
    Case(
        "sass-malformed",
        'sass = ["8.6", "9.0"]',
        'sass = ["8.6", "nine"]',
        "{line}: torch[2.5.1].variants[cu124].sass: 'nine' is not a GPU architecture (examples: sm_89, 8.9, sm_90a)",
        '"nine"',
    ),
    Case(
        "variant-name-malformed",
        'name = "cu124"',
        'name = "cuda124"',
        "{line}: torch[2.5.1].variants[cuda124].name: 'cuda124' is not a wheel variant like cu124 or cpu",
        '"cuda124"',
    ),
    Case(
        "confidence-misspelled",
        'url = "https://pypi.org/"\nconfidence = "secondary"',
        'url = "https://pypi.org/"\nconfidence = "secondry"',
        "{line}: sources.pypi.confidence: 'secondry' is not one of verified, secondary, unverified"
        " (did you mean 'secondary'?)",
        '"secondry"',
    ),
    Case(
        "url-not-https",
        'url = "https://pypi.org/"',
        'url = "http://pypi.org/"',
        "{line}: sources.pypi.url: expected an https:// URL, found 'http://pypi.org/'",
        "http://",
    ),
    Case(
        "requires-torch-malformed",
        'version = "0.20.1"\nrequires_torch = "==2.5.1"',
        'version = "0.20.1"\nrequires_torch = "=>2.5.1"',
        "{line}: torchvision[0.20.1].requires_torch: '=>2.5.1' is not a version specifier like '>=9.0,<9.6'",
        "=>2.5.1",
    ),
    Case(
        "cudnn-driver-table-key",
        'min_driver = { cuda11 = "450.80.02", cuda12 = "525.60.13" }',
        'min_driver = { cuda_12 = "525.60.13" }',
        "{line}: cudnn[9.0-9.5].min_driver: key 'cuda_12' should name a CUDA major like cuda12",
        "cuda_12",
    ),
    Case(
        "brand-set-not-a-list",
        'datacenter = ["tesla", "nvidia"]',
        'datacenter = "tesla"',
        "{line}: brand_sets.datacenter: expected a list, found 'tesla'",
        'datacenter = "tesla"',
    ),
    # --- sources --------------------------------------------------------------------------------------
    Case(
        "unknown-source",
        'family = "Kepler"\nnvcc_removed = "12.0"\ndatacenter_gpus = ["Tesla K80"]\nsource = "nv"',
        'family = "Kepler"\nnvcc_removed = "12.0"\ndatacenter_gpus = ["Tesla K80"]\nsource = "nvv"',
        "{line}: arch[sm_37].source: unknown source 'nvv' (did you mean 'nv'?)",
        '"nvv"',
    ),
    Case(
        "no-source-given",
        'name = "cpu"\nsource = "pypi"',
        'name = "cpu"\nsource = []',
        "{line}: torch[2.5.1].variants[cpu].source: every fact needs at least one source",
        "source = []",
    ),
    Case(
        "source-missing",
        'branch = 525\nreports_cuda = "12.0"\nsource = "nv"\n',
        'branch = 525\nreports_cuda = "12.0"\n',
        "{line}: driver_branch[525]: missing required key 'source'",
        "[[driver_branch]]\nbranch = 525",
    ),
    # --- references to unknown entries ---------------------------------------------------------------------
    Case(
        "variant-cuda-not-in-file",
        'name = "cu118"\ncuda = "11.8"',
        'name = "cu117"\ncuda = "11.7"',
        "{line}: torch[2.5.1].variants[cu117].cuda: unknown CUDA release '11.7' (did you mean '11.8'?)",
        'cuda = "11.7"',
    ),
    Case(
        "variant-name-contradicts-cuda",
        'name = "cu124"\ncuda = "12.4"',
        'name = "cu124"\ncuda = "12.0"',
        "{line}: torch[2.5.1].variants[cu124].cuda: variant cu124 cannot carry CUDA 12.0 (that is cu120)",
        'cuda = "12.0"\ncuda_runtime',
    ),
    Case(
        "pypi-default-not-a-variant",
        'pypi_default = "cu124"',
        'pypi_default = "cu121"',
        "{line}: torch[2.5.1].pypi_default: unknown variant 'cu121' (did you mean 'cu124'?)",
        "pypi_default",
    ),
    Case(
        "torchvision-not-in-file",
        'torchvision = "0.20.1"',
        'torchvision = "0.20.2"',
        "{line}: torch[2.5.1].torchvision: unknown torchvision '0.20.2' (did you mean '0.20.1'?)",
        'torchvision = "0.20.2"',
    ),
    Case(
        "companion-requires-another-torch",
        'version = "0.20.1"\nrequires_torch = "==2.5.1"',
        'version = "0.20.1"\nrequires_torch = "==2.5.0"',
        "{line}: torch[2.5.1].torchvision: torchvision 0.20.1 requires torch==2.5.0, not 2.5.1",
        'torchvision = "0.20.1"',
    ),
    Case(
        "cuda-image-unknown-os",
        'os = ["debian12"]',
        'os = ["debian13"]',
        "{line}: cuda_image[12.4.1].os: unknown OS 'debian13' (did you mean 'debian12'?)",
        'os = ["debian13"]',
    ),
    Case(
        "cuda-image-unknown-release",
        'cuda = "12.4.1"',
        'cuda = "12.4.0"',
        "{line}: cuda_image[12.4.0].cuda: unknown CUDA release '12.4.0' (did you mean '12.4.1'?)",
        'cuda = "12.4.0"',
    ),
    Case(
        "cuda-image-unknown-brand-set",
        'fc_brands = "datacenter"',
        'fc_brands = "datacentre"',
        "{line}: cuda_image[12.4.1].fc_brands: unknown brand set 'datacentre' (did you mean 'datacenter'?)",
        "datacentre",
    ),
    Case(
        "cuda-image-bad-cudnn-tag",
        'cudnn_tag = "cudnn"',
        'cudnn_tag = "cudnn10"',
        "{line}: cuda_image[12.4.1].cudnn_tag: 'cudnn10' is not one of cudnn8, cudnn9, cudnn (did you mean 'cudnn'?)",
        "cudnn10",
    ),
    Case(
        "renamed-to-unknown-arch",
        'family = "Hopper"',
        'family = "Hopper"\nrenamed_to = "sm_91"',
        "{line}: arch[sm_90].renamed_to: unknown architecture 'sm_91' (did you mean 'sm_90'?)",
        "renamed_to",
    ),
    Case(
        "sass-arch-not-in-file",
        'sass = ["8.6", "9.0"]',
        'sass = ["8.6", "9.0", "10.0"]',
        "{line}: torch[2.5.1].variants[cu124].sass: unknown architecture 'sm_100' (did you mean 'sm_90'?)",
        '"10.0"',
    ),
    Case(
        "pinned-toolkit-not-in-file",
        'cuda_runtime = "nvidia-cuda-runtime-cu12==12.4.127"',
        'cuda_runtime = "cuda-toolkit==12.4.0"',
        "{line}: torch[2.5.1].variants[cu124].cuda_runtime: unknown CUDA release '12.4.0' (did you mean '12.4.1'?)",
        "cuda-toolkit",
    ),
    Case(
        "cuda-without-major-entry",
        _CU120,
        _CU120 + '\n[[cuda]]\nversion = "13.0.0"\nmin_driver = "580.65.06"\nsource = "nv"\n',
        "{line}: cuda[13.0.0].version: no [[cuda_major]] entry for CUDA 13",
        '"13.0.0"',
    ),
    # --- duplicates -------------------------------------------------------------------------------------------
    Case(
        "duplicate-arch",
        _SM90,
        _SM90 + "\n" + _SM90,
        "{line}: arch[sm_90]: duplicate entry (the first is at line {first})",
        '[[arch]]\nname = "sm_90"',
        2,
    ),
    Case(
        "duplicate-cuda-release",
        _CU120,
        _CU120 + "\n" + _CU120,
        "{line}: cuda[12.0.0]: duplicate entry (the first is at line {first})",
        '[[cuda]]\nversion = "12.0.0"',
        2,
    ),
    Case(
        "duplicate-variant",
        _CPU,
        _CPU + "\n" + _CPU,
        "{line}: torch[2.5.1].variants[cpu]: duplicate variant (the first is at line {first})",
        '[[torch.variants]]\nname = "cpu"',
        2,
    ),
    Case(
        "duplicate-gpu-name",
        'datacenter_gpus = ["NVIDIA H100"]',
        'datacenter_gpus = ["NVIDIA H100", "NVIDIA L4"]',
        "{line}: arch[sm_90].datacenter_gpus: GPU 'NVIDIA L4' is also listed under sm_89",
        '"NVIDIA H100", "NVIDIA L4"',
    ),
    # --- contradictions -----------------------------------------------------------------------------------------
    Case(
        "sass-arch-cuda-cannot-target-removed",
        'sass = ["8.6", "9.0"]',
        'sass = ["3.7", "8.6", "9.0"]',
        "{line}: torch[2.5.1].variants[cu124].sass: sm_37 cannot be targeted by CUDA 12.4"
        " (from before CUDA 10.0, removed in 12.0)",
        'sass = ["3.7", "8.6", "9.0"]',
        2,
    ),
    Case(
        "sass-arch-cuda-cannot-target-yet",
        'nvcc_added = "11.1"',
        'nvcc_added = "12.0"',
        "{line}: torch[2.5.1].variants[cu118].sass: sm_86 cannot be targeted by CUDA 11.8 (from CUDA 12.0)",
        'sass = ["3.7", "8.6", "9.0"]',
    ),
    Case(
        "ptx-arch-cuda-cannot-target",
        'sass = ["8.6", "9.0"]',
        'sass = ["8.6", "9.0"]\nptx = ["3.7"]',
        "{line}: torch[2.5.1].variants[cu124].ptx: sm_37 cannot be targeted by CUDA 12.4"
        " (from before CUDA 10.0, removed in 12.0)",
        'ptx = ["3.7"]',
    ),
    Case(
        "cudnn-in-no-range",
        'cudnn = "9.1.0.70"\nnccl',
        'cudnn = "8.9.2.26"\nnccl',
        "{line}: torch[2.5.1].variants[cu124].cudnn: cuDNN 8.9.2.26 is in no [[cudnn]] range",
        '"8.9.2.26"',
    ),
    Case(
        "cudnn-without-the-cuda-major",
        "cuda_majors = [11, 12]",
        "cuda_majors = [12]",
        "{line}: torch[2.5.1].variants[cu118].cudnn: cuDNN 9.1.0.70 has no build for CUDA 11 (builds: 12)",
        'cudnn = "9.1.0.70"\nsass = ["3.7"',
    ),
    Case(
        "pinned-toolkit-contradicts-cuda",
        'cuda_runtime = "nvidia-cuda-runtime-cu12==12.4.127"',
        'cuda_runtime = "cuda-toolkit==12.0.0"',
        "{line}: torch[2.5.1].variants[cu124].cuda_runtime: pins CUDA 12.0.0, but the variant is CUDA 12.4",
        "cuda-toolkit",
    ),
    Case(
        "cpu-variant-with-cudnn",
        'name = "cpu"\nsource = "pypi"',
        'name = "cpu"\ncudnn = "9.1.0.70"\nsource = "pypi"',
        "{line}: torch[2.5.1].variants[cpu]: the cpu variant has no CUDA libraries or architectures",
        '[[torch.variants]]\nname = "cpu"',
    ),
    Case(
        "cuda-variant-without-cuda",
        'name = "cu118"\ncuda = "11.8"\n',
        'name = "cu118"\n',
        "{line}: torch[2.5.1].variants[cu118]: a CUDA variant needs `cuda`",
        '[[torch.variants]]\nname = "cu118"',
    ),
    Case(
        "driver-branch-reports-older-cuda",
        'min_driver = "550.54.15"',
        'min_driver = "525.85.12"',
        "{line}: cuda[12.4.1].min_driver: driver branch 525 reports CUDA 12.0, older than this release",
        '"525.85.12"',
    ),
    Case(
        "driver-branch-missing",
        'min_driver = "550.54.15"',
        'min_driver = "545.23.06"',
        "{line}: cuda[12.4.1].min_driver: driver branch 545 has no [[driver_branch]] entry",
        '"545.23.06"',
    ),
    Case(
        "removed-before-added",
        'nvcc_added = "11.1"',
        'nvcc_added = "11.1"\nnvcc_removed = "11.0"',
        "{line}: arch[sm_86].nvcc_removed: removed in 11.0 but only added in 11.1",
        'nvcc_removed = "11.0"',
    ),
    Case(
        "suffix-without-base",
        _SM90,
        _SM90 + '\n[[arch]]\nname = "sm_100a"\nfamily = "Blackwell"\nsource = "nv"\n',
        "{line}: arch[sm_100a].name: no base architecture sm_100 for this variant",
        '"sm_100a"',
    ),
    Case(
        "python-image-without-placeholder",
        'python_image = "python:{python}-slim-bookworm"',
        'python_image = "python:3-slim-bookworm"',
        "{line}: os[debian12].python_image: python_images is set, so python_image needs a {{python}} placeholder",
        "python:3-slim",
    ),
    # --- the publish set ------------------------------------------------------------------------------
    _publish(
        "publish-unknown-os",
        "",
        "{line}: publish[team].os: unknown OS 'debian13' (did you mean 'debian12'?)",
        '["debian13"]',
        entry=_PUBLISH.replace('["debian12"]', '["debian13"]'),
    ),
    _publish(
        "publish-label-injection",
        'labels = { "org.example.team" = "ml\\nRUN id" }\n',
        "{line}: publish[team].labels: label org.example.team: 'ml\\nRUN id' contains a newline, which is not allowed "
        "in a Dockerfile",
        "labels =",
    ),
    _publish(
        "publish-label-ours",
        'labels = { "io.torchyard.torch" = "9.9" }\n',
        "{line}: publish[team].labels: label io.torchyard.torch: the io.torchyard. namespace is torchyard's own",
        "labels =",
    ),
    _publish(
        "publish-labels-not-a-table",
        'labels = ["team=ml"]\n',
        "{line}: publish[team].labels: expected a table of label = value",
        "labels =",
    ),
    _publish(
        "publish-unknown-flavor",
        'flavors = ["runtim"]\n',
        "{line}: publish[team].flavors: 'runtim' is not one of runtime, devel, inference, notebook "
        "(did you mean 'runtime'?)",
        'flavors = ["runtim"]',
    ),
    _publish(
        "publish-unknown-strategy",
        'strategy = "cuda"\n',
        "{line}: publish[team].strategy: 'cuda' is not one of wheels, cuda-base (did you mean 'cuda-base'?)",
        'strategy = "cuda"',
    ),
    _publish(
        "publish-duplicate-name",
        _PUBLISH,
        "{line}: publish[team]: duplicate publish entry name",
        'name = "team"',
        nth=2,
    ),
    _publish(
        "publish-bad-torch-spec",
        "",
        "{line}: publish[team].torch: '2.5 or newer' is not a version specifier like '>=9.0,<9.6'",
        "2.5 or newer",
        entry=_PUBLISH.replace('">=2.5"', '"2.5 or newer"'),
    ),
    _publish(
        "publish-unknown-key",
        'flavour = ["runtime"]\n',
        "{line}: publish[team].flavour: unknown key 'flavour' (did you mean 'flavors'?)",
        "flavour",
    ),
    _publish(
        "publish-unknown-variant",
        'variants = ["cu12"]\n',
        "{line}: publish[team].variants: unknown variant 'cu12' (did you mean 'cu124'?)",
        'variants = ["cu12"]',
    ),
    _publish(
        "publish-unknown-require-arch",
        'require_archs = ["sm_61"]\n',
        "{line}: publish[team].require_archs: unknown architecture 'sm_61'",
        "require_archs",
    ),
    _publish(
        "publish-unknown-arch",
        'archs = ["sm_91"]\n',
        "{line}: publish[team].archs: unknown architecture 'sm_91'",
        'archs = ["sm_91"]',
    ),
    _publish(
        "publish-without-name",
        "",
        "{line}: publish[0]: missing required key 'name'",
        "[[publish]]",
        entry=_PUBLISH.replace('name = "team"\n', ""),
    ),
]


def test_there_are_at_least_30_cases() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


def test_the_base_matrix_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(BASE)
    assert [str(t.version) for t in load_matrix(path).torch] == ["2.5.1"]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed_matrix(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(case.text())
    expected = case.message(str(path))

    with pytest.raises(MatrixError) as exc:
        load_matrix(path)
    assert str(exc.value) == expected

    monkeypatch.delenv("TORCHYARD_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exit_:
        main(["matrix", "check", str(path)])
    out, err = capsys.readouterr()
    assert exit_.value.code == 2
    assert out == ""
    assert err == f"torchyard: error: {expected}\n"


def test_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "missing.toml"
    with pytest.raises(SystemExit) as exit_:
        main(["matrix", "check", str(path)])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == f"torchyard: error: {path}: cannot read: No such file or directory\n"


def test_check_of_a_valid_file_reports_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(BASE)
    with pytest.raises(SystemExit) as exit_:
        main(["matrix", "check", str(path)])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == (
        f"{path}: ok (3 CUDA releases, 4 architectures, 1 torch releases / 3 variants, 1 OS bases, 2 sources)\n"
    )


@pytest.mark.parametrize("command", [["lookup"], ["explain"], ["matrix", "list"], ["matrix", "show", "torch", "2.5.1"]])
def test_every_command_checks_the_matrix_it_uses(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = next(c for c in CASES if c.id == "sass-arch-cuda-cannot-target-removed")
    path = tmp_path / "matrix.toml"
    path.write_text(case.text())
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", str(path), *command])
    assert exit_.value.code == 2
    assert capsys.readouterr() == ("", f"torchyard: error: {case.message(str(path))}\n")
