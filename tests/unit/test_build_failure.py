"""A failed build's error line, from recorded BuildKit logs (tests/unit/data/buildkit, record.sh there): each class
of failure from buildx 0.13 (Docker 26) and from Docker 20.10's classic client, a multi-stage build where one of
three parallel steps failed, a step that printed nothing, a log that names no failing step, and hostile output."""

from __future__ import annotations

import io
import random
import re
from pathlib import Path

import pytest

from builder.engine.build_failure import HINTS, explain
from builder.engine.buildkit_log import KEEP, WIDTH, BuildkitLog, Step

DATA = Path(__file__).resolve().parent / "data" / "buildkit"
CLIENTS = ("buildx", "classic")


def read(case: str, client: str = "buildx") -> BuildkitLog:
    """The log as run_command hands it over: decoded as UTF-8 with replacement, universal newlines."""
    log = BuildkitLog()
    for raw in io.TextIOWrapper(io.BytesIO((DATA / f"{case}.{client}.log").read_bytes()), errors="replace"):
        log.feed(raw.rstrip("\n"))
    return log


def line_of(case: str, client: str = "buildx") -> str:
    return explain(read(case, client), 1)


# The error line up to the end of the cause (the hint and the step's last lines follow): per recorded case.
CAUSES = {
    "refused-pip": "build step [venv 3/3] RUN pip download --no-cache-dir --retries 1 --timeout 5 --index-url ... "
    "failed (exit code 1): cannot connect to 127.0.0.1:9 (connection refused); ",
    "refused-uv": "build step [build 3/3] RUN ... uv venv /opt/venv; uv pip install --python /opt/venv/bin/python "
    "--index-url ... failed (exit code 2): cannot connect to 127.0.0.1:9 (connection refused); ",
    "refused-apt": "build step [os-files 1/1] RUN ... find /etc/apt ( -name '*.list' -o -name '*.sources' ) -exec "
    "sed -i ... failed (exit code 100): cannot connect to 127.0.0.1:9 (connection refused); ",
    "refused-registry": "build step [internal] load metadata for 127.0.0.1:5999/torchyard-bf/base:1.0 failed: "
    "cannot connect to 127.0.0.1:5999 (connection refused); ",
    "unreachable-uv": "build step [build 2/2] RUN ... uv pip install --python /opt/venv/bin/python --index-url ... "
    "failed (exit code 2): cannot connect to 192.0.2.1:8080 (network unreachable); ",
    "dns-uv": "build step [venv 3/3] RUN ... uv pip install --python /opt/venv/bin/python --index-url ... failed "
    "(exit code 2): cannot resolve download.pytorch.org (DNS); ",
    "dns-pip": "build step [venv 1/1] RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir "
    "--retries ... failed (exit code 1): cannot resolve download.pytorch.org (DNS); ",
    "dns-apt": "build step [os-files 1/1] RUN ... apt-get update; apt-get install -y --no-install-recommends python3 "
    "failed (exit code 100): cannot resolve deb.debian.org (DNS); ",
    "dns-registry": "build step [internal] load metadata for registry.no-such-host.invalid/torchyard/base:1.0 "
    "failed: cannot resolve registry.no-such-host.invalid (DNS); ",
    "tls-pip": "build step [venv 2/2] RUN (openssl s_server -quiet -accept 8443 -cert /c.pem -key /k.pem -www "
    ">/dev/null ... failed (exit code 1): the TLS certificate of 127.0.0.1:8443 is not trusted; ",
    "tls-uv": "build step [build 2/2] RUN (openssl s_server -quiet -accept 8443 -cert /c.pem -key /k.pem -www "
    ">/dev/null ... failed (exit code 2): the TLS certificate of 127.0.0.1:8443 is not trusted; ",
    "nospace-dd": "build step [os 1/1] RUN dd if=/dev/zero of=/fill/x bs=1k count=1000 failed (exit code 1): "
    "no space left on device; ",
    "nospace-uv": "build step [build 1/1] RUN ... uv venv /fill/venv failed (exit code 2): no space left on device; ",
    "auth-uv": "build step [build 2/2] RUN (python3 /srv.py >/dev/null 2>&1 &); sleep 1; export UV_NO_PROGRESS=1; "
    "uv venv ... failed (exit code 1): 127.0.0.1:8080 refused the request (HTTP 403 Forbidden); ",
    "auth-uv401": "build step [build 2/2] RUN (python3 /srv.py >/dev/null 2>&1 &); sleep 1; export UV_NO_PROGRESS=1; "
    "uv venv ... failed (exit code 1): 127.0.0.1:8080 refused the request (HTTP 401 Unauthorized); ",
    "auth-registry": "build step [internal] load metadata for 127.0.0.1:5001/torchyard-e2e/private:1.0 failed: "
    "127.0.0.1:5001 refused the request (HTTP 401 Unauthorized); ",
    "missing-base": "build step [internal] load metadata for 127.0.0.1:5000/torchyard-bf/no-such-image:1.0 failed: "
    "base image 127.0.0.1:5000/torchyard-bf/no-such-image:1.0 not found; ",
    "notfound-uv": "build step [build 1/1] RUN ... uv venv /opt/venv; uv pip install --python /opt/venv/bin/python "
    "... failed (exit code 1): no version of torchyard-no-such-package-4d2f==0.0.1 on the package index; ",
    "notfound-pip": "build step [venv 1/1] RUN ... python3 -m venv /opt/venv; /opt/venv/bin/pip install "
    "--no-cache-dir ... failed (exit code 1): no version of torchyard-no-such-package-4d2f==0.0.1 on the package "
    "index; ",
    "auth-pip": "build step [venv 2/2] RUN (python3 /srv.py >/dev/null 2>&1 &); sleep 1; pip download "
    "--no-cache-dir ... failed (exit code 1): no version of six on the package index; ",
    "conflict-uv": "build step [build 1/1] RUN ... uv venv /opt/venv; uv pip install --python /opt/venv/bin/python "
    "--dry-run ... failed (exit code 1): the requirements conflict: requests==2.31.0 depends on "
    "urllib3>=1.21.1,<3, and you require urllib3<1.21; ",
    "conflict-pip": "build step [venv 1/1] RUN ... python3 -m venv /opt/venv; /opt/venv/bin/pip install "
    "--no-cache-dir ... failed (exit code 1): the requirements conflict: requests==2.31.0 and urllib3<1.21 (The "
    "user requested urllib3<1.21; requests 2.31.0 depends on urllib3<3 and >=1.21.1); ",
}
HINT = {
    "refused-pip": HINTS["connect"] + HINTS["loopback"].format(host="127.0.0.1"),
    "refused-registry": HINTS["connect"],  # the engine pulls base images: its own 127.0.0.1 is this machine
    "unreachable-uv": HINTS["connect"],
    "dns-uv": HINTS["dns"],
    "tls-pip": HINTS["tls"],
    "nospace-dd": HINTS["no space"],
    "auth-uv": HINTS["auth"],
    "auth-registry": HINTS["auth pull"].format(host="127.0.0.1:5001"),
    "missing-base": HINTS["base"],
    "notfound-uv": HINTS["not found"],
    "auth-pip": HINTS["not found"] + HINTS["pip"],  # pip says nothing of the 401 it got
    "conflict-uv": HINTS["conflict"],
}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("case", sorted(CAUSES))
def test_each_class_names_the_step_and_its_cause_from_either_client(case: str, client: str) -> None:
    line = line_of(case, client)
    assert line.startswith(CAUSES[case]), line
    assert "\n" not in line and len(line) < 800
    assert "did not complete successfully" not in line  # BuildKit's generic line says nothing of the cause


