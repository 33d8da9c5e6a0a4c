"""Issue 42: the hygiene checks against the image contract. Each is shown failing on an image planted FROM the e2e
runtime image (a file in /tmp, a broken requirement, an image that only runs as root), while the others pass; the
e2e runtime image itself passes them all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import E2E, RUN_ID
from kit import docker, torchyard

pytestmark = pytest.mark.docker

HYGIENE = ("hygiene.caches", "hygiene.entrypoint", "hygiene.pip_check", "hygiene.stray_files", "hygiene.uid")
# A distribution whose requirement is not installed: what `pip install --no-deps` of such a package leaves, written
# by hand so the build needs no index.
BROKEN = (
    "RUN site=$(python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])') && "
    "mkdir -p $site/planted_broken-1.0.dist-info && "
    "printf 'Metadata-Version: 2.1\\nName: planted-broken\\nVersion: 1.0\\nRequires-Dist: torchyard-not-there>=1\\n' "
    "> $site/planted_broken-1.0.dist-info/METADATA && "
    "printf 'pip\\n' > $site/planted_broken-1.0.dist-info/INSTALLER && "
    ": > $site/planted_broken-1.0.dist-info/RECORD"
)
PLANTS = {
    "stray": ("RUN echo planted > /tmp/planted.txt", "hygiene.stray_files", "/tmp/planted.txt"),
    "broken": (BROKEN, "hygiene.pip_check", "planted-broken 1.0 requires torchyard-not-there"),
    "rootonly": ("RUN chmod 700 /opt/venv", "hygiene.uid", "as 1010:0"),
}


def statuses(image: str) -> tuple[dict[str, str], dict[str, str], int]:
    run = torchyard("smoke", image, "--only", "hygiene.", "--json")
    data = json.loads(run.out)
    checks = {c["name"]: c["status"] for c in data["checks"]}
    messages = {c["name"]: c["message"] for c in data["checks"]}
    return checks, messages, run.code


@pytest.fixture(scope="module")
def planted(e2e: E2E, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    images: dict[str, str] = {}
    try:
        for name, (step, _, _) in PLANTS.items():
            context = tmp_path_factory.mktemp(f"hygiene-{name}")
            (context / "Dockerfile").write_text(f"FROM {e2e.ref('runtime')}\nUSER 0:0\n{step}\n")
            images[name] = f"torchyard-hygiene-{name}:{RUN_ID}"
            built = docker("build", "-t", images[name], str(context))
            assert built.returncode == 0, built.stderr[-2000:]
        yield images
    finally:
        for image in images.values():
            docker("rmi", "-f", image)


def test_the_e2e_runtime_image_passes_every_hygiene_check(e2e: E2E) -> None:
    checks, messages, code = statuses(e2e.ref("runtime"))
    assert checks == dict.fromkeys(HYGIENE, "passed"), messages
    assert code == 0
    assert "as 1010:0" in messages["hygiene.uid"] and "read-only" in messages["hygiene.uid"]


@pytest.mark.parametrize("name", sorted(PLANTS))
def test_a_planted_image_fails_the_matching_check_only(planted: dict[str, str], name: str) -> None:
    _, failing, said = PLANTS[name]
    checks, messages, code = statuses(planted[name])
    assert checks[failing] == "failed", messages
    assert said in messages[failing]
    assert {k: v for k, v in checks.items() if k != failing} == dict.fromkeys(set(HYGIENE) - {failing}, "passed")
    assert code == 4


def test_an_accepted_exception_passes_until_it_expires(planted: dict[str, str], tmp_path: Path) -> None:
    entry = {"package": "planted-broken", "reason_to_ignore": "planted by the test"}
    for expiry, status in (("2999-01-01", "passed"), ("2000-01-01", "failed")):
        allowlist = tmp_path / f"allow-{expiry}.json"
        allowlist.write_text(json.dumps({"hygiene.pip_check": [dict(entry, expiry=expiry)]}))
        run = torchyard("smoke", planted["broken"], "--only", "hygiene.pip", "--hygiene-allowlist", str(allowlist))
        assert f"hygiene.pip_check  {status.upper()}" in run.out, run.out
    assert "hygiene allowlist: expired, ignored: hygiene.pip_check planted-broken" in run.out
