# The single-stage Dockerfile most tutorials write, for bench/build_bench.py to compare against.
# Deviation from the tutorials: this network intercepts HTTPS, so pip gets the CA bundle as a BuildKit
# secret (nothing else changes: apt lists, pip's cache and the build tools stay in the image).
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y python3 python3-pip python3-venv
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
RUN --mount=type=secret,id=cacert PIP_CERT=/run/secrets/cacert pip install torch==2.14.1 torchvision==0.29.1 torchaudio==2.11.1
CMD ["python"]
