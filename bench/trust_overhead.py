"""What attestation adds to publishing one image: the time and the bytes of its SBOM, provenance statement and
signatures (builder/trust), measured on a real image already pushed to a local registry.

The image's manifest is copied registry-side (blob mounts: nothing is uploaded again) into a fresh repository of
the same registry, so that nothing is attached there yet, then attested and signed exactly as `build --push
--sign-key` does it (reading the image's contents in a container, the CycloneDX SBOM, the SLSA statement, their
upload and three signatures), `--repeat` times, each time into a new repository. The image must also be in the
local engine (the inventory runs in it).

    python bench/trust_overhead.py --image 127.0.0.1:5000/team/torch:TAG --key team.key \\
        [--publish-seconds S] [--smoke-report smoke-runtime.json] [--repeat 3] [--markdown]

--publish-seconds: the wall time of publishing that image (`time torchyard build --push ...`), to print the
share. --smoke-report: the smoke suite's report of that build (its output folder's smoke-runtime.json): the stack is
taken from it, as the build does; without it torch is imported in the image (a rerun that built nothing).
The copies' tags are left in the local registry (it has no delete); the engine is not changed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from builder.engine import DockerEngine
from builder.oci.client import Distribution
from builder.oci.promote import promote
from builder.oci.refs import ImageRef, parse_ref
from builder.trust.attest import Attested, Target, TrustSettings, attest
from builder.trust.inventory import read_inventory, stack_of
from builder.trust.keys import signing_key
from builder.trust.sbom import Subject
from builder.trust.slsa import BuildFacts


def once(client: Distribution, source: ImageRef, image: str, settings: TrustSettings, n: int,
         stack: dict[str, str | None] | None) -> Attested:  # fmt: skip
    copy = parse_ref(f"{source.repo}-trustbench-{os.getpid()}-{n}:{source.tag or 'latest'}")
    promote(client, source, copy, None)
    manifest = client.manifest(copy.repo, copy.reference)
    assert manifest is not None and not manifest.is_index, "a single-platform image is measured"
    subject = Subject(repo=str(copy.repo), digest=manifest.digest, platform="linux/amd64")
    engine = DockerEngine()
    target = Target(client=client, repo=copy.repo, manifest=manifest, subject=subject,
                    contents=lambda: read_inventory(engine, image, stack))  # fmt: skip
    now = datetime.now(UTC)
    return attest(target, settings, BuildFacts(torchyard_version="bench", started=now, finished=now))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", required=True)
    parser.add_argument("--key", required=True, type=Path)
    parser.add_argument("--publish-seconds", type=float)
    parser.add_argument("--smoke-report", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    settings = TrustSettings(key=signing_key(args.key, {}), facts={"bench": "trust_overhead"})
    client = Distribution(docker_login=False)
    stack = stack_of(json.loads(args.smoke_report.read_text())["observed"]) if args.smoke_report else None
    runs = []
    for n in range(args.repeat):
        start = time.monotonic()
        done = once(client, parse_ref(args.image), args.image, settings, n, stack)
        runs.append((time.monotonic() - start, done))
        print(f"run {n + 1}: {done.seconds:.2f} s attesting ({done.read_seconds:.2f} s reading the image), "
              f"{done.bytes} bytes written, wrote {', '.join(done.written)}")  # fmt: skip
    seconds = statistics.median(d.seconds for _, d in runs)
    reading = statistics.median(d.read_seconds for _, d in runs)
    written = statistics.median(d.bytes for _, d in runs)
    share = f"{100 * seconds / args.publish_seconds:.2f} %" if args.publish_seconds else "not measured"
    if args.markdown:
        print("| attest (median) | of which reading the image | bytes written | publish time | share |")
        print("|---|---|---|---|---|")
        publish = f"{args.publish_seconds:.0f} s" if args.publish_seconds else "not measured"
        print(f"| {seconds:.2f} s | {reading:.2f} s | {written:.0f} | {publish} | {share} |")
    else:
        print(f"median: {seconds:.2f} s ({reading:.2f} s reading), {written:.0f} bytes; share of publish: {share}")


if __name__ == "__main__":
    main()
