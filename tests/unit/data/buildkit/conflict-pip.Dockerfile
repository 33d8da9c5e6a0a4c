FROM torchyard-bf-base:py AS base
FROM base AS venv
RUN --mount=type=secret,id=cacert set -eu; export PIP_CERT=/run/secrets/cacert; \
    python3 -m venv /opt/venv; \
    /opt/venv/bin/pip install --no-cache-dir --dry-run 'requests==2.31.0' 'urllib3<1.21'
