"""A Starlette app served by uvicorn on a thread of the test process, on a free loopback port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def uvicorn_thread(app, ready_s: float = 300.0) -> Iterator[int]:
    """Serve ``app`` on 127.0.0.1 for the block; yields the port. Waits at most ``ready_s`` for
    the server to start (a hang guard: it starts in well under a second on an idle machine),
    and stops it when the block ends."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + ready_s
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        yield port
    finally:
        server.should_exit = True
        thread.join(20)
