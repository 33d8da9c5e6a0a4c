FROM torchyard-bf-base:py AS base
FROM base AS venv
RUN --network=none python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir --retries 1 --index-url https://download.pytorch.org/whl/cpu torch