@pytest.mark.parametrize("case", sorted(HINT))
def test_each_class_has_its_hint(case: str) -> None:
    assert line_of(case).startswith(CAUSES[case] + HINT[case] + ". Last output: ")


def test_the_step_s_own_last_lines_follow_its_cause() -> None:
    assert line_of("dns-uv").endswith(
        'Last output: "cause: dns error" | "cause: error resolving DNS" | "cause: failed to lookup address '
        'information: Temporary failure in name resolution"'
    )
    assert line_of("missing-base").endswith('Last output: "127.0.0.1:5000/torchyard-bf/no-such-image:1.0: not found"')
    assert line_of("refused-pip").endswith(  # a long line keeps its end, where the reason is
        'Last output: "WARNING: Retrying (Retry(total=0, connect=Non ... lish a new connection: [Errno 111] '
        "Connection refused')': /simple/six/\" | \"ERROR: Could not find a version that satisfies the requirement "
        'six (from versions: none)" | "ERROR: No matching distribution found for six"'
    )


@pytest.mark.parametrize("client", CLIENTS)
def test_of_three_parallel_steps_the_one_that_failed_is_named(client: str) -> None:
    log = read("parallel", client)
    assert sorted(s.header.split("]")[0] for s in log.steps.values() if "RUN" in s.header) == [
        "[build 1/1",
        "[os-files 1/1",
        "[uv 1/1",
    ]
    step = log.failed_step()
    assert step is not None and step.short().startswith("[uv 1/1] RUN echo")
    assert len(step.output) == 10 and not [line for line in step.output if "line" in line]  # only its own lines
    assert log.others_failed() == 0  # os-files was cancelled, not failed
    assert line_of("parallel", client).startswith(
        'build step [uv 1/1] RUN echo "fetching uv (26338)"; sleep 1; export UV_NO_PROGRESS=1; uv venv ... failed '
        "(exit code 2): cannot connect to 127.0.0.1:9 (connection refused); "
    )


