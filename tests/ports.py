"""Ports for the servers tests start: every one binds 127.0.0.1."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it; closed again before it is returned)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dead_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens: a server that is down."""
    return f"http://127.0.0.1:{free_port()}"
