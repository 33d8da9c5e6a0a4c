"""hygiene.uid from the host: the image run as a UID it does not name, then also read-only (docs/smoke.md).

The in-image suite cannot change its own user, so it reports hygiene.uid as left to the host
(builder/smoke/checks_hygiene.py: HOST_RUN); run_smoke then starts the suite's short probe
(builder/smoke/uid_probe.py) in two more containers, as UID 1010 with the contract's group (0; the notebook's
100) and HOME (/tmp; the notebook's home), the second with `--read-only` and a tmpfs on /tmp (and the notebook's
home), and puts the one result in the skipped one's place: the whole suite does not run twice.
"""

from __future__ import annotations

import json
import time
from typing import Any

from builder.engine import Engine, Isolation, Mount
from builder.render.contract import PATH as CONTRACT
from builder.render.contract import PROBE_UID
from builder.smoke import report as tables
from builder.smoke.checks_hygiene import HOST_RUN
from builder.smoke.framework import FAIL, PASS, Result

CHECK = "hygiene.uid"
DEFAULT = {"group": 0, "home": "/tmp", "tmpfs": ["/tmp:exec"]}  # an image without a contract: the runtime images' own
PROBE_TIMEOUT = 300.0  # seconds per container: a tiny compile on a loaded machine


def left_to_host(data: dict[str, Any]) -> bool:
    return any(c.get("name") == CHECK and c.get("message") == HOST_RUN for c in data.get("checks", []))


def any_uid(engine: Engine, image: str) -> dict[str, Any]:
    """The contract's way to run the image as any UID (its group, the HOME to give, the tmpfs folders)."""
    raw = engine.read_file(image, CONTRACT)
    try:
        found = dict(json.loads(raw).get("any_uid") or {}) if raw else {}
    except (ValueError, AttributeError):
        found = {}
    return dict(DEFAULT, **found)


def _owned(folder: str, user: str) -> str:
    """A tmpfs other than /tmp (the notebook's home) mounted as the running UID's: docker copies the image folder's
    contents and mode into it, so only its owner can be sure to write there."""
    if folder.split(":", 1)[0] == "/tmp":
        return folder
    uid, gid = user.split(":")
    return f"{folder}{',' if ':' in folder else ':'}uid={uid},gid={gid}"


def probe(engine: Engine, image: str, suite: list[str], mounts: tuple[Mount, ...], scale: float) -> Result:
    """The probe in its two containers; `suite` is the interpreter and the suite's folder in the image."""
    settings = any_uid(engine, image)
    user = f"{PROBE_UID}:{settings['group']}"
    env = (("HOME", str(settings["home"])),)
    tmpfs = tuple(_owned(str(folder), user) for folder in settings["tmpfs"])
    runs = (
        (f"as {user}", Isolation(environment=env)),
        (f"as {user}, read-only, tmpfs {' '.join(tmpfs)}", Isolation(environment=env, read_only=True, tmpfs=tmpfs)),
    )
    said, start = [], time.monotonic()
    for label, isolation in runs:
        command = [*suite, "--smoke-helper", "uid-probe", "{}"]
        timeout = PROBE_TIMEOUT * scale
        result = engine.run(image, command, mounts=mounts, user=user, timeout=timeout, isolation=isolation)
        status, message = _verdict(result.exit_code, result.output, result.timed_out)
        if status == FAIL:
            return Result(CHECK, FAIL, f"{label} (HOME={settings['home']}): {message}", time.monotonic() - start)
        said.append(f"{label}: {message}")
    return Result(CHECK, PASS, f"HOME={settings['home']}; " + "; ".join(said), time.monotonic() - start)


def _verdict(code: int, output: str, timed_out: bool) -> tuple[str, str]:
    if timed_out:
        return FAIL, f"the probe did not finish within its time: {output.strip()[-300:]}"
    lines = [line for line in output.splitlines() if line.startswith("{") and '"steps"' in line]
    if not lines:
        return FAIL, f"the probe exited {code} without a report: {output.strip()[-300:]}"
    steps = json.loads(lines[-1])["steps"]
    failed = [f"{name}: {message}" for name, status, message in steps if status == FAIL]
    if failed:
        return FAIL, "; ".join(failed)
    return PASS, ", ".join(name if status == PASS else f"{name} skipped ({message})" for name, status, message in steps)


def merged(found: Any, result: Result) -> dict[str, Any]:
    """A SmokeReport's fields with the probe's result in hygiene.uid's place: summary, table, JUnit and exit code
    follow (for dataclasses.replace)."""
    checks = [dict(c) for c in found.checks]
    for item in checks:
        if item["name"] == CHECK:
            item.update(status=result.status, message=result.message, seconds=round(result.seconds, 3))
    results = [Result(c["name"], c["status"], c["message"], float(c.get("seconds", 0.0))) for c in checks]
    data = dict(found.data, checks=checks, summary=tables.summary(results))
    exit_code = 1 if result.status == FAIL and found.exit_code == 0 else found.exit_code
    junit = tables.as_junit(results, float(found.data.get("seconds", 0.0))) if found.junit else ""
    return {"exit_code": exit_code, "data": data, "junit": junit, "output": _table(found.output, results)}


def _table(output: str, results: list[Result]) -> str:
    """The suite's output with its table printed again (its last lines, from the CHECK header on)."""
    lines = output.rstrip().splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("CHECK ") and " RESULT " in line]
    before = lines[: heads[-1]] if heads else lines
    return "\n".join([*before, tables.table(results)]) + "\n"
