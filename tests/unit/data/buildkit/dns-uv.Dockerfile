FROM torchyard-bf-base:py AS base
FROM base AS venv
WORKDIR /w
RUN uv venv /opt/venv
RUN --network=none set -eu; export UV_NO_PROGRESS=1; \
    uv pip install --python /opt/venv/bin/python --index-url 'https://download.pytorch.org/whl/cpu' torch torchvision torchaudio
