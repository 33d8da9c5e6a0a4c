"""Refuse values that could change the meaning of a rendered Dockerfile (injection), before rendering. A low
module (errors and redact only): the matrix reader checks a publish entry's labels with it too.

Everything user-supplied that reaches a Dockerfile passes one of these checks; matrix values are
already typed (versions, archs). The patterns exclude whitespace, quotes, `$`, backticks and
backslashes outright, so no value can end a line, a quoted string or start a substitution.
"""

from __future__ import annotations

import re

from builder.core.errors import RenderError
from builder.core.redact import redact as redact_text

_FORBIDDEN = re.compile(r"[\s'\"`$\\]")
PIP_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-\[\],<>=!~*+]*$")
LABEL_KEY = re.compile(r"^[a-z0-9][a-z0-9._\-/]*$")
LABEL_VALUE = re.compile(r"^[A-Za-z0-9._\-/:@+=,]*$")
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
URL = re.compile(r"^https?://[A-Za-z0-9._~:/?#@!&*+,;=%\-]+$")
IMAGE_REF = re.compile(r"^[a-z0-9][a-z0-9._\-/:@]*$")


def check(field: str, value: str, pattern: re.Pattern[str], example: str, *, shown: str | None = None) -> str:
    """Return `value` if it is safe for `field`; else one RenderError naming the field and the problem.

    `shown` is what the message quotes instead of the value (a URL with its credentials redacted)."""
    quoted = _quote(value if shown is None else shown)
    bad = _FORBIDDEN.search(value)
    if bad:
        raise RenderError(f"{field}: {quoted} contains {_describe(bad.group())}, which is not allowed in a Dockerfile")
    if not pattern.match(value):
        raise RenderError(f"{field}: {quoted} is not a valid value (example: {example})")
    return value


QUOTED_MAX = 120  # characters of a bad value an error line quotes (a hostile file's line may be 40 kB)


def _quote(value: str) -> str:
    if len(value) <= QUOTED_MAX:
        return repr(value)
    return f"{value[:QUOTED_MAX]!r}... ({len(value)} characters)"


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


_USERINFO = re.compile(r"^((?:[A-Za-z][A-Za-z0-9+.\-]*://)?)[^/?#]*@", re.DOTALL)


def redact(url: str) -> str:
    """One URL as a value (a flag's, an environment variable's) with its credentials replaced by ***: the
    userinfo also without a scheme (a check is about to refuse such a value), then whatever builder.core.redact
    finds (query-string tokens)."""
    return redact_text(_USERINFO.sub(r"\1***@", url, count=1))


def check_url(field: str, value: str, example: str) -> str:
    """A URL that may hold credentials (it only travels in a BuildKit secret); messages redact them."""
    return check(field, value, URL, example, shown=redact(value))


def check_url_without_credentials(field: str, value: str, *, where: str, example: str) -> str:
    """A URL that reaches the Dockerfile or a build arg: no credentials (they would land in `where`)."""
    check(field, value, URL, example, shown=redact(value))
    if redact(value) != value:
        raise RenderError(
            f"{field}: credentials in this URL would land in {where}; use one without them "
            "(pip index credentials go through --pip-index-url, a BuildKit secret)"
        )
    return value


def check_apt_mirror(field: str, value: str) -> str:
    """The apt mirror replaces the distribution's origin (scheme and host) in the sources through a
    plain build arg: no credentials, and a bare base URL (in the sed replacement that rewrites the
    sources, `&` would stand for the matched origin)."""
    check_url_without_credentials(field, value, where="the image history", example="http://mirror.example.com")
    if any(c in value for c in "?#&"):
        raise RenderError(
            f"{field}: {redact(value)!r} must be a base URL without a query or fragment (http://mirror.example.com)"
        )
    return value
