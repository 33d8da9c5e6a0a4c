"""A refresh of a published set: what the compare-and-keep path costs (issue 44 item 3, builder/pipeline/refresh.py).

    python bench/refresh.py [--torch ==2.15.0] [--os debian13] [--flavors runtime] [--repo REGISTRY/NAME]
                            [--plant] [--markdown]

Phases, each one `torchyard publish --refresh TOKEN --attest` of the same set into a repository of its own on the
local registry (127.0.0.1:5000, no auth; default repo torchyard-refresh-bench/<run id>):

1. publish: the set's first publish (a build, the smoke suite, the push, the SBOM and provenance);
2. plan: `publish --plan` with the next token, read-only (what it says of each image);
3. unchanged: a new token whose apt-get upgrade changes no package: the image is built (the upgrade step and the
   steps after it run again), its package set compared with the published SBOM, and the published image kept;
4. with --plant: the published runtime image's SBOM altered to list libc6 one version back (as the docker tier's
   test does: this script cannot make the archive publish an update), then another token: a change is found, so the
   image is smoke-tested, pushed and attested as any build.

Prints the command, wall seconds, `uptime` before and after, each item's status, refresh verdict, build seconds
and pushed_bytes per phase. The machine is shared: the numbers are what it gave under the load shown. Leaves the
repository in the registry; removes its local tags (not the layers: no prune). Needs the docker tier's services.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCKER = os.environ.get("TORCHYARD_DOCKER", "/usr/bin/docker")
RUN = uuid.uuid4().hex[:8]


@dataclass
class Phase:
    name: str
    command: list[str]
    report: Path
    seconds: float = 0.0
    load_before: str = ""
    load_after: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)  # id, status/action, refresh, build_s, pushed_bytes


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def set_matrix(folder: Path, torch: str, os_name: str, flavors: list[str]) -> Path:
    """The real matrix.toml with one [[publish]] entry: the set this bench publishes."""
    text = (ROOT / "matrix.toml").read_text()
    entry = f'\n[[publish]]\nname = "refresh-bench"\ntorch = "{torch}"\nos = ["{os_name}"]\nflavors = {flavors!r}\n'
    path = folder / "matrix.toml"
    path.write_text(text[: text.index("[[publish]]")] + entry.replace("'", '"'))
    return path


def run_phase(name: str, argv: list[str], report: Path) -> Phase:
    command = [sys.executable, "-m", "builder", *argv, "--report", str(report)]
    phase = Phase(name, command, report, load_before=uptime())
    start = time.monotonic()
    env = {**os.environ, "TORCHYARD_ANY_HOST": "1"}  # what it builds does not depend on this machine's GPU
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    phase.seconds, phase.load_after = time.monotonic() - start, uptime()
    if done.returncode != 0:
        sys.exit(f"{name}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    phase.items = [_item(i) for i in json.loads(report.read_text())["items"]]
    return phase


def _item(data: dict[str, Any]) -> dict[str, Any]:
    """One item of a publish report, or of a plan's (no build, no push: "-")."""
    refresh = data.get("refresh")
    verdict = refresh.get("packages", "") if isinstance(refresh, dict) else str(refresh or "")
    built = data.get("build_seconds")
    return {
        "id": data["id"],
        "status": data.get("status") or data.get("action"),
        "refresh": verdict.split(":")[0],  # "not compared: why" -> "not compared" (the report has the why)
        "build_s": "-" if built is None else round(float(built), 1),
        "pushed_bytes": data.get("pushed_bytes", "-"),
    }


