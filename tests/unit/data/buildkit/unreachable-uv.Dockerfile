FROM torchyard-bf-base:py AS base
FROM base AS build
RUN uv venv /opt/venv
RUN --network=none set -eu; export UV_NO_PROGRESS=1; \
    uv pip install --python /opt/venv/bin/python --index-url http://192.0.2.1:8080/simple six
