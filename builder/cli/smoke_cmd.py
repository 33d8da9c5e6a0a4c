"""`torchyard smoke IMAGE`: the smoke suite in a container, a summary, JSON and JUnit XML."""

from __future__ import annotations

import json
from pathlib import Path

import click

from builder.cli.options import image_reference
from builder.engine import DockerEngine
from builder.errors import UsageError
from builder.kinds import parse_gpus
from builder.suite import SmokeOptions, run_smoke

_EXPECT_KEYS = ("torch", "torchvision", "torchaudio", "cuda", "cudnn", "nccl", "python", "os")


@click.command("smoke")
@click.argument("image", callback=image_reference)
@click.option("--gpus", metavar="all|N|none", help="GPUs for the GPU checks (default: none; they are skipped).")
@click.option("--require-gpu", is_flag=True, help="Fail the GPU checks without a GPU instead of skipping them.")
@click.option("--arch", metavar="ARCH", help="Target architecture to check the compiled code against.")
@click.option(
    "--expect",
    "expect_file",
    type=click.Path(dir_okay=False, exists=True),
    help="Expected versions as a manifest JSON (default: the image's own /etc/torchyard/manifest.json).",
)
@click.option(
    "--expect-value",
    "expect_values",
    multiple=True,
    metavar="KEY=VERSION",
    help=f"Override one expectation ({', '.join(_EXPECT_KEYS)}); repeatable.",
)
@click.option("--host-copy", is_flag=True, help="Mount this torchyard's suite instead of the image's copy.")
@click.option("--json", "json_path", metavar="FILE", help="Write the JSON report here.")
@click.option("--junit", metavar="FILE", help="Write JUnit XML here.")
def smoke_cmd(
    image: str,
    gpus: str | None,
    require_gpu: bool,
    arch: str | None,
    expect_file: str | None,
    expect_values: tuple[str, ...],
    host_copy: bool,
    json_path: str | None,
    junit: str | None,
) -> None:
    """Run the smoke suite inside IMAGE (any image with Python and torch)."""
    gpus = parse_gpus(gpus)
    expect = _expectations(expect_values)  # argument errors before the engine is asked anything
    engine = DockerEngine()
    engine.info()
    found = engine.inspect(image)
    if found is None:
        raise UsageError(f"smoke: no image {image!r} in the engine (pull or build it first)")
    ours = bool(found.labels.get("io.torchyard.version"))  # an empty value: relabelled, not ours
    options = SmokeOptions(
        arch=arch,
        gpus=gpus,
        require_gpu=require_gpu,
        expect=expect,
        expect_file=Path(expect_file) if expect_file else None,
        use_host_copy=host_copy,
    )
    report = run_smoke(engine, image, options, in_image=ours)
    click.echo(report.output.rstrip())
    if json_path:
        Path(json_path).write_text(json.dumps(report.data, indent=2) + "\n")
    if junit:
        Path(junit).write_text(report.junit)
    if not report.ok:
        raise SystemExit(1)


def _expectations(values: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or key not in _EXPECT_KEYS:
            raise UsageError(f"--expect-value {text!r}: expected KEY=VERSION with KEY one of {', '.join(_EXPECT_KEYS)}")
        found[key] = value
    return found
