"""The one Jinja2 environment: StrictUndefined, trailing newlines kept, templates from templates/."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from builder.core.resources import templates_path

if TYPE_CHECKING:
    import jinja2


@cache  # one environment per process: it caches compiled templates (a fresh one recompiles each time)
def make_env() -> jinja2.Environment:
    import jinja2  # on first render, not on import: `torchyard build --help` stays fast

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_path())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # Dockerfiles, not HTML; every value is checked by builder.core.safety
    )


def render_dockerfile(context: dict[str, Any]) -> str:
    return tidy(make_env().get_template("Dockerfile.j2").render(**context))


def tidy(text: str) -> str:
    """Collapse the blank lines optional blocks leave behind: deterministic, readable output."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.strip() or (lines and lines[-1].strip()):
            lines.append(line.rstrip())
    return "\n".join(lines).rstrip() + "\n"
