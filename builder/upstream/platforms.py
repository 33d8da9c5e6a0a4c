"""What the matrix says per platform, behind one small interface (the platform axis of matrix.toml is
being added: linux/amd64 from today's keys, linux/arm64 from the optional `[torch.arm64]` and
`[torch.variants.arm64]` sub-tables once the model has them)."""

from __future__ import annotations

from dataclasses import dataclass

from builder.matrix.model import TorchRelease, TorchVariant

AMD64 = "linux/amd64"
ARM64 = "linux/arm64"


@dataclass(frozen=True)
class ReleasePlatform:
    """A torch release on one platform: its PyPI default variant, Python wheels and platform tag."""

    platform: str
    pypi_default: str
    python: tuple[str, ...]
    platform_tag: str
    key: tuple[str | int, ...]  # where in the release's TOML table these keys live (for file:line)


def release_platforms(release: TorchRelease) -> list[ReleasePlatform]:
    found = [ReleasePlatform(AMD64, release.pypi_default, release.python, release.platform_tag, ())]
    arm = getattr(release, "arm64", None)  # the platform axis (planned): [torch.arm64]
    if arm is not None:
        found.append(ReleasePlatform(ARM64, arm.pypi_default, tuple(arm.python), arm.platform_tag, ("arm64",)))
    return found


def variant_platforms(release: TorchRelease, variant: TorchVariant) -> list[str]:
    """The platforms this variant has wheels for."""
    found = [AMD64]
    if getattr(variant, "arm64", None) is not None:
        found.append(ARM64)
    return found
