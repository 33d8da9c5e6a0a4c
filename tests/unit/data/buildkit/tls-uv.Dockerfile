FROM torchyard-bf-base:py AS base
FROM base AS build
RUN openssl req -x509 -newkey rsa:2048 -nodes -keyout /k.pem -out /c.pem -subj /CN=index.corp.example -days 1 2>/dev/null
RUN (openssl s_server -quiet -accept 8443 -cert /c.pem -key /k.pem -www >/dev/null 2>&1 &); sleep 1; \
    export UV_NO_PROGRESS=1; uv venv /opt/venv; \
    uv pip install --python /opt/venv/bin/python --index-url https://127.0.0.1:8443/simple six
