FROM debian:bookworm-slim AS base
FROM base AS os-files
RUN --network=none set -eu; apt-get update; apt-get install -y --no-install-recommends python3
