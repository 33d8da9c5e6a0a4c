"""A few steps of a tiny model on random data (CPU, or the GPU when there is one): `python train.py`."""

from __future__ import annotations

import torch


def main(steps: int = 20) -> float:
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(256, 8, device=device)
    y = x @ torch.randn(8, 1, device=device)  # a linear target the model can learn
    model = torch.nn.Linear(8, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step:2d}  loss {loss.item():.4f}")
    return loss.item()


if __name__ == "__main__":
    main()
