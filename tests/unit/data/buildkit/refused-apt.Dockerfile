FROM debian:bookworm-slim AS base
FROM base AS os-files
RUN set -eu; rm -f /etc/apt/apt.conf.d/docker-clean; \
    find /etc/apt \( -name '*.list' -o -name '*.sources' \) -exec sed -i "s|http://deb.debian.org|http://127.0.0.1:9|g" {} +; \
    apt-get update; apt-get install -y --no-install-recommends python3
