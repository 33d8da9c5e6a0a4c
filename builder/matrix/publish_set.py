"""The publish set: which images the organisation publishes ([[publish]] entries of publish.toml beside
matrix.toml, or of matrix.toml itself), and the shape of its CI (publish.toml's [ci] table).

Policy, not facts: entries carry no source. Each entry expands (builder/publish/items.py) to every
matching torch release x variant x Python x OS x flavor that the resolver accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from packaging.specifiers import SpecifierSet

from builder.core import safety
from builder.core.archs import Arch
from builder.core.errors import RenderError, UsageError
from builder.core.kinds import Flavor, Installer, Platform, Strategy, did_you_mean, parse_platform
from builder.matrix import reader as r
from builder.matrix.reader import Context, Entry

PYPI_DEFAULT = "pypi-default"
SYSTEM_PYTHON = "system"
E = TypeVar("E", bound=StrEnum)
_KEYS = (
    "name",
    "torch",
    "variants",
    "python",
    "os",
    "flavors",
    "strategy",
    "installer",
    "archs",
    "pip",
    "require_archs",
    "labels",
    "platforms",
)


@dataclass(frozen=True, kw_only=True)
class PublishEntry:
    name: str
    torch: SpecifierSet
    variants: tuple[str, ...]  # wheel variants, or "pypi-default"
    python: tuple[str, ...]  # minor versions, or "system" (the OS's own)
    os: tuple[str, ...]
    flavors: tuple[Flavor, ...]
    strategy: Strategy
    installer: Installer | None  # None: render's default (--installer)
    archs: tuple[Arch, ...]  # custom architecture list for compiled code; () = torch's own
    pip: tuple[str, ...]
    require_archs: tuple[Arch, ...]  # GPUs the images must carry code for, checked in the built image
    labels: tuple[tuple[str, str], ...] = ()  # the family's own labels: in the Dockerfile, not in the tags
    platforms: tuple[Platform, ...] = (Platform.AMD64,)  # more than one: each image is a multi-platform index

    @property
    def multi_platform(self) -> bool:
        return len(self.platforms) > 1


@dataclass(frozen=True, kw_only=True)
class CiDefaults:
    """publish.toml's [ci] table: what `matrix ci` exports with when its flags do not say (flags win)."""

    runner: tuple[str, ...] = ()  # the build runner's labels (linux/amd64); (): GitHub's hosted ubuntu-latest
    arm_runner: tuple[str, ...] = ()  # the linux/arm64 build runner's labels; (): GitHub's hosted arm64 runner
    gpu_runners: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (class, labels): a GPU smoke leg per class
    registry: str | None = None  # where --repo and --candidates point by default


_CI_KEYS = ("runner", "arm_runner", "gpu_runners", "registry")


def parse_ci(ctx: Context, raw: Any) -> CiDefaults:
    e = Entry(ctx, ("ci",), "ci", raw, _CI_KEYS)
    return CiDefaults(
        runner=e.get("runner", _labels_of, ()),
        arm_runner=e.get("arm_runner", _labels_of, ()),
        gpu_runners=e.get("gpu_runners", _gpu_runners, ()),
        registry=e.get("registry", _registry, None),
    )


def _registry(value: Any) -> str:
    from builder.core.names import check_repository

    try:
        return check_repository(r.text(value), "registry")
    except UsageError as exc:
        raise ValueError(str(exc)) from None


def _labels_of(value: Any) -> tuple[str, ...]:
    """A runner's labels: "ubuntu-latest", "self-hosted,gpu,a100" or ["self-hosted", "gpu", "a100"]."""
    labels = tuple(p.strip() for p in value.split(",")) if isinstance(value, str) else r.text_list(value)
    if not labels or not all(labels):
        raise ValueError(f'expected runner labels like "self-hosted,gpu,a100", found {value!r}')
    return labels


