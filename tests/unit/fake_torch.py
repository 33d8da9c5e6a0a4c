"""Fake `torch`, `torchvision`, `torchaudio` (and extension) modules for the smoke suite's checks.

torch is not installed on the host; these modules carry just what builder/smoke reads (versions,
the compiled arch list, GPUs and their capabilities, cuDNN/NCCL versions, a few tensor results), so
every branch of the checks can be driven: matching and mismatching versions, a GPU the build has no
code for, no GPU at all, a wrong answer. A `FakeImage` describes one "image"; two ways to use it:

- in-process: `Installer(monkeypatch)(FakeImage(...))` puts the modules into sys.modules for the
  test (monkeypatch undoes it);
- in the smoke worker subprocess: `write_stubs(directory, image)` writes torch.py, torchvision.py,
  ... that turn into the same fakes on import; put the returned PYTHONPATH in the environment. Only
  there can an import hang or kill the interpreter (`hang_on_import`, `crash_on_import`).

Standard library only, and nothing from builder: the worker imports this module as a top-level file.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the worker subprocess imports this file too: keep it light
    import pytest

HERE = Path(__file__).resolve().parent
Crash = Literal["exit", "segfault"]


@dataclass(frozen=True, kw_only=True)
class Gpu:
    name: str = "NVIDIA L4"
    capability: tuple[int, int] = (8, 9)


@dataclass(frozen=True, kw_only=True)
class Extension:
    name: str = "addone"
    directory: str = ""  # where its compiled library lives (a synthetic .so from fatbin_kit)
    correct: bool = True  # whether add_one(x) gives x + 1


@dataclass(frozen=True, kw_only=True)
class FakeImage:
    """What the fake modules report; the defaults match tests' default manifest (see manifest())."""

    torch: str = "2.14.1+cu130"
    cuda: str | None = "13.0"  # None: a CPU build of torch
    cudnn: int | None = 92400
    nccl: tuple[int, int, int] = (2, 30, 7)
    arch_list: tuple[str, ...] = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
    gpus: tuple[Gpu, ...] = ()  # empty: torch.cuda.is_available() is False
    bf16: bool = True
    torchvision: str = "0.29.1+cu130"
    torchvision_dir: str = ""  # where torchvision/__init__.py "is" (put a synthetic _C.so there)
    nms_keep: tuple[int, ...] | None = None  # what nms returns whatever it is given; None: it computes
    torchaudio: str = "2.11.1+cu132"
    amplitude_db: tuple[float, ...] | None = None  # what amplitude_to_DB returns; None: it computes
    extensions: tuple[Extension, ...] = ()
    hang_on_import: tuple[str, ...] = ()  # module names whose import sleeps for an hour
    crash_on_import: tuple[tuple[str, Crash], ...] = ()  # (module, how): os._exit(3) or SIGSEGV
    chatter_on_import: str = ""  # printed to stdout (Python and C level) when a module is imported
    hang_in_cuda_check: bool = False  # torch.cuda.is_available() sleeps for an hour (a driver that hangs)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> FakeImage:
        data = json.loads(text)
        return cls(
            **{k: v for k, v in data.items() if k not in ("nccl", "gpus", "extensions", "crash_on_import")},
            nccl=tuple(data["nccl"]),
            gpus=tuple(Gpu(name=g["name"], capability=tuple(g["capability"])) for g in data["gpus"]),
            extensions=tuple(Extension(**e) for e in data["extensions"]),
            crash_on_import=tuple((m, how) for m, how in data["crash_on_import"]),
        )

    def with_(self, **changes: Any) -> FakeImage:
        return replace(self, **changes)


def manifest(**changes: object) -> dict[str, object]:
    """A torchyard manifest that FakeImage() satisfies (python and os are filled in from this host)."""
    data: dict[str, object] = {
        "schema": 1,
        "flavor": "runtime",
        "torch": "2.14.1+cu130",
        "torchvision": "0.29.1",
        "torchaudio": "2.11.1",
        "cuda": "13.0",
        "cudnn": "9.24.0.43",
        "nccl": "2.30.7",
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
        "os": _host_os(),
        "arch_list": ["sm_89"],
        "min_driver": "580.65.06",
        "extensions": [],
    }
    data.update(changes)
    return data


def _host_os() -> str:
    """checks_cpu.os_name's answer for this host (that module is out of reach here: see the top)."""
    fields: dict[str, str] = {}
    for path in ("/etc/os-release", "/usr/lib/os-release"):  # os-release(5): the second where the first is missing
        try:
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    key, _, value = line.strip().partition("=")
                    fields[key] = value.strip('"')
        except FileNotFoundError:
            continue
        break
    return f"{fields.get('ID', 'unknown')}{fields.get('VERSION_ID', '')}"


# --- a tensor that knows just enough ---------------------------------------------------------------


