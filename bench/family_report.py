"""bench/family_bench.py's results as the Markdown of docs/benchmarks.md."""

from __future__ import annotations

from typing import Any

GB, MB = 1e9, 1e6
GOALS = {"push": 0.25, "pull": 0.25, "cold": 0.8, "size": 1.02}


def _verdict(value: float, goal: float) -> str:
    return "met" if value <= goal else "missed"


def _stages(stages: dict[str, float]) -> str:
    return ", ".join(f"{name} {seconds:.0f} s" for name, seconds in stages.items() if seconds >= 0.5)


def _differ(pip: dict[str, Any]) -> str:
    return "" if pip["same_packages"] else f"; only with pip: {pip['only_pip']}, only with uv: {pip['only_uv']}"


def _cold_lines(first: dict[str, Any], tut: dict[str, Any] | None, pip: dict[str, Any] | None, count: int) -> list[str]:
    if tut is None or pip is None:
        return [f"- Cold builds: not run (--sharing-only). Stages of the first image: {_stages(first['stages'])}."]
    cold = first["seconds"] / tut["seconds"]
    return [
        f"- Cold build: torchyard {first['seconds']:.0f} s (smoke suite included) / tutorial {tut['seconds']:.0f} s "
        f"= {cold:.2f} (goal <= 0.8: {_verdict(cold, GOALS['cold'])}). Stages: {_stages(first['stages'])}.",
        f"- `--installer pip`, cold, up to the same point of the build (its build stage): {pip['seconds']:.0f} s "
        f"({_stages(pip['stages'])}), against uv's build stage {first['stages'].get('build', 0):.0f} s and "
        f"{first['stages'].get('uv', 0):.0f} s for uv itself. The same distributions, versions included: "
        f"{'yes' if pip['same_packages'] else 'NO'} ({count}, pip itself aside{_differ(pip)}).",
    ]


def markdown(r: dict[str, Any]) -> str:
    first, same, other, devel = (dict(i) for i in r["images"])
    pip, tut = r.get("pip"), r.get("tutorial")  # None: --sharing-only
    part = r["payload"]
    payload = part["base"] + part["apt"] + part["venv"]
    lines = [
        "Command: `sudo .venv/bin/python bench/family_bench.py --markdown` (cold: in the bench's own dockerd, its "
        "cache pruned before; each image after the first from an empty build cache too, as a later publish run on "
        "another machine builds it).",
        "",
        "| image | build (with smoke) | size | compressed | pushed | pushed / compressed | pull after the ones above |",
        "|---|---|---|---|---|---|---|",
    ]
    for image, note in ((first, "first, cold"), (same, "same NVIDIA pins"), (other, "other cuDNN/NCCL")):
        pulled = (
            ""
            if image["pulled"] is None
            else f"{image['pulled'] / MB:,.0f} MB ({image['pulled'] / image['compressed']:.1%})"
        )
        lines.append(
            f"| {image['torch']} {image['flavor']}{f' ({note})' if note else ''} | {image['seconds']:.0f} s "
            f"| {image['size'] / GB:.2f} GB | {image['compressed'] / GB:.2f} GB | {image['pushed'] / MB:,.0f} MB "
            f"| {image['pushed'] / image['compressed']:.1%} | {pulled} |"
        )
    push_ratio = same["pushed"] / same["compressed"]
    pull_ratio = (same["pulled"] or 0) / same["compressed"]
    size_ratio = first["size"] / payload
    lines += [
        "",
        f"- Following image with the same NVIDIA pins pushes {push_ratio:.1%} of its compressed size "
        f"(goal < 25 %: {_verdict(push_ratio, GOALS['push'])}); a pull of it after {first['torch']} downloads "
        f"{pull_ratio:.1%} ({_verdict(pull_ratio, GOALS['pull'])}).",
        *_cold_lines(first, tut, pip, len(r["uv_packages"])),
        _os_line(r["images"]),
        f"- Size: {first['size'] / GB:.2f} GB = {size_ratio:.3f} x (base {part['base'] / MB:.0f} MB + os packages "
        f"{part['apt'] / MB:.0f} MB + venv {part['venv'] / GB:.2f} GB by du; the venv's layers "
        f"{part['venv_layers'] / GB:.2f} GB) (goal <= 1.02: {_verdict(size_ratio, GOALS['size'])})"
        + (f"; the tutorial image {tut['size'] / GB:.2f} GB." if tut else "."),
        f"- devel / runtime: {devel['size'] / GB:.2f} GB / {first['size'] / GB:.2f} GB = "
        f"{devel['size'] / first['size']:.2f}.",
    ]
    return "\n".join(lines)


def _os_line(images: list[dict[str, Any]]) -> str:
    """Whether the following images, built from an empty cache, got the first one's os layer (the same bytes)."""
    first, *rest = [i for i in images if i["flavor"] == "runtime"]
    same = {i["torch"]: i["os_layer"] == first["os_layer"] for i in rest}
    return f"- Built from an empty build cache, the os layer is the same bytes as {first['torch']}'s: {same}."
