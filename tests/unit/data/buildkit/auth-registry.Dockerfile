FROM 127.0.0.1:5001/torchyard-e2e/private:1.0 AS os
RUN echo never
