"""`python -m tinyproj`: torch's version, where it computes, and one small tensor operation there."""

from __future__ import annotations

import argparse

import torch
from tabulate import tabulate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tinyproj", description="Print torch's version and do one tensor op.")
    parser.add_argument("--size", type=int, default=4, help="the side of the square matrices (default: 4)")
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.ones(args.size, args.size, device=device)
    total = float((a @ a).sum())  # every entry is `size`: the sum is size cubed
    rows = [("torch", torch.__version__), ("device", device), (f"sum(ones({args.size})^2)", f"{total:g}")]
    print(f"torch {torch.__version__}")
    print(tabulate(rows, headers=("what", "value")))
    return 0 if total == args.size**3 else 1


if __name__ == "__main__":
    raise SystemExit(main())
