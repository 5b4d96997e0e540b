"""Fixtures: a real uvicorn server on a free 127.0.0.1 port, in a background thread."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tests.server.toyenv  # noqa: F401 - registers the toy families
from horizonrl.server.app import create_app, uvicorn_options
from tests.threaded_server import ThreadedServer


class ServerThread(ThreadedServer):
    """`create_app(...)` served by uvicorn in a thread; `url` once started, `stop()` runs shutdown."""

    def __init__(self, family: str, **app_kwargs: Any) -> None:
        self.app = create_app(family, **app_kwargs)
        self.store = self.app.state.store
        super().__init__(self.app, start_timeout=20.0, **uvicorn_options("warning"))


class ServerProcess:
    """`horizonrl serve FAMILY --port 0 ...` in a subprocess (the toy families registered first)."""

    def __init__(self, family: str, *args: str) -> None:
        code = "import sys, tests.server.toyenv; from horizonrl.cli import main; sys.exit(main(sys.argv[1:]))"
        cmd = [sys.executable, "-c", code, "serve", family, "--port", "0", *args]
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # "horizonrl serve F: ready on http://127.0.0.1:PORT"
        if "ready on " not in line:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r}")
        self.url = line.split("ready on ")[1].strip()

    def stop(self) -> str:
        """SIGTERM, as a process manager would; returns what the server printed on its way out.

        uvicorn re-raises the signal after its graceful shutdown, so the exit status is -15.
        """
        if self.proc.poll() is None:
            self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        return str(out)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def serve_process() -> Iterator[Callable[..., ServerProcess]]:
    """`serve_process(family, *cli_args)` starts `horizonrl serve` in a subprocess."""
    started: list[ServerProcess] = []

    def start(family: str, *args: str) -> ServerProcess:
        server = ServerProcess(family, *args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def serve() -> Iterator[Callable[..., ServerThread]]:
    """`serve(family, **create_app_kwargs)` starts a server, stopped at the end of the test."""
    started: list[ServerThread] = []

    def start(family: str, **kwargs: Any) -> ServerThread:
        server = ServerThread(family, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
