"""Facts read from wheels beyond torch's own: [[nvidia_wheel]] (the platform tags of the NVIDIA library wheels
torch's pins install: their glibc floors) and the checks that tie them, and [onnxruntime.<platform>] (the GPU code
of ONNX Runtime's CUDA provider), to the rest of the file."""

from __future__ import annotations

import re
from typing import Any

from packaging.version import Version

from builder.core.kinds import did_you_mean
from builder.matrix import reader as r
from builder.matrix.locate import KeyPath
from builder.matrix.model import Matrix, NvidiaWheel
from builder.matrix.reader import Context, Entry

# PEP 600 and the legacy aliases (PEP 513 / 571 / 599), for the machines torch publishes Linux wheels for.
_TAG = re.compile(r"^manylinux(1|2010|2014|_\d+_\d+)_(x86_64|aarch64)$", re.ASCII)


def nvidia_wheel(e: Entry) -> NvidiaWheel:
    tags = e.get("platform_tags", r.text_list)
    machines = []
    for tag in tags:
        found = _TAG.match(tag)
        if found is None:
            e.fail_key("platform_tags", f"{tag!r} is not a manylinux tag of x86_64 or aarch64 wheels")
        machines.append(found[2])
    if not tags or len(set(machines)) != len(machines):
        e.fail_key("platform_tags", "expected one tag per machine (x86_64, aarch64)")
    return NvidiaWheel(
        package=e.get("package", r.text),
        versions=e.get("versions", _versions),
        platform_tags=tags,
        via=e.get("via", r.text, ""),
        note=e.get("note", r.text, ""),
        sources=e.get("source", r.sources),
    )


def _versions(value: Any) -> tuple[Version, ...]:
    found = tuple(r.version(item) for item in r.text_list(value))
    if not found:
        raise ValueError("expected at least one release")
    return found


def ident(w: NvidiaWheel) -> str:
    return f"{w.package}=={','.join(map(str, w.versions))}"


def check_wheel_facts(ctx: Context, m: Matrix) -> None:
    """Each cited source exists; a release of an NVIDIA package has one entry; an ONNX Runtime's GPU code names
    architectures the file knows (their base: sm_121a needs sm_121)."""
    _check_nvidia_wheels(ctx, m)
    bases = {a.arch.base for a in m.archs}
    for i, ort in enumerate(m.onnxruntime):
        for code in ort.code:
            path, label = ("onnxruntime", i, code.platform.arch), f"onnxruntime[{ort.version}].{code.platform.arch}"
            _cited(ctx, m, (*path, "source"), f"{label}.source", code.sources)
            for key, archs in (("sass", code.sass), ("ptx", code.ptx)):
                unknown = [a.name for a in archs if a.base not in bases]
                if unknown:
                    ctx.fail((*path, key), f"{label}.{key}", f"no [[arch]] for {', '.join(unknown)}")


def _check_nvidia_wheels(ctx: Context, m: Matrix) -> None:
    seen: dict[tuple[str, Version], int] = {}
    for i, wheel in enumerate(m.nvidia_wheels):
        label = f"nvidia_wheel[{wheel.package}]"
        _cited(ctx, m, ("nvidia_wheel", i, "source"), f"{label}.source", wheel.sources)
        for version in wheel.versions:
            first = seen.setdefault((wheel.package, version), i)
            if first != i:
                line = ctx.locator.line_of(("nvidia_wheel", first))
                ctx.fail(("nvidia_wheel", i, "versions"), f"{label}.versions", f"{version} is also at line {line}")


def _cited(ctx: Context, m: Matrix, path: KeyPath, label: str, cited: tuple[str, ...]) -> None:
    if not cited:
        ctx.fail(path, label, "every fact needs at least one source")
    for source in cited:
        if source not in m.sources:
            ctx.fail(path, label, f"unknown source {source!r}{did_you_mean(source, m.sources)}")
