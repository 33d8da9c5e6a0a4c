"""A small ResNet (torch only) and the training loop both the CPU and GPU checks use."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


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


@dataclass
class TrainResult:
    first_loss: float
    last_loss: float
    steps: int
    seconds: float
    images_per_second: float


def train(
    device: str, steps: int, batch: int = 64, *, amp: bool = False, channels_last: bool = False, seed: int = 0
) -> TrainResult:
    """Fit a fixed synthetic batch (memorisation): a working training path drives the loss down."""
    torch.manual_seed(seed)
    model: Any = SmallResNet().to(device)
    images = torch.randn(batch, 3, 32, 32, device=device)
    labels = torch.randint(0, 10, (batch,), device=device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler(device, enabled=amp and device == "cuda")
    losses: list[float] = []
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda" if device == "cuda" else "cpu", dtype=torch.float16, enabled=amp):
            loss = nn.functional.cross_entropy(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(float(loss.detach()))
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return TrainResult(losses[0], losses[-1], steps, seconds, steps * batch / seconds)
