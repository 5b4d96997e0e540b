"""A FastAPI/ASGI app served by uvicorn on a free 127.0.0.1 port in a background thread."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn


class ThreadedServer:
    """Start `app` with uvicorn in a daemon thread; `url` once it accepts, `stop()` shuts it down."""

    def __init__(self, app: Any, *, start_timeout: float = 30.0, **uvicorn_kwargs: Any) -> None:
        options: dict[str, Any] = {"log_level": "warning", **uvicorn_kwargs}
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, **options))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + start_timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
