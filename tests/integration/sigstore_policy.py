"""The plain standard-tool policy check of docs/trust.md: skopeo copying an image under a policy.json whose
`sigstoreSigned` requirement names the team's public key (registries.d: `use-sigstore-attachments: true`).

Debian 12's skopeo 1.9.3 is built with sigstore removed (every such policy fails with "Debian-local change:
sigstore disabled"); Debian 13's skopeo 1.18 verifies sigstore signatures. Where the host's skopeo is Debian 12's,
scripts/services makes a Debian 13 chroot holding skopeo in $TORCHYARD_CI_DIR/skopeo-trixie, and the check runs
that skopeo there (the registries on 127.0.0.1 are reached from the chroot as from the host).

The copy goes to another tag of the same repository: every layer is already there (skopeo asks, and skips it),
so the check costs the policy evaluation and a few requests, not the image's gigabytes (a copy to another
repository of docker-registry 2.8 downloaded and uploaded them all).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from kit import CI_DIR

CHROOT = CI_DIR / "skopeo-trixie"
DEBIAN_12_MARK = b"sigstore disabled"  # the Debian-local patch's message, in the binary that carries it


def skopeo_root() -> Path:
    """The root whose /usr/bin/skopeo verifies sigstore signatures: / when the host's does, else the chroot."""
    host = shutil.which("skopeo")
    if host and DEBIAN_12_MARK not in Path(host).read_bytes():
        return Path("/")
    if (CHROOT / "usr" / "bin" / "skopeo").exists():
        return CHROOT
    pytest.fail(
        f"no skopeo that verifies sigstore signatures (the host's has them disabled, and {CHROOT} is missing): "
        "run `sudo scripts/services start`",
        pytrace=False,
    )


def skopeo_version(root: Path) -> str:
    return _run(root, ["skopeo", "--version"]).stdout.strip()


def policy_copy(ref: str, public: Path, creds: str) -> subprocess.CompletedProcess[str]:
    """`skopeo copy docker://REPO:TAG docker://REPO:TAG-policy-checked` under a policy that rejects everything but
    images of REF's repository signed with `public` (matchRepository: the signature names the repository)."""
    root = skopeo_root()
    name, _, tag = ref.rpartition(":")
    host = name.split("/", 1)[0]
    with tempfile.TemporaryDirectory(dir=root / "tmp") as folder:
        work = Path(folder)
        inside = Path("/") / work.relative_to(root)
        shutil.copyfile(public, work / "team.pub")
        requirement = {"type": "sigstoreSigned", "keyPath": str(inside / "team.pub"),
                       "signedIdentity": {"type": "matchRepository"}}  # fmt: skip
        policy = {"default": [{"type": "reject"}], "transports": {"docker": {name: [requirement]}}}
        (work / "policy.json").write_text(json.dumps(policy))
        (work / "registries.d").mkdir()
        (work / "registries.d" / "local.yaml").write_text(f"docker:\n  {host}:\n    use-sigstore-attachments: true\n")
        command = [
            "skopeo", "--policy", str(inside / "policy.json"), "--registries.d", str(inside / "registries.d"),
            "copy", "--remove-signatures", "--src-tls-verify=false", "--dest-tls-verify=false",
            "--src-creds", creds, "--dest-creds", creds, f"docker://{ref}", f"docker://{name}:{tag}-policy-checked",
        ]  # fmt: skip
        return _run(root, command)


def _run(root: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    prefix = [] if root == Path("/") else ["chroot", str(root)]
    return subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=600, check=False)