def plant_older_libc6(ref: str) -> None:
    """An altered copy of the SBOM of the image under `ref`, listed first in its referrers tag (what a refresh
    reads): libc6 one version back (tests/integration/test_publish.py does the same)."""
    from builder.oci.client import OCI_INDEX
    from builder.oci.referrers import attach, referrers_tag
    from builder.pipeline.registry import Registry, parse_repo
    from builder.trust import sbom
    from builder.trust.attest import read_attached

    reader, repo = Registry(), parse_repo(ref.rsplit(":", 1)[0])
    manifest = reader.read(ref)
    found = None if manifest is None else read_attached(reader.client, repo, manifest.digest, sbom.MEDIA_TYPE)
    if manifest is None or found is None:
        sys.exit(f"--plant: {ref} has no SBOM to alter")
    data = json.loads(found[1])
    libc6 = next(c for c in data["components"] if c["name"] == "libc6" and c["purl"].startswith("pkg:deb/"))
    libc6["version"] += "~planted"
    planted = attach(reader.client, repo, manifest, sbom.MEDIA_TYPE, json.dumps(data).encode(), {})
    index = reader.client.manifest(repo, referrers_tag(manifest.digest))
    if index is None:
        sys.exit("--plant: this registry has a referrers API; the planted SBOM cannot be listed first")
    entries = sorted(index.data["manifests"], key=lambda e: e["digest"] != planted.digest)
    raw = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode()
    reader.client.put_manifest(repo, referrers_tag(manifest.digest), raw, OCI_INDEX)


def untag_local(repo: str) -> None:
    """The engine's tags under `repo` (this run's repository only); the layers stay (no prune)."""
    listed = subprocess.run([DOCKER, "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True,
                            text=True, check=False).stdout.split()  # fmt: skip
    mine = [ref for ref in listed if ref.startswith(f"{repo}:")]
    if mine:
        subprocess.run([DOCKER, "rmi", *mine], capture_output=True, check=False)


def phases(args: argparse.Namespace, folder: Path) -> list[Phase]:
    matrix = set_matrix(folder, args.torch, args.os, args.flavors)

    def publish(name: str, token: str, *extra: str) -> Phase:
        argv = ["--matrix", str(matrix), "publish", "--repo", args.repo, "-o", str(folder / name), *extra]
        return run_phase(name, [*argv, "--refresh", token], folder / f"{name}.json")

    done = [publish("publish", f"bench-{RUN}-0", "--attest")]
    done.append(publish("plan", f"bench-{RUN}-1", "--plan"))
    done.append(publish("unchanged", f"bench-{RUN}-1", "--attest"))
    if args.plant:
        plant_older_libc6(_runtime_ref(done[0]))
        done.append(publish("planted change", f"bench-{RUN}-2", "--attest", "--only", "*-runtime"))
    return done


def _runtime_ref(first: Phase) -> str:
    """The runtime image's immutable tag, from the first phase's report."""
    data = json.loads(first.report.read_text())
    return next(str(i["ref"]) for i in data["items"] if str(i["id"]).endswith("-runtime"))


def markdown(args: argparse.Namespace, done: list[Phase]) -> str:
    lines = [f"Command: `python bench/refresh.py {' '.join(sys.argv[1:])}` (repository {args.repo}).", "",
             "| phase | wall time | item: status, refresh, build s, pushed bytes | uptime before / after |",
             "|---|---|---|---|"]  # fmt: skip
    for p in done:
        items = "; ".join(
            f"{i['id']}: {i['status']}, {i['refresh'] or '-'}, {i['build_s']} s, {i['pushed_bytes']}" for i in p.items
        )
        lines.append(f"| {p.name} | {p.seconds:.1f} s | {items} | {_load(p.load_before)} / {_load(p.load_after)} |")
    return "\n".join(lines)


def _load(line: str) -> str:
    return line.rsplit("load average:", maxsplit=1)[-1].strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--torch", default="==2.15.0")
    parser.add_argument("--os", default="debian13")
    parser.add_argument("--flavors", nargs="+", default=["runtime"])
    parser.add_argument("--repo", default=f"127.0.0.1:5000/torchyard-refresh-bench/{RUN}")
    parser.add_argument("--plant", action="store_true", help="then a refresh with a planted package change")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if args.plant and "runtime" not in args.flavors:
        parser.error("--plant alters the runtime image's SBOM: keep runtime in --flavors")
    folder = Path(tempfile.mkdtemp(prefix="torchyard-refresh-bench-"))  # kept afterwards: logs, reports
    try:
        done = phases(args, folder)
    finally:
        untag_local(args.repo)
    print(markdown(args, done) if args.markdown else json.dumps([vars(p) for p in done], indent=2))


if __name__ == "__main__":
    main()
