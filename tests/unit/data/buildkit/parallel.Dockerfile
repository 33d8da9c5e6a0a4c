FROM torchyard-bf-base:py AS base
ARG NONCE=0
FROM base AS os-files
ARG NONCE
RUN echo "nonce $NONCE"; for i in $(seq 1 40); do echo "os-files line $i"; sleep 0.3; done
FROM base AS uv
ARG NONCE
RUN echo "fetching uv ($NONCE)"; sleep 1; export UV_NO_PROGRESS=1; uv venv /opt/venv; \
    uv pip install --python /opt/venv/bin/python --index-url http://127.0.0.1:9/simple six
FROM base AS build
ARG NONCE
RUN echo "nonce $NONCE"; for i in $(seq 1 40); do echo "build line $i"; sleep 0.25; done
FROM base AS venv
COPY --from=os-files /etc/hostname /a
COPY --from=uv /etc/hostname /b
COPY --from=build /etc/hostname /c
