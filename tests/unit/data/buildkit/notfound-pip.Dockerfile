FROM torchyard-bf-base:py AS base
FROM base AS venv
RUN --mount=type=secret,id=cacert set -eu; export PIP_CERT=/run/secrets/cacert; \
    python3 -m venv /opt/venv; \
    /opt/venv/bin/pip install --no-cache-dir 'torchyard-no-such-package-4d2f==0.0.1'
