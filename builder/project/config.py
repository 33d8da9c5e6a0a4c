"""torchyard.toml, parsed once into frozen types: what a project asks of its image. Every problem is one
`file:line: key: message` line (exit 2): an unknown key (with "did you mean" and what the table takes), a bad
value, a path outside the project. What the matrix decides (known variants, a combination id, a contradiction
between the pins) is checked by builder.project.check."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.core.archs import parse_arch
from builder.core.kinds import Flavor, parse_choice, parse_platform
from builder.core.versions import parse_spec, torch_build_parts
from builder.project.paths import image_path, in_project, own_file
from builder.project.read import ProjectContext, Table, flag_value, open_toml, string, strings

FILE = "torchyard.toml"
TOP = ("project", "torch", "dependencies", "image")
TORCH_KEYS = ("id", "version", "variant", "python", "os", "platform", "flavor", "archs")
CHOICE_KEYS = ("version", "variant", "python", "os", "platform")  # what an exact id already answers
_NAME = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?", re.ASCII)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_NONE: tuple[str, ...] = ()
_DEB_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?", re.ASCII)


@dataclass(frozen=True, kw_only=True)
class TorchWish:
    """[torch]: an exact combination (`id`), or what to choose among (version, variant, python, os, platform); the
    texts as written (parsed to check them), None where the file leaves the choice open."""

    id: str | None = None
    version: str | None = None
    variant: str | None = None
    python: str | None = None
    os: str | None = None
    platform: str | None = None
    flavor: Flavor = Flavor.RUNTIME
    archs: tuple[str, ...] = ()  # empty: the torch build's own architectures


@dataclass(frozen=True)
class Copy:
    """[[image.copy]] / copy = [{from, to}]: a file or folder of the project, and where it goes in the image."""

    source: str  # relative to the project's root, inside it
    to: str  # an absolute path in the image


@dataclass(frozen=True, kw_only=True)
class Dependencies:
    requirements: tuple[str, ...] = ()  # pip requirement files of the project (relative to its root)
    lock: str | None = None  # one lockfile instead (uv.lock, pylock.toml)
    pip: tuple[str, ...] = ()  # more pip requirements, as --pip takes them
    system_packages: tuple[str, ...] = ()  # OS packages (apt names, optionally =version)


@dataclass(frozen=True, kw_only=True)
class ImageSettings:
    """[image]: what the project puts in its image (parsed and checked here; laid out by the project image)."""

    copy: tuple[Copy, ...] = ()
    workdir: str | None = None
    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class ProjectConfig:
    file: Path  # the torchyard.toml
    name: str | None
    torch: TorchWish
    dependencies: Dependencies
    image: ImageSettings
    source: ProjectContext = field(repr=False, compare=False)  # its text, to locate later errors

    @property
    def root(self) -> Path:
        return self.file.parent


def load_project(file: Path) -> ProjectConfig:
    own_file(file)
    ctx, doc = open_toml(file, "a TOML file")
    Table(ctx, (), "", doc, TOP)  # an unknown table is refused before the others are read
    tables = {key: Table(ctx, (key,), key, doc.get(key, {}), allowed) for key, allowed in TABLES.items()}
    root = file.parent
    return ProjectConfig(
        file=file,
        name=tables["project"].get("name", _name, None),
        torch=_torch(tables["torch"]),
        dependencies=_dependencies(tables["dependencies"], root),
        image=_image(ctx, tables["image"], root),
        source=ctx,
    )


TABLES = {
    "project": ("name",),
    "torch": TORCH_KEYS,
    "dependencies": ("requirements", "lock", "pip", "system_packages"),
    "image": ("copy", "workdir", "command", "env"),
}


def _torch(t: Table) -> TorchWish:
    return TorchWish(
        id=t.get("id", string, None),
        version=t.get("version", _torch_version, None),
        variant=t.get("variant", string, None),
        python=t.get("python", _python, None),
        os=t.get("os", string, None),
        platform=t.get("platform", flag_value(lambda s: parse_platform(s, "platform").value), None),
        flavor=t.get("flavor", flag_value(lambda s: parse_choice(Flavor, s, "flavor")), Flavor.RUNTIME),
        archs=t.get("archs", _archs, _NONE),
    )


def _python(value: Any) -> str:
    text = string(value).strip()
    flag_value(lambda s: parse_spec(s, "python"))(text)
    return text


def _torch_version(value: Any) -> str:
    text = string(value).strip()
    build = torch_build_parts(text)
    if build is not None:
        raise ValueError(f"{text!r} is torch.__version__ of one build: version = {build[0]!r}, variant = {build[1]!r}")
    flag_value(lambda s: parse_spec(s, "version"))(text)
    return text


def _archs(value: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(flag_value(lambda s: parse_arch(s).name)(item) for item in strings(value)))


def _name(value: Any) -> str:
    text = string(value)
    if not _NAME.fullmatch(text):
        raise ValueError(f"{text!r}: a name is lowercase letters, digits, '.', '_', '-' (like my-model)")
    return text


def _dependencies(t: Table, root: Path) -> Dependencies:
    requirements = t.get("requirements", lambda v: tuple(in_project(root, "file")(i) for i in strings(v)), _NONE)
    lock = t.get("lock", in_project(root, "file"), None)
    if requirements and lock is not None:
        t.fail_key("lock", "give requirements files or one lockfile, not both")
    return Dependencies(
        requirements=requirements,
        lock=lock,
        pip=t.get("pip", lambda v: tuple(_requirement(i) for i in strings(v)), _NONE),
        system_packages=t.get("system_packages", lambda v: tuple(_package(i) for i in strings(v)), _NONE),
    )


def _requirement(text: str) -> str:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(text)
    except InvalidRequirement:
        raise ValueError(f"{text!r} is not a pip requirement (like 'numpy>=2' or 'einops==0.8.1')") from None
    return text


def _package(text: str) -> str:
    if not _DEB_PACKAGE.fullmatch(text):
        raise ValueError(f"{text!r} is not an OS package name (like libgl1, or ffmpeg=7:7.1.1-1)")
    return text


def _image(ctx: ProjectContext, t: Table, root: Path) -> ImageSettings:
    copies: list[Any] = t.get("copy", lambda v: v if isinstance(v, list) else _not_list(v), [])
    return ImageSettings(
        copy=tuple(_copy(ctx, i, item, root) for i, item in enumerate(copies)),
        workdir=t.get("workdir", image_path, None),
        command=t.get("command", _command, _NONE),
        env=_env(ctx, t.raw["env"]) if "env" in t.raw else (),
    )


def _not_list(value: Any) -> Any:
    raise ValueError(f"expected a list of {{from = ..., to = ...}} tables, found {value!r}")


def _copy(ctx: ProjectContext, i: int, raw: Any, root: Path) -> Copy:
    entry = Table(ctx, ("image", "copy", i), f"image.copy[{i}]", raw, ("from", "to"))
    return Copy(entry.get("from", in_project(root, "any")), entry.get("to", image_path))


def _command(value: Any) -> tuple[str, ...]:
    found = strings(value)
    if not found:
        raise ValueError('expected the command as a non-empty list of words, like ["python", "-m", "app"]')
    return found


def _env(ctx: ProjectContext, raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, dict):
        ctx.fail(("image", "env"), "image.env", f'expected a table of NAME = "value", found {raw!r}')
    for name, value in raw.items():
        if not _ENV_NAME.fullmatch(name):
            ctx.fail(("image", "env", name), f"image.env.{name}", "a variable name is letters, digits and _")
        if not isinstance(value, str) or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            ctx.fail(("image", "env", name), f"image.env.{name}", f"expected a one-line string, found {value!r}")
    return tuple(sorted(raw.items()))
