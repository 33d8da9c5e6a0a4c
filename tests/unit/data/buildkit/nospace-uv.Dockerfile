FROM torchyard-bf-base:py AS base
FROM base AS build
RUN --mount=type=tmpfs,target=/fill,size=8k set -eu; export UV_NO_PROGRESS=1; \
    uv venv /fill/venv
