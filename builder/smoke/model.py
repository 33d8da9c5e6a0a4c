"""A small ResNet (torch only) and the training loop both the CPU and GPU checks use.

Honest timing: each configuration warms itself up (cuDNN autotuning with benchmark mode, lazy kernel
loading, the optimizer's state) with its own batch, precision and memory format before it is timed; GPU
time is measured with CUDA events around a synchronize; the losses stay on the device (one host read at
the end), so no step waits for the host. Global settings are restored by the caller (compat.restored).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .compat import Timer, autocast, grad_scaler, set_tf32


class Block(nn.Module):  # type: ignore[misc]
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(out)))


class SmallResNet(nn.Module):  # type: ignore[misc]
    """Stem, three residual blocks, global pooling, a linear classifier."""

    def __init__(self, classes: int = 10, width: int = 32) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.blocks = nn.Sequential(Block(width), Block(width), Block(width))
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.blocks(self.stem(x))
        return self.head(features.mean(dim=(2, 3)))


def digest(model: Any) -> str:
    """sha256 of every parameter's exact values (float32 -> float64 -> repr is exact): equal digests are
    bit-identical weights."""
    found = hashlib.sha256()
    for parameter in model.parameters():
        found.update(repr(parameter.detach().double().cpu().flatten().tolist()).encode())
    return found.hexdigest()


@dataclass(frozen=True)
class Precision:
    """One training configuration: fp32 (TF32 off), tf32, or AMP in fp16 / bf16 (+ channels_last)."""

    name: str
    amp_dtype: str | None = None  # "float16" | "bfloat16"
    tf32: bool = False
    channels_last: bool = False


FP32 = Precision("fp32")
TF32 = Precision("tf32", tf32=True)
AMP_FP16 = Precision("amp_fp16_channels_last", amp_dtype="float16", channels_last=True)
AMP_BF16 = Precision("amp_bf16_channels_last", amp_dtype="bfloat16", channels_last=True)


@dataclass
class TrainResult:
    first_loss: float
    last_loss: float
    steps: int  # timed steps (warm-up steps come before them; their losses count for the loss check)
    seconds: float
    images_per_second: float
    precision: str = "fp32"
    warmup: int = 0


def train(
    device: str,
    steps: int,
    batch: int = 64,
    *,
    precision: Precision = FP32,
    warmup: int = 3,
    seed: int = 0,
    size: int = 32,
    width: int = 32,
) -> TrainResult:
    """Fit a fixed synthetic batch (memorisation): a working training path drives the loss down. `size` (the
    images' side) and `width` (the channels) shrink the work for emulated CPUs."""
    torch.manual_seed(seed)
    set_tf32(torch, precision.tf32)
    model: Any = SmallResNet(width=width).to(device)
    images = torch.randn(batch, 3, size, size, device=device)
    labels = torch.randint(0, 10, (batch,), device=device)
    if precision.channels_last:
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    dtype = getattr(torch, precision.amp_dtype) if precision.amp_dtype else None
    scaler = grad_scaler(torch, device, enabled=precision.amp_dtype == "float16" and device == "cuda")
    losses = torch.zeros(warmup + steps, device=device)

    def step(index: int) -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast(torch, "cuda" if device.startswith("cuda") else "cpu", dtype, enabled=dtype is not None):
            loss = nn.functional.cross_entropy(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses[index] = loss.detach().float()

    for index in range(warmup):
        step(index)
    with Timer(torch, device) as timer:
        for index in range(warmup, warmup + steps):
            step(index)
    found = losses.tolist()  # the one host read of the run
    seconds = max(timer.seconds, 1e-9)
    return TrainResult(found[0], found[-1], steps, seconds, steps * batch / seconds, precision.name, warmup)
