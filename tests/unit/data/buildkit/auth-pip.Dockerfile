FROM torchyard-bf-base:py AS base
FROM base AS venv
RUN printf '%s\n' 'import http.server' 'class H(http.server.BaseHTTPRequestHandler):' \
    '    def do_GET(self):' \
    '        self.send_response(401); self.send_header("WWW-Authenticate", "Basic realm=index"); self.end_headers()' \
    'http.server.HTTPServer(("127.0.0.1", 8080), H).serve_forever()' > /srv.py
RUN (python3 /srv.py >/dev/null 2>&1 &); sleep 1; \
    pip download --no-cache-dir --no-input --retries 0 --index-url http://ci:hunter2@127.0.0.1:8080/simple six
