"""Refuse values that could change the meaning of a rendered Dockerfile (injection), before rendering.

Everything user-supplied that reaches a Dockerfile passes one of these checks; matrix values are
already typed (versions, archs). The patterns exclude whitespace, quotes, `$`, backticks and
backslashes outright, so no value can end a line, a quoted string or start a substitution.
"""

from __future__ import annotations

import re

from builder.errors import RenderError

_FORBIDDEN = re.compile(r"[\s'\"`$\\]")
PIP_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-\[\],<>=!~*+]*$")
LABEL_KEY = re.compile(r"^[a-z0-9][a-z0-9._\-/]*$")
LABEL_VALUE = re.compile(r"^[A-Za-z0-9._\-/:@+=,]*$")
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
URL = re.compile(r"^https?://[A-Za-z0-9._~:/?#@!&*+,;=%\-]+$")
IMAGE_REF = re.compile(r"^[a-z0-9][a-z0-9._\-/:@]*$")


def check(field: str, value: str, pattern: re.Pattern[str], example: str) -> str:
    """Return `value` if it is safe for `field`; else one RenderError naming the field and the problem."""
    bad = _FORBIDDEN.search(value)
    if bad:
        raise RenderError(f"{field}: {value!r} contains {_describe(bad.group())}, which is not allowed in a Dockerfile")
    if not pattern.match(value):
        raise RenderError(f"{field}: {value!r} is not a valid value (example: {example})")
    return value


def _describe(char: str) -> str:
    names = {
        "\n": "a newline",
        "\r": "a carriage return",
        "\t": "a tab",
        " ": "a space",
        "'": "a quote",
        '"': "a quote",
        "`": "a backtick",
        "$": "'$' (shell substitution)",
        "\\": "a backslash",
    }
    return names.get(char, f"the character {char!r}")


def check_url_without_credentials(field: str, value: str) -> str:
    check(field, value, URL, "https://mirror.example.com/debian")
    if "@" in value.split("://", 1)[1].split("/", 1)[0]:
        raise RenderError(
            f"{field}: credentials in this URL would land in the image history; use a mirror "
            "without them (pip index credentials go through --pip-index-url, a BuildKit secret)"
        )
    return value