@dataclass
class Tensor:
    values: list[Any]
    dtype: str = "float32"
    device: str = "cpu"

    def tolist(self) -> list[Any]:
        return list(self.values)

    def __add__(self, other: float) -> Tensor:
        return Tensor([v + other for v in self.values], self.dtype, self.device)

    def sum(self) -> Tensor:
        return Tensor([sum(self.values)], self.dtype, self.device)

    def item(self) -> Any:
        return self.values[0]


@dataclass
class Batch:
    """What the fake DataLoader yields: batch[:, 0, 0, 0] is a Tensor of each item's first value."""

    items: list[Tensor]
    pinned: bool

    def __getitem__(self, key: object) -> Tensor:
        return Tensor([t.values[0] for t in self.items])

    def is_pinned(self) -> bool:
        return self.pinned


def _data_loader(dataset: Any, batch_size: int, num_workers: int = 0, pin_memory: bool = False) -> list[Batch]:
    items = [dataset[i] for i in range(len(dataset))]
    return [Batch(items[i : i + batch_size], pin_memory) for i in range(0, len(items), batch_size)]


def _full(shape: Sequence[int], value: float) -> Tensor:
    return Tensor([value])


def _tensor(data: Sequence[Any], dtype: str = "float32", device: str = "cpu") -> Tensor:
    return Tensor(list(data), dtype, device)


def _arange(n: int, dtype: str = "float32", device: str = "cpu") -> Tensor:
    return Tensor([float(i) for i in range(n)], dtype, device)


def _equal(a: Tensor, b: Tensor) -> bool:
    return a.values == b.values


# --- the modules -----------------------------------------------------------------------------------


def _module(name: str, file: str | None = None, **attrs: Any) -> ModuleType:
    module = ModuleType(name)
    module.__dict__.update(attrs)
    if file is not None:
        module.__file__ = file
    return module


def _sleep_if(hang: bool) -> bool:
    if hang:
        time.sleep(3600)
    return False


def build_torch(image: FakeImage) -> dict[str, ModuleType]:
    version = _module("torch.version", cuda=image.cuda)
    cudnn = _module(
        "torch.backends.cudnn",
        is_available=lambda: image.cudnn is not None,
        version=lambda: image.cudnn,
        benchmark=False,
        enabled=True,
        allow_tf32=True,
    )
    cuda_backend = _module("torch.backends.cuda", matmul=SimpleNamespace(allow_tf32=False))
    backends = _module("torch.backends", cudnn=cudnn, cuda=cuda_backend)
    gpus = image.gpus
    cuda = _module(
        "torch.cuda",
        is_available=lambda: _sleep_if(image.hang_in_cuda_check) or (bool(gpus) and image.cuda is not None),
        device_count=lambda: len(gpus),
        get_device_capability=lambda index=0: gpus[index].capability,
        get_device_name=lambda index=0: gpus[index].name,
        get_arch_list=lambda: list(image.arch_list) if image.cuda else [],
        is_bf16_supported=lambda: image.bf16,
        nccl=SimpleNamespace(version=lambda: image.nccl),
        synchronize=lambda: None,
    )
    threads: list[int] = []
    torch = _module(
        "torch",
        __version__=image.torch,
        version=version,
        backends=backends,
        cuda=cuda,
        tensor=_tensor,
        arange=_arange,
        equal=_equal,
        full=_full,
        utils=SimpleNamespace(data=SimpleNamespace(DataLoader=_data_loader)),
        float32="float32",
        float16="float16",
        bfloat16="bfloat16",
        set_num_threads=threads.append,
        get_num_threads=lambda: threads[-1] if threads else 4,  # 4 until a check sets another
        num_threads_set=threads,  # what set_num_threads was given, for the tests
    )
    return {"torch": torch, "torch.version": version, "torch.backends": backends, "torch.cuda": cuda}


def _iou(a: Sequence[float], b: Sequence[float]) -> float:
    width = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    height = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = width * height
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _nms(boxes: Tensor, scores: Tensor, threshold: float) -> Tensor:
    """torchvision.ops.nms's answer: by falling score, each box not overlapping a kept one by IoU > threshold."""
    order = sorted(range(len(boxes.values)), key=lambda i: -scores.values[i])
    keep: list[int] = []
    for i in order:
        if all(_iou(boxes.values[i], boxes.values[k]) <= threshold for k in keep):
            keep.append(i)
    return Tensor(keep, "int64")


def _amplitude_to_db(x: Tensor, multiplier: float, amin: float, db_multiplier: float) -> Tensor:
    """torchaudio.functional.amplitude_to_DB without top_db: multiplier * log10(max(x, amin)) - multiplier * db."""
    return Tensor([multiplier * math.log10(max(v, amin)) - multiplier * db_multiplier for v in x.values])


def build_torchvision(image: FakeImage) -> dict[str, ModuleType]:
    def nms(boxes: Tensor, scores: Tensor, threshold: float) -> Tensor:
        return _nms(boxes, scores, threshold) if image.nms_keep is None else Tensor(list(image.nms_keep), "int64")

    ops = _module("torchvision.ops", nms=nms)
    file = os.path.join(image.torchvision_dir or "/nonexistent/torchvision", "__init__.py")
    return {"torchvision": _module("torchvision", file, __version__=image.torchvision, ops=ops), "torchvision.ops": ops}


