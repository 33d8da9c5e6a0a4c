FROM torchyard-bf-base:py AS base
FROM base AS build
RUN printf '%s\n' 'import http.server' 'class H(http.server.BaseHTTPRequestHandler):' \
    '    def do_GET(self):' \
    '        self.send_response(403); self.end_headers()' \
    'http.server.HTTPServer(("127.0.0.1", 8080), H).serve_forever()' > /srv.py
RUN (python3 /srv.py >/dev/null 2>&1 &); sleep 1; \
    export UV_NO_PROGRESS=1; uv venv /opt/venv; \
    uv pip install --python /opt/venv/bin/python --index-url http://ci:hunter2@127.0.0.1:8080/simple six
