"""Issue 40 item 4 against the real engine: a requirements file as pip reads it (a comment, a marker, a
specifier with spaces, an -r include, hashes, --no-index and a local folder of wheels) builds on the e2e
combination (its venv layers come from the e2e build's cache: only the additions layer is new) and the
packages are in the image, installed with --require-hashes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from conftest import E2E, RUN_ID
from index_server import wheel
from kit import E2E_FLAGS, REGISTRY, docker, local_tags, torchyard, untag_repo

pytestmark = pytest.mark.docker


def _wheels(folder: Path) -> dict[str, str]:
    """Two tiny wheels with no dependencies, by project name -> sha256."""
    folder.mkdir()
    found = {}
    for name in ("tyreq_a", "tyreq_b"):
        data = wheel(f"{name}-1.0-py3-none-any.whl", [], payload=1000)
        (folder / f"{name}-1.0-py3-none-any.whl").write_bytes(data)
        found[name] = hashlib.sha256(data).hexdigest()
    return found


def test_a_hashed_requirements_file_with_includes_builds_and_installs(e2e: E2E, tmp_path: Path) -> None:
    hashes = _wheels(tmp_path / "wheels")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "more.txt").write_text(f"tyreq-b == 1.0 --hash=sha256:{hashes['tyreq_b']}\n")
    (tmp_path / "reqs.txt").write_text(
        "# local wheels only: no index is asked\n--no-index\n-f ./wheels\n-r sub/more.txt\n"
        f'tyreq-a == 1.0 ; python_version >= "3.8" \\\n    --hash=sha256:{hashes["tyreq_a"]}  # pinned\n'
    )
    repo = f"{REGISTRY}/torchyard-e2e/requirements-{RUN_ID}"
    try:
        run = torchyard("build", *E2E_FLAGS, "--target", "runtime", "--requirements", str(tmp_path / "reqs.txt"),
                        "--repo", repo, "-o", str(tmp_path / "out"))  # fmt: skip
        assert run.code == 0, run.text[-4000:]
        ref = local_tags(repo)[0]
        check = "import importlib.metadata as m; print(m.version('tyreq-a'), m.version('tyreq-b'))"
        ran = docker("run", "--rm", "--entrypoint", "python", ref, "-c", check)
        assert (ran.returncode, ran.stdout.strip()) == (0, "1.0 1.0"), ran.stderr[-2000:]
        kept = docker("run", "--rm", "--entrypoint", "cat", ref, "/opt/torchyard/requirements.txt").stdout
        assert "--hash=sha256:" in kept and "/tmp/torchyard-req" not in kept  # no local path in a hashed file
        assert docker("run", "--rm", "--entrypoint", "ls", ref, "/tmp/torchyard-req").returncode != 0  # a mount only
    finally:
        untag_repo(repo)
