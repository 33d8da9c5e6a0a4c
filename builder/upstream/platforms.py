"""What the matrix says per platform (linux/amd64 from a release's top-level keys, linux/arm64 from its
`[torch.arm64]` and `[torch.variants.arm64]` sub-tables), in the shape verify and sync use."""

from __future__ import annotations

from dataclasses import dataclass

from builder.core.kinds import Platform
from builder.matrix.model import TorchRelease, TorchVariant


@dataclass(frozen=True)
class ReleasePlatform:
    """A torch release on one platform: its PyPI default variant, Python wheels and platform tag."""

    platform: Platform
    pypi_default: str
    python: tuple[str, ...]
    platform_tag: str
    key: tuple[str, ...]  # where in the release's TOML table these keys live (for file:line)


def _key(platform: Platform) -> tuple[str, ...]:
    return () if platform is Platform.AMD64 else (platform.arch,)


def release_platforms(release: TorchRelease) -> list[ReleasePlatform]:
    return [
        ReleasePlatform(w.platform, w.pypi_default, w.python, w.platform_tag, _key(w.platform)) for w in release.wheels
    ]


def variant_platforms(release: TorchRelease, variant: TorchVariant) -> list[Platform]:
    """The platforms this variant has wheels for."""
    return [b.platform for b in variant.builds if release.on(b.platform) is not None]


def local_label(variant: TorchVariant, platform: Platform) -> str | None:
    """The local version label of the variant's wheels on PyTorch's index (2.5.1+cu124); None: none."""
    build = variant.build(platform)
    return build.local if build is not None else variant.name


def variant_key(platform: Platform) -> tuple[str, ...]:
    return _key(platform)
