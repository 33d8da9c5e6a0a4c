FROM debian:bookworm-slim AS base
FROM base AS os
RUN getent hosts no-such-host.invalid || exit 1
