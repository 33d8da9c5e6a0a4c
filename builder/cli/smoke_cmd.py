"""`torchyard smoke IMAGE`: the smoke suite in a container, a summary, JSON and JUnit XML."""

from __future__ import annotations

import json
from pathlib import Path

import click

from builder.build.suite import SmokeOptions, for_platform, run_smoke
from builder.cli.options import image_reference
from builder.cli.output import emit_json
from builder.core.archs import parse_arch
from builder.core.errors import BuildError, UsageError
from builder.core.files import check_writable, read_text, write_report_file
from builder.core.kinds import Platform, parse_gpus, parse_platform
from builder.engine import DockerEngine
from builder.smoke.manifest import Manifest

_EXPECT_KEYS = ("torch", "torchvision", "torchaudio", "cuda", "cudnn", "nccl", "python", "os")


@click.command("smoke")
@click.argument("image", callback=image_reference)
@click.option("--gpus", metavar="all|N|none", help="GPUs for the GPU checks (default: none; they are skipped).")
@click.option("--require-gpu", is_flag=True, help="Fail the GPU checks without a GPU instead of skipping them.")
@click.option("--arch", metavar="ARCH", help="Target architecture to check the compiled code against.")
@click.option(
    "--expect",
    "expect_file",
    metavar="FILE",
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
@click.option(
    "--platform",
    metavar="linux/amd64|linux/arm64",
    help="The image's platform (default: this machine's); another one runs emulated, with a scaled suite.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (docs/schemas.md) instead of the summary.")
@click.option("--report", "report_path", metavar="FILE", help="Write the JSON report here.")
@click.option("--junit", metavar="FILE", help="Write JUnit XML here.")
def smoke_cmd(
    image: str,
    gpus: str | None,
    require_gpu: bool,
    arch: str | None,
    expect_file: str | None,
    expect_values: tuple[str, ...],
    host_copy: bool,
    platform: str | None,
    as_json: bool,
    report_path: str | None,
    junit: str | None,
) -> None:
    """Run the smoke suite inside IMAGE (any image with Python and torch). Exit 4 when a check failed."""
    gpus = parse_gpus(gpus)  # argument errors before the engine is asked anything
    if arch is not None:
        arch = parse_arch(arch).name
    expect = _expectations(expect_values)
    if expect_file is not None:
        _check_manifest(expect_file)
    report_file = check_writable(report_path, "--report") if report_path else None
    junit_file = check_writable(junit, "--junit") if junit else None
    wanted = parse_platform(platform) if platform else Platform.here() or Platform.AMD64
    engine = DockerEngine()
    native = engine.info().platform
    found = engine.inspect(image)
    if found is None:
        raise UsageError(f"smoke: no image {image!r} in the engine (pull or build it first)")
    if found.platform != wanted.value:
        flag = "--platform" if platform else "--platform (default: this machine's)"
        raise UsageError(f"smoke: {image} is a {found.platform} image, not {wanted.value} ({flag})")
    ours = bool(found.labels.get("io.torchyard.version"))  # an empty value: relabelled, not ours
    options = SmokeOptions(
        arch=arch,
        gpus=gpus,
        require_gpu=require_gpu,
        expect=expect,
        expect_file=Path(expect_file) if expect_file else None,
        use_host_copy=host_copy,
    )
    report = run_smoke(engine, image, for_platform(options, wanted.value, native), in_image=ours)
    if as_json:
        emit_json(report.data)
    else:
        click.echo(report.output.rstrip())
    if report_file is not None:
        write_report_file(report_file, json.dumps(report.data, indent=2) + "\n")
    if junit_file is not None:
        write_report_file(junit_file, report.junit)
    if not report.ok:  # a check failed (or could not run where --require-gpu asked for it): the smoke code
        raise SystemExit(BuildError.exit_code)


def _expectations(values: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or key not in _EXPECT_KEYS:
            raise UsageError(f"--expect-value {text!r}: expected KEY=VERSION with KEY one of {', '.join(_EXPECT_KEYS)}")
        found[key] = value
    return found


def _check_manifest(path: str) -> None:
    """--expect: a manifest JSON object (what /etc/torchyard/manifest.json holds), checked before the run."""
    text = read_text(path, "--expect", limit=1 << 20)
    try:
        Manifest.from_json(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--expect {path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--expect {path}: not a torchyard manifest: {exc}") from None
