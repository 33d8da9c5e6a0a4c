"""A TCP proxy in front of a registry that counts the bytes clients send through it and drops a connection
once those bytes pass a mark: the "dropped connection at 90 %" of a large push, made repeatable.

Plain TCP (the local registry speaks HTTP): each accepted connection gets its own upstream connection and
two pump threads. Two kinds of cut:
- `drops_at`: when the count of bytes sent upstream (all connections together) first reaches a mark, the
  connection carrying them is closed on both sides in the middle of its request, as a lost network would;
- `cut_patches`: the Nth PATCH request (counted from 1) is cut as it begins, before any of it reaches the
  registry (a connection lost between two chunks).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class DropProxy:
    def __init__(
        self, upstream: tuple[str, int], drops_at: tuple[int, ...] = (), cut_patches: tuple[int, ...] = ()
    ) -> None:
        self.upstream = upstream
        self.marks = sorted(drops_at)  # bytes sent upstream at which a connection is cut, each mark once
        self.cut_patches = set(cut_patches)
        self.patches = 0  # PATCH requests seen
        self.sent = 0  # bytes clients sent toward the registry, headers included
        self.drops = 0
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._closing = False

    @property
    def address(self) -> str:
        host, port = self._server.getsockname()[:2]
        return f"{host}:{port}"

    def start(self) -> None:
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closing = True
        self._server.close()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if counted:
                    data, cut = self._count(data)
                    if cut:
                        sink.sendall(data)
                        break
                sink.sendall(data)
        except OSError:
            pass
        _shut(source)
        _shut(sink)

    def _count(self, data: bytes) -> tuple[bytes, bool]:
        """The part of `data` that goes upstream, and whether the connection is cut after it. A request
        starts a read: without pipelining, a client waits for the answer before its next request."""
        with self._lock:
            if data.startswith(b"PATCH "):
                self.patches += 1
                if self.patches in self.cut_patches:
                    self.drops += 1
                    return b"", True
            if self.marks and self.sent + len(data) >= self.marks[0]:
                keep = max(0, self.marks.pop(0) - self.sent)
                self.sent += keep
                self.drops += 1
                return data[:keep], True
            self.sent += len(data)
            return data, False


def _shut(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@contextmanager
def drop_proxy(upstream: str, drops_at: tuple[int, ...] = (), cut_patches: tuple[int, ...] = ()) -> Iterator[DropProxy]:
    host, _, port = upstream.rpartition(":")
    proxy = DropProxy((host, int(port)), drops_at, cut_patches)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.close()
