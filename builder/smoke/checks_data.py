"""dataloader: DataLoader workers (processes) hand batches over through /dev/shm, pinned when a GPU is there.

Docker gives a container 64 MiB of /dev/shm unless told otherwise, which a real training job's workers
exceed: the check names the fix (--shm-size, --ipc=host) instead of failing with a bus error.
"""

from __future__ import annotations

import os

from .framework import Context, Failed, check

SHM = "/dev/shm"
SHM_MIN = 256 << 20
FIX = "start the container with --shm-size=2g (or --ipc=host)"
# How torch words it: "Unexpected bus error encountered in worker. This might be caused by insufficient shared
# memory (shm)", "DataLoader worker (pid N) is killed by signal: Bus error", "No space left on device".
SHM_SIGNS = ("shared memory", "shm", "Bus error", "bus error", "No space left on device")


def shm_size(path: str = SHM) -> int | None:
    try:
        found = os.statvfs(path)
    except OSError:
        return None
    return found.f_blocks * found.f_frsize


class Squares:
    """Item i is a 3x64x64 tensor filled with i (a map-style dataset: picklable, deterministic)."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> object:
        import torch

        return torch.full((3, 64, 64), float(index))


@check("dataloader", timeout=120.0)
def dataloader(ctx: Context) -> str:
    import torch

    size = shm_size()
    if size is not None and size < SHM_MIN:
        raise Failed(f"{SHM} is {size >> 20} MiB, too small for DataLoader workers (needs {SHM_MIN >> 20}+): {FIX}")
    pin = bool(torch.version.cuda) and torch.cuda.is_available()
    total = 0.0
    try:
        loader = torch.utils.data.DataLoader(Squares(64), batch_size=8, num_workers=2, pin_memory=pin)
        for batch in loader:
            if pin and not batch.is_pinned():
                raise Failed("pin_memory=True, yet the batches are not in pinned memory")
            total += float(batch[:, 0, 0, 0].sum().item())
    except RuntimeError as exc:
        text = str(exc)
        if any(sign in text for sign in SHM_SIGNS):
            raise Failed(f"DataLoader workers ran out of shared memory ({text.splitlines()[0]}): {FIX}") from None
        raise
    if total != sum(range(64)):
        raise Failed(f"the workers' batches sum to {total}, expected {sum(range(64))}")
    where = f"{size >> 20} MiB /dev/shm" if size is not None else "no /dev/shm"
    return f"2 workers, 8 batches{', pinned' if pin else ''} ({where})"
