"""The engine for `torchyard run`: its two reads on every start (`docker info`, image inspect) straight from the
engine's Unix socket. Importing the docker SDK alone takes about 0.5 s, run's whole overhead budget
(docs/benchmarks.md); pulls and everything else still go through the SDK. Where the engine is not a local Unix
socket (DOCKER_HOST tcp:// or ssh://) or the socket read fails, the SDK answers as for every other command."""

from __future__ import annotations

import http.client
import json
import os
import socket
from typing import Any
from urllib.parse import quote

from builder.engine.containers import DockerEngine
from builder.engine.images import image_info
from builder.engine.types import ImageInfo

DEFAULT_SOCKET = "/var/run/docker.sock"
TIMEOUT = 10.0


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=TIMEOUT)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(TIMEOUT)
        sock.connect(self.path)
        self.sock = sock


def local_socket() -> str | None:
    host = os.environ.get("DOCKER_HOST", "")
    if not host:
        return DEFAULT_SOCKET
    return host.removeprefix("unix://") if host.startswith("unix://") else None


def get(path: str) -> tuple[int, Any] | None:
    """(status, JSON body) of GET `path` on the local socket; None where it cannot be asked."""
    where = local_socket()
    if where is None:
        return None
    connection = _UnixConnection(where)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        connection.close()


class QuickEngine(DockerEngine):
    def daemon_info(self) -> dict[str, Any]:
        found = get("/info")
        if found is not None and found[0] == 200 and isinstance(found[1], dict):
            return found[1]
        return super().daemon_info()

    def inspect(self, ref: str) -> ImageInfo | None:
        found = get(f"/images/{quote(ref, safe='/:@')}/json")
        if found is not None and found[0] == 404:
            return None
        if found is not None and found[0] == 200 and isinstance(found[1], dict):
            return image_info(found[1])
        return super().inspect(ref)

    def labelled(self, label: str) -> list[ImageInfo]:
        listed = get("/images/json?filters=" + quote(json.dumps({"label": [label]})))
        if listed is None or listed[0] != 200 or not isinstance(listed[1], list):
            return super().labelled(label)
        found = (self.inspect(str(item.get("Id", ""))) for item in listed[1] if isinstance(item, dict))
        return [info for info in found if info is not None]