def test_two_steps_that_fail_on_their_own_are_counted() -> None:
    log = BuildkitLog()
    lines = [
        "#5 [a 1/1] RUN false",
        "#6 [b 1/1] RUN exit 3",
        "#5 ERROR: context canceled",  # stopped because another step failed
        '#6 ERROR: process "/bin/sh -c exit 3" did not complete successfully: exit code: 3',
        "#7 [c 1/1] RUN exit 4",
        "#7 ERROR: executor failed running [/bin/sh -c exit 4]: exit code: 4",  # a Docker 20.10 engine's words
    ]
    for line in lines:
        log.feed(line)
    assert explain(log, 1) == "build step [b 1/1] RUN exit 3 failed (exit code 3) (1 more failed), without output"


@pytest.mark.parametrize("case", ["silent", "dns-getent"])
@pytest.mark.parametrize("client", CLIENTS)
def test_a_step_that_printed_nothing_says_so(case: str, client: str) -> None:
    expected = {
        "silent": "build step [runtime 2/2] RUN false failed (exit code 1), without output",
        "dns-getent": "build step [os 1/1] RUN getent hosts no-such-host.invalid || exit 1 failed (exit code 1), "
        "without output",
    }
    assert line_of(case, client) == expected[case]


def test_a_log_that_names_no_failing_step_gives_its_last_error_line() -> None:
    log = BuildkitLog()
    for line in (DATA / "missing-base.buildx.log").read_text().splitlines():
        if not line.startswith("#2 ERROR"):
            log.feed(line)
    assert explain(log, 1) == (
        'docker build failed (exit 1) and named no failing step: "ERROR: failed to solve: 127.0.0.1:5000/torchy ... '
        'ch-image:1.0: 127.0.0.1:5000/torchyard-bf/no-such-image:1.0: not found"'
    )
    log = BuildkitLog()
    log.feed("unknown flag: --provenance")
    assert explain(log, 125) == 'docker build failed (exit 125) and named no failing step: "unknown flag: --provenance"'
    assert explain(BuildkitLog(), 1) == "docker build failed (exit 1) without output"


@pytest.mark.parametrize("client", CLIENTS)
def test_hostile_output_leaves_no_escape_no_secret_and_a_short_line(client: str) -> None:
    log = read("hostile", client)
    step = log.failed_step()
    assert step is not None
    kept = [step.header, *step.output]
    assert not [text for text in kept if "\x1b" in text or "s3cr3t" in text or "abc123" in text or len(text) > WIDTH]
    assert "\ufffd" in step.output[0]  # the bytes that are not UTF-8, replaced: visible, harmless
    line = line_of("hostile", client)
    assert line.startswith("build step [venv 1/1] RUN python3 -c ") and "failed (exit code 3). Last output: " in line
    assert '"ERROR: the index at https://***@index.corp.ex ... zzzzzzz' in line
    assert len(line) < 400 and not re.search(r"[\x00-\x1f\x7f]", line)


def test_a_credential_past_the_cut_of_a_long_line_is_redacted_before_the_cut() -> None:
    log = BuildkitLog()
    log.feed("#3 [build 2/3] RUN uv pip install six")
    log.feed("#3 0.5 " + "y" * (WIDTH - 20) + " https://ci:" + "p" * 50_000 + "@index.corp.example/simple")
    log.feed("#3 0.6 error: Failed to fetch: https://ci:hunter2@index.corp.example/simple/six/ (Connection refused)")
    log.feed("#3 ERROR: process did not complete successfully: exit code: 2")
    step = log.failed_step()
    assert step is not None and step.output[0].endswith("y https://***@") and "pp" not in step.output[0]
    line = explain(log, 1)
    assert "hunter2" not in line and "cannot connect to index.corp.example (connection refused)" in line


def test_a_step_keeps_only_its_last_lines() -> None:
    log = BuildkitLog()
    log.feed("#4 [build 1/1] RUN seq 100000")
    for n in range(100_000):
        log.feed(f"#4 1.{n % 1000:03} {n}")
    assert list(log.steps[4].output) == [str(n) for n in range(100_000 - KEEP, 100_000)]


