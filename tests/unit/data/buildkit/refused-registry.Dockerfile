FROM 127.0.0.1:5999/torchyard-bf/base:1.0 AS os
RUN echo never
