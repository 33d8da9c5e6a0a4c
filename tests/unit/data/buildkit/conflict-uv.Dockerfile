FROM torchyard-bf-base:py AS base
FROM base AS build
RUN --mount=type=secret,id=cacert set -eu; export SSL_CERT_FILE=/run/secrets/cacert UV_NO_PROGRESS=1; \
    uv venv /opt/venv; \
    uv pip install --python /opt/venv/bin/python --dry-run 'requests==2.31.0' 'urllib3<1.21'