def test_docker_hub_s_answer_for_a_missing_repository_is_a_missing_base_image() -> None:
    log = BuildkitLog()
    log.feed("#2 [internal] load metadata for docker.io/library/debain:bookworm-slim")
    log.feed(
        "#2 ERROR: pull access denied, repository does not exist or may require authorization: server message: "
        "insufficient_scope: authorization failed"
    )
    assert explain(log, 1).startswith(
        "build step [internal] load metadata for docker.io/library/debain:bookworm-slim failed: base image "
        f"docker.io/library/debain:bookworm-slim not found; {HINTS['base']}. Last output: "
    )


@pytest.mark.parametrize(
    ("header", "short"),
    [
        ("[venv 3/5] RUN --mount=type=cache,target=/c --mount=type=secret,id=pipconf set -eu;   export A=1 B=2; "
         "if [ -s /run/secrets/cacert ]; then export SSL_CERT_FILE=/run/secrets/cacert; fi; uv venv /opt/venv",
         "[venv 3/5] RUN ... uv venv /opt/venv"),
        ("[uv 3/3] RUN set -eu; export A=1", "[uv 3/3] RUN set -eu; export A=1"),  # all setup: shown as it is
        ("[os-files 2/2] RUN --mount=type=secret,id=cacert set -eu; rm -f /etc/apt/apt.conf.d/docker-clean; if [ -s "
         "/run/secrets/cacert ]; then echo 'Acquire::https::CAInfo \"/run/secrets/cacert\";' > /etc/apt/x; fi; "
         "apt-get update; sh /tmp/os_delta.sh begin",  # a ; inside quotes ends no command
         "[os-files 2/2] RUN ... apt-get update; sh /tmp/os_delta.sh begin"),
        ("[build 2/2] RUN python3 /tmp/uv_fetch.py '0.13.9' /opt/uv/bin/uv /run/secrets/pipconf && echo "
         "fetched the binary of uv into the image's build stage",
         "[build 2/2] RUN python3 /tmp/uv_fetch.py '0.13.9' /opt/uv/bin/uv /run/secrets/pipconf && echo ..."),
        ("[venv 1/6] COPY --from=build /layers/00/ /", "[venv 1/6] COPY --from=build /layers/00/ /"),
        ("[internal] load metadata for docker.io/library/debian:bookworm-slim",
         "[internal] load metadata for docker.io/library/debian:bookworm-slim"),
        ("exporting to image", "exporting to image"),
    ],
)  # fmt: skip
def test_a_step_s_short_form(header: str, short: str) -> None:
    assert Step(1, header).short() == short


def test_every_message_in_troubleshooting_s_table_is_one_torchyard_prints() -> None:
    """docs/troubleshooting.md's "A build fails": each row's message is a part of the line for a recorded log."""
    section = (DATA.parents[3] / "docs" / "troubleshooting.md").read_text().split("\n## A build fails", 1)[1]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    messages = [row[1].strip("`") for row in rows[1:]]  # the first row is the header
    printed = [line_of(path.name.split(".")[0], client) for path in DATA.glob("*.buildx.log") for client in CLIENTS]
    assert len(messages) == 11
    assert [message for message in messages if not any(message in line for line in printed)] == []


def test_a_command_not_found_in_a_run_step_is_no_missing_base_image() -> None:
    log = BuildkitLog()
    for line in (
        "#9 [devel 2/4] RUN nvcc --version",
        "#9 0.231 /bin/sh: 1: nvcc: not found",
        '#9 ERROR: process "/bin/sh -c nvcc --version # exit code: 5" did not complete successfully: exit code: 127',
    ):
        log.feed(line)
    assert explain(log, 1) == (
        'build step [devel 2/4] RUN nvcc --version failed (exit code 127). Last output: "/bin/sh: 1: nvcc: not found"'
    )


def test_no_output_makes_the_reader_or_the_wording_fail() -> None:
    """Whatever a build prints, the error line is worded (a bug here would turn exit 4 into an internal error)."""
    odd = ["#", "#1", "#1 ", "#2 ERROR: ", "#3 [x] RUN y", "#3 1.0 http://h:99999/ Connection refused", "#3 1.0 [",
           "#3 2 https://[::1 timed out", "#3 3 lookup : no such host", "#3 4 No matching distribution found for ",
           "#3 5 403", "#3 ERROR: exit code: ", "#99999999999999999999 ERROR: x", "\x00\x1b[2J", "#4 [a] RUN",
           '#4 ERROR: Head "http://h:0/v2/": dial tcp :0: connect: connection refused']  # fmt: skip
    rng = random.Random(38)
    for _ in range(300):
        log = BuildkitLog()
        for _ in range(rng.randrange(1, 12)):
            log.feed(rng.choice(odd) + "".join(rng.choice(" :/@#'\"x1\ufffd") for _ in range(rng.randrange(0, 6))))
        line = explain(log, 1)
        assert line and "\n" not in line
