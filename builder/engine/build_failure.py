"""Why a build failed, in one line: the failing step (its stage, its number and a short form of its instruction),
the cause recognised in that step's own output with what to do about it, and the step's last lines of output.

The causes, most specific first: a full disk, an untrusted TLS certificate, a name that does not resolve, a
connection that fails (refused, unreachable, timed out), an index or registry refusing the credentials (HTTP
401/403), a base image that is not there, a requirement no index has, requirements that conflict. pip reports
a network failure as "No matching distribution found" after its retries, so the network causes come first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from builder.engine.buildkit_log import BuildkitLog, Step

QUOTED = 3  # lines of the step's output in the message
LINE_WIDTH = 120  # characters of each, the middle cut out of longer ones


@dataclass(frozen=True)
class Cause:
    what: str  # "cannot connect to 127.0.0.1:9 (connection refused)"
    hint: str  # what to do about it


def explain(log: BuildkitLog, returncode: int) -> str:
    step = log.failed_step()
    if step is None:  # the client failed before BuildKit ran a step, or the output is not BuildKit's
        errors = [line for line in log.other if line.startswith("ERROR")]
        last = (errors or list(log.other) or [""])[-1]
        said = f' and named no failing step: "{_cut(last)}"' if last else " without output"
        return f"docker build failed (exit {returncode}){said}"
    code = f" (exit code {step.exit_code})" if step.exit_code is not None else ""
    others = log.others_failed()
    where = f"build step {step.short()} failed{code}" + (f" ({others} more failed)" if others else "")
    cause = classify(step)
    quoted = " | ".join(f'"{_cut(line)}"' for line in step.last_lines(QUOTED))
    told = f"{where}: {cause.what}; {cause.hint}" if cause else where
    return f"{told}. Last output: {quoted}" if quoted else f"{told}, without output"


def classify(step: Step) -> Cause | None:
    lines = [*step.output, step.own_error][::-1]  # the last line that says it is the one nearest the failure
    for pattern, rule in _RULES:
        for line in lines:
            found = pattern.search(line)
            cause = rule(step, line, found) if found else None
            if cause is not None:
                return cause
    return None


# --- the causes ------------------------------------------------------------------------------------------------------


HINTS = {
    "no space": "usually the disk where Docker keeps its data: see docker system df; docker builder prune frees "
    "build cache",
    "tls": "give the CA bundle that signs it: --ca-bundle FILE (or PIP_CERT=FILE in the environment)",
    "tls pull": "the engine pulls base images itself: put the CA that signs it in /etc/docker/certs.d/{host}/ca.crt",
    "dns": 'check the name, and the DNS the engine gives builds ("dns" in /etc/docker/daemon.json); or use a mirror '
    "(--pip-index-url, --torch-index-url, --apt-mirror, --registry-mirror)",
    "connect": "check that the server there (index, mirror, proxy or registry) is up and reachable from the build",
    "loopback": "; in a RUN step {host} is the build container itself, not this machine",
    "auth": "check the index credentials: --pip-index-url https://USER:TOKEN@HOST/simple (or PIP_INDEX_URL)",
    "auth pull": "log in to it: docker login {host} (the docker CLI gives the build its logins)",
    "base": "check its name and tag (with --registry-mirror: that the mirror holds it); a private image needs docker "
    "login",
    "not found": "check the name and version (--pip, --requirements), and that the index serves it (--pip-index-url)",
    "pip": "; pip says the same of an index that refuses its credentials",
    "conflict": "loosen or drop the conflicting requirement (--pip, --requirements); torch, torchvision and "
    "torchaudio stay pinned by constraints.txt",
}


def _no_space(step: Step, line: str, found: re.Match[str]) -> Cause:
    return Cause("no space left on device", HINTS["no space"])


def _tls(step: Step, line: str, found: re.Match[str]) -> Cause:
    host = _host(step, line, _HOST_PORT) or "the server"
    hint = HINTS["tls pull"].format(host=host) if step.pulls_image else HINTS["tls"]
    return Cause(f"the TLS certificate of {host} is not trusted", hint)


def _dns(step: Step, line: str, found: re.Match[str]) -> Cause:
    return Cause(f"cannot resolve {_host(step, line, _NAMED, port=False) or 'a host name'} (DNS)", HINTS["dns"])


def _connect(step: Step, line: str, found: re.Match[str]) -> Cause:
    host = _host(step, line, _HOST_PORT)
    reason = next(name for word, name in _REASONS if word in found[0].lower())
    name = host.rsplit(":", 1)[0] if ":" in host else host
    loopback = name in ("127.0.0.1", "localhost") and not step.pulls_image
    hint = HINTS["connect"] + (HINTS["loopback"].format(host=name) if loopback else "")
    return Cause(f"cannot connect to {host or 'a server'} ({reason})", hint)


def _auth(step: Step, line: str, found: re.Match[str]) -> Cause:
    host = _host(step, line, ()) or "the server"
    code = re.search(r"\b(401|403)\b", line)
    status = code[1] if code else ("403" if re.search(r"(?i)forbidden|denied", line) else "401")
    what = f"{host} refused the request (HTTP {status} {'Forbidden' if status == '403' else 'Unauthorized'})"
    return Cause(what, HINTS["auth pull"].format(host=host) if step.pulls_image else HINTS["auth"])


def _missing_base(step: Step, line: str, found: re.Match[str]) -> Cause | None:
    if not step.pulls_image:  # "sh: 1: nvcc: not found" is no image's
        return None
    named = re.search(r"(?:load metadata for|FROM) (\S+)", step.header)
    return Cause(f"base image {named[1].split('@')[0] if named else '(unnamed)'} not found", HINTS["base"])


def _not_found(step: Step, line: str, found: re.Match[str]) -> Cause:
    hint = HINTS["not found"] + (HINTS["pip"] if "No matching distribution" in line else "")
    requirement = next(group for group in found.groups() if group)
    return Cause(f"no version of {requirement} on the package index", hint)


def _conflict(step: Step, line: str, found: re.Match[str]) -> Cause:
    return Cause(f"the requirements conflict: {_conflict_detail(step)}", HINTS["conflict"])


def _conflict_detail(step: Step) -> str:
    lines = [line.strip() for line in step.output if line.strip()]
    text = " ".join(lines)
    pip = re.search(r"Cannot install (.+?) because these package versions have conflicting dependencies", text)
    if pip:
        after = lines.index("The conflict is caused by:") + 1 if "The conflict is caused by:" in lines else 0
        why = "; ".join(lines[after : after + 2]) if after else ""
        return pip[1] + (f" ({_cut(why)})" if why else "")
    uv = re.search(r"Because (\S+) depends on (\S+?),? and .*you require (\S+?)[,.]? we can conclude", text)
    if uv:
        return f"{uv[1]} depends on {uv[2]}, and you require {uv[3]}"
    because = re.search(r"Because (.+)", text)
    return _cut(because[1]) if because else "see the output"


_NO_SPACE = re.compile(r"(?i)no space left on device|\bENOSPC\b|errno 28\b|os error 28\b|disk quota exceeded")
_TLS = re.compile(
    r"(?i)certificate verify failed|invalid peer certificate|x509: certificate|ssl certificate problem|"
    r"certificate verification failed|tls: failed to verify|unable to get local issuer certificate"
)
_DNS = re.compile(
    r"(?i)temporary failure in name resolution|name or service not known|temporary failure resolving|"
    r"could not resolve host|dns error|no such host|nodename nor servname|getaddrinfo failed|"
    r"errno -[235]\b|failed to resolve '"
)
_CONNECT = re.compile(r"(?i)connection refused|network is unreachable|no route to host|timed out")
_AUTH = re.compile(
    r"(?i)\b(?:401|403)\s+(?:unauthori[sz]ed|forbidden|client error)|http(?: error| status)?:? 40[13]\b|"
    r"status(?: code)?:? 40[13]\b|unauthori[sz]ed|forbidden|lack of valid authentication credentials|"
    r"authentication required|denied: requested access"
)
_MISSING = re.compile(r"(?i): not found$|manifest unknown|pull access denied|repository does not exist")
_NOT_FOUND = re.compile(
    r"No matching distribution found for (\S+)|was not found in the package \w+ and you require "
    r"([^,\s]+)|there is no version of ([^,\s]+)"
)
_CONFLICT = re.compile(r"(?i)conflicting dependencies|ResolutionImpossible|No solution found when resolving")
Rule = Callable[[Step, str, re.Match[str]], Cause | None]
_RULES: tuple[tuple[re.Pattern[str], Rule], ...] = (
    (_NO_SPACE, _no_space), (_TLS, _tls), (_DNS, _dns), (_CONNECT, _connect), (_AUTH, _auth),
    (_MISSING, _missing_base), (_NOT_FOUND, _not_found), (_CONFLICT, _conflict),
)  # fmt: skip
_REASONS = (("refused", "connection refused"), ("unreachable", "network unreachable"), ("no route", "no route to host"),
            ("timed out", "timed out"))  # fmt: skip

# --- where: the host a line names ------------------------------------------------------------------------------------

_HOST_PORT = (re.compile(r"host='([^']+)', port=(\d+)"), re.compile(r"(?:connect to|dial tcp) ([^\s()]+:\d+)"))
_NAMED = (re.compile(r"resolving '([^']+)'"), re.compile(r"resolve host:? '?([\w.-]+)"),
          re.compile(r"lookup ([\w.-]+)(?: on |: )"), re.compile(r"[Ff]ailed to resolve '([^']+)'"))  # fmt: skip
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s'\"`<>()\[\],]+")


def _host(step: Step, line: str, patterns: tuple[re.Pattern[str], ...], port: bool = True) -> str:
    """The host (and port) a line names: by the patterns, else its URL, else the nearest URL before the end of
    the step's output, else one in the step's instruction."""
    for pattern in patterns:
        found = pattern.search(line)
        if found:
            return ":".join(g for g in found.groups() if g) if port else found[1]
    for text in (line, *reversed(step.output), step.header):
        urls = _URL.findall(text)
        if urls:
            return _url_host(urls[-1], port)
    return ""


def _url_host(url: str, port: bool) -> str:
    """A URL's host, and its port where the URL names one."""
    try:
        parts = urlsplit(url)
        number = parts.port
    except ValueError:
        return ""
    host = parts.hostname or ""
    return f"{host}:{number}" if port and host and number else host


def _cut(line: str) -> str:
    """One line, its middle cut out where it is long: the end of an error line says most."""
    line = " ".join(line.split()).replace('"', "'")
    return line if len(line) <= LINE_WIDTH else f"{line[:45]} ... {line[-(LINE_WIDTH - 50) :]}"
