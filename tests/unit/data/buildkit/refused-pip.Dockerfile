FROM torchyard-bf-base:py AS base
FROM base AS venv
WORKDIR /w
RUN echo preparing the venv
RUN pip download --no-cache-dir --retries 1 --timeout 5 --index-url http://127.0.0.1:9/simple six
