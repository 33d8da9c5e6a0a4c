FROM debian:bookworm-slim AS base
FROM base AS os
RUN --mount=type=tmpfs,target=/fill,size=64k dd if=/dev/zero of=/fill/x bs=1k count=1000
