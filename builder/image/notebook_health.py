"""The notebook image's HEALTHCHECK (/usr/local/bin/notebook-healthcheck.py, run by the venv's Python; standard
library only): healthy (exit 0) only when GET http://127.0.0.1:${JUPYTER_PORT}${JUPYTER_BASE_URL:-/}api answers
200. It reads the container's environment, not the server's arguments: a base URL given only in NOTEBOOK_ARGS is
not seen, so that container turns unhealthy (docs/render.md, The notebook image)."""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping

TIMEOUT = 2.0  # under the HEALTHCHECK's own --timeout


def api_url(env: Mapping[str, str]) -> str:
    """The server's /api URL on the loopback, from JUPYTER_PORT (8888) and JUPYTER_BASE_URL (/)."""
    port = env.get("JUPYTER_PORT") or "8888"
    base = "/" + (env.get("JUPYTER_BASE_URL") or "").strip("/")
    return f"http://127.0.0.1:{port}{base.rstrip('/')}/api"


def status_of(url: str) -> int | str:
    """The HTTP status, or why there is none (refused, timed out). No proxy: the server is on the loopback."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=TIMEOUT) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError) as exc:  # URLError, a refused connection, a timeout, a bad port
        return f"{type(exc).__name__}: {exc}"


def main(env: Mapping[str, str]) -> int:
    url = api_url(env)
    status = status_of(url)
    print(f"GET {url}: {status}")
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main(os.environ))
