"""`torchyard smoke IMAGE`: the smoke suite in a container, a summary, JSON and JUnit XML."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import click

from builder.cli.options import image_reference
from builder.cli.output import emit_json
from builder.cli.request import takes
from builder.core.archs import parse_arch
from builder.core.errors import BuildError, UsageError
from builder.core.files import check_writable, read_text, write_report_file
from builder.core.kinds import Platform, parse_gpus, parse_platform
from builder.engine import DockerEngine
from builder.pipeline.hygiene_allowlist import Accepted, read_hygiene_allowlist
from builder.pipeline.suite import SmokeOptions, for_platform, run_smoke
from builder.smoke.manifest import Manifest
from builder.smoke.runner import load_checks, unknown_prefix

_EXPECT_KEYS = ("torch", "torchvision", "torchaudio", "cuda", "cudnn", "nccl", "python", "os")


@dataclass(frozen=True, kw_only=True)
class SmokeFlags:
    """`torchyard smoke`'s flags; the arguments are checked here, before the engine is asked anything."""

    image: str
    gpus: str | None
    require_gpu: bool
    arch: str | None
    expect_file: str | None
    expect_values: tuple[str, ...]
    host_copy: bool
    platform: str | None
    as_json: bool
    report_path: str | None
    junit: str | None
    only: tuple[str, ...] = ()
    hygiene_allowlist: str | None = None
    wanted: Platform = field(init=False)  # --platform, else this machine's
    accepted: tuple[Accepted, ...] = field(init=False)  # --hygiene-allowlist's entries, read once here

    def __post_init__(self) -> None:
        parse_gpus(self.gpus)
        if self.arch is not None:  # 8.9 and sm_89 alike: the suite gets the name
            object.__setattr__(self, "arch", parse_arch(self.arch).name)
        _expectations(self.expect_values)
        if self.only:
            _check_prefixes(self.only)
        wanted = parse_platform(self.platform) if self.platform else Platform.here() or Platform.AMD64
        object.__setattr__(self, "wanted", wanted)
        path = self.hygiene_allowlist
        object.__setattr__(self, "accepted", read_hygiene_allowlist(path) if path else ())

    def options(self) -> SmokeOptions:
        return SmokeOptions(
            arch=self.arch,
            gpus=self.gpus,
            require_gpu=self.require_gpu,
            expect=_expectations(self.expect_values),
            expect_file=Path(self.expect_file) if self.expect_file else None,
            use_host_copy=self.host_copy,
            only=self.only,
            accepted=self.accepted,
        )


def _check_prefixes(prefixes: tuple[str, ...]) -> None:
    """--only names checks by the start of their names (docs/smoke.md); the in-image suite refuses the same ones."""
    bad = unknown_prefix(prefixes)
    if bad == "":
        raise UsageError("--only '': an empty prefix names no check (leave --only out to run every check)")
    if bad is not None:
        groups = sorted({c.name.split(".")[0] + "." for c in load_checks() if "." in c.name})
        raise UsageError(f"--only {bad!r}: no check's name starts with it (e.g. {', '.join(groups)})")


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
@click.option(
    "--only",
    "only",
    multiple=True,
    metavar="PREFIX",
    help="Run only the checks whose names start with PREFIX (repeatable): gpu., version.torch, ...",
)
@click.option(
    "--hygiene-allowlist",
    metavar="FILE",
    help="The hygiene checks' accepted exceptions, each with an expiry date (docs/contract.md).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (docs/schemas.md) instead of the summary.")
@click.option("--report", "report_path", metavar="FILE", help="Write the JSON report here.")
@click.option("--junit", metavar="FILE", help="Write JUnit XML here.")
@takes(SmokeFlags)
def smoke_cmd(flags: SmokeFlags) -> None:
    """Run the smoke suite inside IMAGE (any image with Python and torch). Exit 4 when a check failed."""
    if flags.expect_file is not None:
        _check_manifest(flags.expect_file)
    report_file = check_writable(flags.report_path, "--report") if flags.report_path else None
    junit_file = check_writable(flags.junit, "--junit") if flags.junit else None
    engine = DockerEngine()
    native = engine.info().platform
    ours = _check_image(engine, flags)
    report = run_smoke(engine, flags.image, for_platform(flags.options(), flags.wanted.value, native), in_image=ours)
    if flags.as_json:
        emit_json(report.data)
    else:
        click.echo(report.output.rstrip())
    if report_file is not None:
        write_report_file(report_file, json.dumps(report.data, indent=2) + "\n")
    if junit_file is not None:
        write_report_file(junit_file, report.junit)
    if not report.ok:  # a check failed (or could not run where --require-gpu asked for it): the smoke code
        raise SystemExit(BuildError.exit_code)


def _check_image(engine: DockerEngine, flags: SmokeFlags) -> bool:
    """The image is in the engine and of the platform asked for; whether torchyard made it."""
    found = engine.inspect(flags.image)
    if found is None:
        raise UsageError(f"smoke: no image {flags.image!r} in the engine (pull or build it first)")
    if found.platform != flags.wanted.value:
        flag = "--platform" if flags.platform else "--platform (default: this machine's)"
        raise UsageError(f"smoke: {flags.image} is a {found.platform} image, not {flags.wanted.value} ({flag})")
    return bool(found.labels.get("io.torchyard.version"))  # an empty value: relabelled, not ours


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
