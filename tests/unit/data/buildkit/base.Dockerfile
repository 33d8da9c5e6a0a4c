FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-pip python3-venv ca-certificates openssl && rm -rf /var/lib/apt/lists/*
RUN --mount=type=secret,id=cacert PIP_CERT=/run/secrets/cacert pip install --break-system-packages uv==0.13.9 && uv --version
