FROM registry.no-such-host.invalid/torchyard/base:1.0 AS os
RUN echo never
