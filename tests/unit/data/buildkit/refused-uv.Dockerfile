FROM torchyard-bf-base:py AS base
FROM base AS build
WORKDIR /w
RUN echo preparing the venv
RUN set -eu; export UV_NO_PROGRESS=1; \
    uv venv /opt/venv; \
    uv pip install --python /opt/venv/bin/python --index-url http://ci:s3cr3t@127.0.0.1:9/simple six
