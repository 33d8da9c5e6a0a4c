"""The one redaction of secrets in text torchyard shows or writes: errors, logs, dry runs, plan.json, reports.

In every URL inside any text: the userinfo (`user:password@`) and the values of query parameters that carry
credentials (`?token=`, `access_token`, `api_key`, `X-Amz-Signature`, ...). Also `--password VALUE`-style
arguments and `Authorization:` headers, should one ever be echoed.
"""

from __future__ import annotations

import re

MASK = "***"

# scheme://[userinfo@]rest, up to the first character a URL cannot hold (whitespace, quotes, brackets). The
# scheme and the bare user name are bounded: unbounded, a long run of letters (a hostile requirements line)
# made each start position scan to its end, quadratic in the line (40 kB took 40 s).
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]{0,31}://)(?P<rest>[^\s'\"<>`\\]+)")
_USERINFO = re.compile(r"^[^/?#]*@")
_SECRET_PARAM = re.compile(
    r"(?i)^(?:.*token.*|.*secret.*|.*password.*|passwd|pwd|.*api[_-]?key.*|key|auth|authorization|sig|signature"
    r"|credential|credentials|x-amz-.*|x-goog-.*|sas|session|code)$"
)
_QUERY_PAIR = re.compile(r"([?&;])([^=&;#]+)=([^&;#]*)")
# user:password@host without a scheme (a registry or index named bare): the credentials go, the host stays.
_BARE_USERINFO = re.compile(r"(?<![\w/:@.*])[^\s'\"/@:*]{1,256}:[^\s'\"/@]+@(?=[A-Za-z0-9\[])")
_HEADER = re.compile(r"(?i)\b(authorization|proxy-authorization|x-api-key)(\s*[:=]\s*)(\S+(?:\s+\S+)?)")
_ARG = re.compile(r"(?i)(--(?:password|token|secret|api-key)[= ])(\S+)")


def redact(text: str) -> str:
    """`text` with every credential it carries replaced by ***."""
    text = _URL.sub(_redact_url, text) if "://" in text else text
    text = _BARE_USERINFO.sub(f"{MASK}@", text) if "@" in text else text
    text = _HEADER.sub(lambda m: f"{m[1]}{m[2]}{MASK}", text)
    return _ARG.sub(lambda m: f"{m[1]}{MASK}", text)


def _redact_url(match: re.Match[str]) -> str:
    rest = _USERINFO.sub(f"{MASK}@", match["rest"], count=1)
    rest = _QUERY_PAIR.sub(_redact_pair, rest)
    return match["scheme"] + rest


def _redact_pair(match: re.Match[str]) -> str:
    separator, key, value = match.groups()
    return f"{separator}{key}={MASK if value and _SECRET_PARAM.match(key) else value}"


def has_secret(text: str) -> bool:
    return redact(text) != text
