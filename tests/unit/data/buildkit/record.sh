#!/bin/bash
# Record the BuildKit logs that tests/unit/test_build_failure.py replays (by hand, as root, with a Docker engine;
# the uv, pip, conflict and not-found cases reach PyPI through the host's CA bundle):
#
#     tests/unit/data/buildkit/record.sh [CASE ...]      # default: every CASE.Dockerfile here
#
# Each CASE.Dockerfile fails one way; it is built twice and the whole output of each build is kept:
# - CASE.buildx.log: `docker buildx build --progress=plain` (buildx 0.13 with Docker 26's engine);
# - CASE.classic.log: `DOCKER_BUILDKIT=1 docker build --progress=plain` of Docker 20.10's classic client, at
#   $CLASSIC_DOCKER. Debian 12's client, unpacked beside the system's own without installing it:
#       apt-get download docker.io=20.10.24+dfsg1-1+deb12u1+b6 && dpkg-deb -x docker.io_*.deb d2010
#       CLASSIC_DOCKER=$PWD/d2010/usr/bin/docker tests/unit/data/buildkit/record.sh
# base.Dockerfile is the image most cases start from (Debian 12, python3, pip, uv, openssl).
# After recording, the address of this network's DNS server in dns-registry.*.log was replaced by 192.0.2.53.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
classic="${CLASSIC_DOCKER:?set CLASSIC_DOCKER to a Docker 20.10 client}"
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
ca=(--secret id=cacert,src=/etc/ssl/certs/ca-certificates.crt)
docker buildx build --load --progress=plain "${ca[@]}" -t torchyard-bf-base:py -f "$here/base.Dockerfile" "$context"
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  for file in "$here"/*.Dockerfile; do
    name="$(basename "$file" .Dockerfile)"
    [ "$name" = base ] || cases+=("$name")
  done
fi
for name in "${cases[@]}"; do
  args=(--progress=plain --build-arg "NONCE=$RANDOM" "${ca[@]}" -f "$here/$name.Dockerfile" "$context")
  docker buildx build --load --provenance=false "${args[@]}" >"$here/$name.buildx.log" 2>&1 && exit 1  # must fail
  DOCKER_BUILDKIT=1 "$classic" build "${args[@]}" >"$here/$name.classic.log" 2>&1 && exit 1
  echo "recorded $name"
done
