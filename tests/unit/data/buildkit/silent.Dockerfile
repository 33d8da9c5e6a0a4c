FROM debian:bookworm-slim AS base
FROM base AS runtime
RUN echo ok
RUN false