def _gpu_runners(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`gpu_runners = { ampere = "self-hosted,gpu,a100", hopper = ["self-hosted", "gpu", "h100"] }`."""
    if not isinstance(value, dict):
        raise ValueError("expected a table of class = runner labels")
    return tuple((name, _labels_of(labels)) for name, labels in value.items())


def parse_publish(ctx: Context, raw: Any) -> tuple[PublishEntry, ...]:
    if not isinstance(raw, list):
        ctx.fail(("publish",), "publish", "expected an array of tables ([[publish]])")
    entries: list[PublishEntry] = []
    for index, body in enumerate(raw):
        label = f"publish[{body.get('name', index)}]" if isinstance(body, dict) else f"publish[{index}]"
        entry = _entry(Entry(ctx, ("publish", index), label, body, _KEYS))
        if entry.name in {e.name for e in entries}:
            ctx.fail(("publish", index, "name"), label, "duplicate publish entry name")
        entries.append(entry)
    return tuple(entries)


def _entry(e: Entry) -> PublishEntry:
    return PublishEntry(
        name=e.get("name", r.text),
        torch=e.get("torch", r.spec),
        variants=e.get("variants", r.text_list, (PYPI_DEFAULT,)),
        python=e.get("python", _pythons, (SYSTEM_PYTHON,)),
        os=e.get("os", r.text_list),
        flavors=e.get("flavors", _choices(Flavor), Flavor.family()),
        strategy=e.get("strategy", _choice(Strategy), Strategy.WHEELS),
        installer=e.get("installer", _optional(_choice(Installer)), None),
        archs=e.get("archs", r.arch_list, ()),
        pip=e.get("pip", r.text_list, ()),
        require_archs=e.get("require_archs", r.arch_list, ()),
        labels=e.get("labels", _labels, ()),
        platforms=e.get("platforms", _platforms, (Platform.AMD64,)),
    )


def _platforms(value: Any) -> tuple[Platform, ...]:
    """["linux/amd64", "linux/arm64"]: each once, in Platform order (the index lists them sorted anyway)."""
    names = r.text_list(value)
    if not names:
        raise ValueError("expected at least one platform (linux/amd64, linux/arm64)")
    try:
        found = {parse_platform(name, "platform") for name in names}
    except UsageError as exc:
        raise ValueError(str(exc)) from None
    return tuple(p for p in Platform if p in found)


def _labels(value: Any) -> tuple[tuple[str, str], ...]:
    """`labels = { "org.example.team" = "vision" }`: the rules of --label (nothing a Dockerfile could misread,
    and io.torchyard.* stays torchyard's)."""
    if not isinstance(value, dict):
        raise ValueError("expected a table of label = value")
    found = []
    for key, text in value.items():
        if not isinstance(text, str):
            raise ValueError(f"label {key!r}: expected a string value")
        try:
            safety.check("label", key, safety.LABEL_KEY, "org.example.team")
            safety.check(f"label {key}", text, safety.LABEL_VALUE, "vision")
        except RenderError as exc:
            raise ValueError(str(exc)) from None
        if key.startswith("io.torchyard."):
            raise ValueError(f"label {key}: the io.torchyard. namespace is torchyard's own")
        found.append((key, text))
    return tuple(sorted(found))


def _pythons(value: Any) -> tuple[str, ...]:
    return tuple(item if item == SYSTEM_PYTHON else str(r.minor_version(item)) for item in r.text_list(value))


def _choice(kind: type[E]) -> Callable[[Any], E]:
    def convert(value: Any) -> E:
        text, allowed = r.text(value), [k.value for k in kind]
        if text not in allowed:
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}{did_you_mean(text, allowed)}")
        return kind(text)

    return convert


def _optional(convert: Callable[[Any], E]) -> Callable[[Any], E | None]:
    return convert


def _choices(kind: type[E]) -> Callable[[Any], tuple[E, ...]]:
    def convert(value: Any) -> tuple[E, ...]:
        return tuple(_choice(kind)(item) for item in r.text_list(value))

    return convert


def check_publish(
    ctx: Context, entries: tuple[PublishEntry, ...], oses: list[str], variants: set[str], archs: set[str]
) -> None:
    """References: OS bases, wheel variants and architectures the matrix knows."""
    for index, entry in enumerate(entries):
        label = f"publish[{entry.name}]"
        for name in entry.os:
            if name not in oses:
                ctx.fail(("publish", index, "os"), f"{label}.os", f"unknown OS {name!r}{did_you_mean(name, oses)}")
        for name in entry.variants:
            if name != PYPI_DEFAULT and name not in variants:
                ctx.fail(
                    ("publish", index, "variants"),
                    f"{label}.variants",
                    f"unknown variant {name!r}{did_you_mean(name, sorted(variants | {PYPI_DEFAULT}))}",
                )
        for key, listed in (("archs", entry.archs), ("require_archs", entry.require_archs)):
            for arch in listed:
                if arch.name not in archs:
                    ctx.fail(("publish", index, key), f"{label}.{key}", f"unknown architecture {arch.name!r}")
