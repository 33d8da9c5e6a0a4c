FROM 127.0.0.1:5000/torchyard-bf/no-such-image:1.0 AS os
RUN echo never
