"""The torchyard.toml `torchyard init` writes: doctor's combination for this machine as an exact id, every other key
shown, commented out, with what it does (docs/project.md has the reference)."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Sequence

from builder.resolve.combos import Combination

_NAME = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?", re.ASCII)


def project_name(folder: str) -> str | None:
    """The folder's name as a project name (lowercase; None where it is not a plain name)."""
    name = folder.lower().replace(" ", "-")
    return name if _NAME.fullmatch(name) else None


def starter_text(c: Combination, name: str | None, machine: str, why: Sequence[str]) -> str:
    cuda = f"CUDA {c.variant.cuda}, cuDNN {c.variant.cudnn}" if c.variant.cuda else "CPU only"
    reasons = [wrapped for line in why for wrapped in textwrap.wrap(line, 112, initial_indent="#   ",
                                                                    subsequent_indent="#     ")]  # fmt: skip
    lines = [
        "# torchyard.toml: the image of this project (docs/project.md). Written by `torchyard init` from doctor's",
        "# answer for the machine it ran on:",
        f"#   {machine}",
        *(["# and why:", *reasons] if reasons else []),
        "# `torchyard build` builds it; torchyard.lock beside this file keeps the choice, so every machine builds",
        "# the same image; after you change [torch] or [dependencies], `torchyard build --re-resolve` chooses again.",
        "",
        "[project]",
        f"name = {json.dumps(name)}" if name else '# name = "my-model"          # lowercase letters, digits, . _ -',
        "",
        "[torch]",
        f"# torch {c.local_version} ({cuda}), Python {c.python}, {c.os.name}, {c.platform.value}.",
        f"id = {json.dumps(c.id)}",
        "# Or, instead of id, what to choose among: build chooses the best for its machine and locks it",
        "# (torchyard lookup lists the combinations):",
        '# version = ">=2.14"                # a torch release or range',
        '# variant = "cu130"                 # cu126, cu130, cpu ...',
        '# python = "3.13"',
        '# os = "debian13"',
        '# platform = "linux/amd64"          # or linux/arm64',
        'flavor = "runtime"                 # runtime | devel | inference',
        '# archs = ["sm_89"]               # GPU code for these only (default: the torch build\'s own)',
        "",
        "[dependencies]",
        '# requirements = ["requirements.txt"]   # pip requirement files of this project (torch stays pinned)',
        '# lock = "uv.lock"                      # or one lockfile instead of requirement files',
        '# pip = ["einops==0.8.1"]               # more pip requirements',
        '# system_packages = ["libgl1"]          # OS packages',
        "",
        "[image]",
        '# copy = [{ from = "src", to = "/app/src" }]   # folders of this project, and where they go in the image',
        '# workdir = "/app"',
        '# command = ["python", "-m", "app"]',
        '# env = { PYTHONUNBUFFERED = "1" }',
    ]
    return "\n".join(lines) + "\n"