def build_torchaudio(image: FakeImage) -> dict[str, ModuleType]:
    functional = _module(
        "torchaudio.functional",
        amplitude_to_DB=lambda x, multiplier, amin, db_multiplier: (
            _amplitude_to_db(x, multiplier, amin, db_multiplier)
            if image.amplitude_db is None
            else Tensor(list(image.amplitude_db))
        ),
    )
    torchaudio = _module("torchaudio", __version__=image.torchaudio, functional=functional)
    return {"torchaudio": torchaudio, "torchaudio.functional": functional}


def build_extension(ext: Extension) -> dict[str, ModuleType]:
    step = 1.0 if ext.correct else 2.0
    file = os.path.join(ext.directory or "/nonexistent", "__init__.py")
    return {ext.name: _module(ext.name, file, add_one=lambda x: x + step)}


def build(image: FakeImage, name: str) -> dict[str, ModuleType]:
    """The module `name` (and its submodules) as this image has it."""
    builders = {"torch": build_torch, "torchvision": build_torchvision, "torchaudio": build_torchaudio}
    if name in builders:
        return builders[name](image)
    for ext in image.extensions:
        if ext.name == name:
            return build_extension(ext)
    raise ModuleNotFoundError(f"fake image has no module {name!r}")


def module_names(image: FakeImage) -> list[str]:
    return ["torch", "torchvision", "torchaudio", *(e.name for e in image.extensions)]


# --- in-process ------------------------------------------------------------------------------------


class Installer:
    """`install(FakeImage(...))` puts the fake modules into sys.modules until the test ends."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch

    def __call__(self, image: FakeImage | None = None) -> dict[str, ModuleType]:
        image = image or FakeImage()
        installed: dict[str, ModuleType] = {}
        for name in module_names(image):
            installed |= build(image, name)
        for name, module in installed.items():
            self.monkeypatch.setitem(sys.modules, name, module)
        return installed


# --- in the worker subprocess ----------------------------------------------------------------------


def write_stubs(directory: Path, image: FakeImage) -> str:
    """Write torch.py, torchvision.py, ... into directory; returns the PYTHONPATH that finds them."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in module_names(image):
        stub = f"import fake_torch\n\nfake_torch.become(__name__, {image.to_json()!r})\n"
        (directory / f"{name}.py").write_text(stub, encoding="utf-8")
    return os.pathsep.join([str(directory), str(HERE)])


def become(name: str, text: str) -> None:
    """Called by a stub at import: hang, crash, or replace the stub by the fake module."""
    image = FakeImage.from_json(text)
    if image.chatter_on_import:
        print(image.chatter_on_import, flush=True)
        os.write(1, f"{image.chatter_on_import}\n".encode())
    if name in image.hang_on_import:
        time.sleep(3600)
    how = dict(image.crash_on_import).get(name)
    if how == "exit":
        os._exit(3)
    if how == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    sys.modules.update(build(image, name))


# --- a stand-in for builder/smoke/model.py ---------------------------------------------------------


@dataclass
class Trained:
    first_loss: float
    last_loss: float
    steps: int
    seconds: float
    images_per_second: float
    precision: str = "fp32"
    warmup: int = 0


@dataclass
class FakeTrainer:
    """Replaces model.train (which needs real torch): returns fixed losses, records its calls."""

    first_loss: float = 2.5
    last_loss: float = 0.3
    images_per_second: float = 1000.0
    cpu_images_per_second: float | None = None  # the CPU's rate where it differs from the GPU's
    calls: list[dict[str, Any]] = field(default_factory=list)
    cudnn_benchmark: list[bool] = field(default_factory=list)  # torch.backends.cudnn.benchmark at each call

    def train(
        self,
        device: str,
        steps: int,
        batch: int = 64,
        *,
        precision: Any = None,
        warmup: int = 3,
        seed: int = 0,
        **shape: int,  # size, width: the real train's smaller problems (--small)
    ) -> Trained:
        name = getattr(precision, "name", "fp32")
        call = {"device": device, "steps": steps, "batch": batch, "precision": name, "warmup": warmup}
        self.calls.append(call | shape)
        self.cudnn_benchmark.append(bool(sys.modules["torch"].backends.cudnn.benchmark))
        ips = self.cpu_images_per_second if device == "cpu" and self.cpu_images_per_second else self.images_per_second
        return Trained(self.first_loss, self.last_loss, steps, steps * batch / ips, ips, name, warmup)

    def module(self) -> ModuleType:
        precisions: dict[str, Any] = {
            name: SimpleNamespace(name=value)
            for name, value in (
                ("FP32", "fp32"),
                ("TF32", "tf32"),
                ("AMP_FP16", "amp_fp16_channels_last"),
                ("AMP_BF16", "amp_bf16_channels_last"),
            )
        }
        return _module("builder.smoke.model", train=self.train, **precisions)
