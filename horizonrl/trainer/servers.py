"""Env servers for a training run: launched by the trainer (`env.launch: true`) or given by URL.

`env_servers(cfg)` is a context manager yielding `{family: url}` for the families that are
reached over HTTP; families not in it run in-process. Launched servers are `horizonrl serve`
subprocesses bound to `env.host` on consecutive ports from `env.base_port`; they are stopped
(and waited for) when the context exits, also on errors.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from horizonrl.config import Config

STARTUP_TIMEOUT_S = 120.0


def wait_healthy(
    url: str, process: subprocess.Popen[bytes] | None = None, timeout: float = STARTUP_TIMEOUT_S
) -> None:
    """Poll `url/healthz` until it answers 200; raise if the process dies or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"env server for {url} exited with code {process.returncode} during startup")
        try:
            if httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"env server {url} not healthy after {timeout:.0f} s")


@contextmanager
def env_servers(cfg: Config) -> Iterator[dict[str, str]]:
    urls = {family: url.rstrip("/") for family, url in cfg.env.servers.items()}
    launched: list[tuple[subprocess.Popen[bytes], str]] = []
    try:
        if cfg.env.launch:
            families = list(dict.fromkeys([*cfg.data.families, *cfg.eval.families]))
            for offset, family in enumerate(families):
                if family in urls:
                    continue
                port = cfg.env.base_port + offset
                cmd = [sys.executable, "-m", "horizonrl.cli", "serve", family, "--host", cfg.env.host]
                urls[family] = f"http://{cfg.env.host}:{port}"
                launched.append((subprocess.Popen([*cmd, "--port", str(port)]), urls[family]))
            for process, url in launched:
                wait_healthy(url, process)
        for url in urls.values():
            wait_healthy(url, timeout=30.0)
        yield urls
    finally:
        for process, _ in launched:
            process.terminate()
        for process, _ in launched:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
