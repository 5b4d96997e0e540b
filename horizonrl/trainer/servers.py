"""Env servers for a training run: launched by the trainer (`env.launch: true`) or given by URL.

`env_servers(cfg)` is a context manager yielding `{family: url}` for the families that are
reached over HTTP; families not in it run in-process. Launched servers are `horizonrl serve`
subprocesses bound to `env.host` on consecutive ports from `env.base_port`; they are stopped
(and waited for, with whatever they started) when the context exits, also on errors.

Launched servers are supervised: a watcher thread notices one that exited (a crash, an OOM
kill), says so on stderr and starts it again on the same port, at most `max_restarts` times
within `restart_window_s` seconds. Past that it gives up on the server, says so, and the
context raises when it exits, so the run does not end as a success. The episodes in flight on
a server that died fail (their sessions died with it); the client waits for the restarted
server when it opens new sessions (`RemoteEnvPool(reconnect_s=...)`). Servers given by URL are
not ours to restart: a dead one fails the episodes that use it.

`start_env_servers(cfg)` is the same context yielding `EnvServers`, which also holds the
launched processes and their restart counts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx

from horizonrl.config import Config
from horizonrl.envs.registry import family_ref, get_family
from horizonrl.server.external import is_external
from horizonrl.trainer.workflows import RunAborted

STARTUP_TIMEOUT_S = 120.0
MAX_RESTARTS = 3
"""Restarts of one launched server allowed within `RESTART_WINDOW_S`; one more exit gives up."""
RESTART_WINDOW_S = 600.0
POLL_S = 0.5
"""How often the watcher checks that the launched servers are alive."""
RESTART_DELAY_S = 1.0
"""Pause before restarting a server that exited (one that crashes at once does not spin)."""
STOP_TIMEOUT_S = 30.0


def wait_healthy(
    url: str,
    process: subprocess.Popen[bytes] | None = None,
    timeout: float = STARTUP_TIMEOUT_S,
    stop: threading.Event | None = None,
) -> None:
    """Poll `url/healthz` until it answers 200; raise if the process dies, `stop` is set or time runs out."""
    stop = stop or threading.Event()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"env server for {url} exited with code {process.returncode} during startup")
        try:
            if httpx.get(f"{url}/healthz", timeout=2.0, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if stop.wait(0.2):
            raise RuntimeError(f"stopped waiting for env server {url}")
    raise TimeoutError(f"env server {url} not healthy after {timeout:.0f} s")


@dataclass
class LaunchedServer:
    """A `horizonrl serve` subprocess of this run (in its own process group) and its restarts."""

    family: str
    url: str
    cmd: list[str]
    process: subprocess.Popen[bytes]
    restarts: int = 0
    """Times it was started again after it exited."""
    restart_times: list[float] = field(default_factory=list)
    error: str | None = None
    """Why the watcher gave up on it (None while it is supervised)."""

    @classmethod
    def start(cls, family: str, url: str, cmd: list[str]) -> LaunchedServer:
        return cls(family, url, cmd, _spawn(cmd))


@dataclass
class EnvServers:
    urls: dict[str, str]
    """Family -> URL of every family reached over HTTP (launched or given)."""
    launched: dict[str, LaunchedServer]
    """Family -> the server this run launched for it."""


class ServerWatcher:
    """A thread that restarts launched servers that exited; `stop()` ends it before shutdown."""

    def __init__(
        self,
        servers: list[LaunchedServer],
        *,
        max_restarts: int = MAX_RESTARTS,
        restart_window_s: float = RESTART_WINDOW_S,
        restart_delay_s: float = RESTART_DELAY_S,
        poll_s: float = POLL_S,
    ) -> None:
        self.servers = servers
        self.max_restarts = max_restarts
        self.restart_window_s = restart_window_s
        self.restart_delay_s = restart_delay_s
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="env-server-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """No restart starts after this returns (one under way is abandoned; its process is kept
        in its `LaunchedServer`, for the caller to stop)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            for server in self.servers:
                if server.error is None and server.process.poll() is not None:
                    try:
                        self._restart(server)
                    except Exception as exc:  # noqa: BLE001 (e.g. OSError from Popen: stop supervising it)
                        server.error = f"env server {server.family} ({server.url}): restart failed: {exc!r}"
                        _say(server.error)

    def _restart(self, server: LaunchedServer) -> None:
        code = server.process.returncode
        _kill_group(server.process)  # what the dead server started (JVM / browser workers)
        now = time.monotonic()
        server.restart_times = [t for t in server.restart_times if now - t < self.restart_window_s]
        where = f"env server {server.family} ({server.url})"
        limit = f"at most {self.max_restarts} in {self.restart_window_s:g} s"
        if len(server.restart_times) >= self.max_restarts:
            server.error = (
                f"{where} exited with code {code} after {server.restarts} restarts ({limit}); gave up on it"
            )
            _say(f"{server.error}: its episodes fail from now on")
            return
        server.restarts += 1
        server.restart_times.append(now)
        _say(
            f"{where} exited with code {code}; restarting it in {self.restart_delay_s:g} s "
            f"(restart {server.restarts}, {limit})"
        )
        if self._stop.wait(self.restart_delay_s):
            return
        server.process = _spawn(server.cmd)
        try:
            wait_healthy(server.url, server.process, stop=self._stop)
        except TimeoutError as exc:
            _say(f"{exc}; killing it")
            server.process.kill()  # the next poll sees it exited: one more restart
            server.process.wait()
        except RuntimeError as exc:
            if not self._stop.is_set():
                _say(str(exc))
        else:
            _say(f"{where} is healthy again")


@contextmanager
def start_env_servers(
    cfg: Config,
    *,
    max_restarts: int = MAX_RESTARTS,
    restart_window_s: float = RESTART_WINDOW_S,
    restart_delay_s: float = RESTART_DELAY_S,
    poll_s: float = POLL_S,
) -> Iterator[EnvServers]:
    """Launch (when `env.launch`) and check the env servers; supervise the launched ones."""
    urls = {
        family: ",".join(u.strip().rstrip("/") for u in url.split(","))
        for family, url in cfg.env.servers.items()
    }
    launched: dict[str, LaunchedServer] = {}
    watcher: ServerWatcher | None = None
    try:
        if cfg.env.launch:
            families = list(dict.fromkeys([*cfg.data.families, *cfg.eval.families]))
            plugins = [arg for module in cfg.env.plugins for arg in ("--plugin", module)]
            for offset, family in enumerate(families):
                if family in urls or is_external(get_family(family)):  # an external family has its server
                    continue
                port = cfg.env.base_port + offset
                urls[family] = f"http://{cfg.env.host}:{port}"
                cmd = [sys.executable, "-m", "horizonrl.cli", *plugins, "serve", family_ref(family)]
                cmd += ["--host", cfg.env.host]
                launched[family] = LaunchedServer.start(family, urls[family], [*cmd, "--port", str(port)])
            for server in launched.values():
                wait_healthy(server.url, server.process)
        for given in urls.values():
            for url in given.split(","):  # several replicas of one family: "URL,URL"
                wait_healthy(url.strip(), timeout=30.0)
        watcher = ServerWatcher(
            list(launched.values()),
            max_restarts=max_restarts,
            restart_window_s=restart_window_s,
            restart_delay_s=restart_delay_s,
            poll_s=poll_s,
        )
        watcher.start()
        yield EnvServers(urls, launched)
    finally:
        if watcher is not None:
            watcher.stop()
        _stop_all([s.process for s in launched.values()])
    given_up = [s.error for s in launched.values() if s.error]
    if given_up:
        raise RunAborted("; ".join(given_up))  # horizonrl train turns it into a one-line exit


@contextmanager
def env_servers(cfg: Config) -> Iterator[dict[str, str]]:
    """`{family: url}` of the run's env servers (see the module docstring)."""
    with start_env_servers(cfg) as servers:
        yield servers.urls


def _say(message: str) -> None:
    print(f"horizonrl: {message}", file=sys.stderr, flush=True)


def _spawn(cmd: list[str]) -> subprocess.Popen[bytes]:
    # its own process group: a dead server's workers can be found and killed with it, and a
    # Ctrl-C on the trainer's terminal reaches the trainer, which then stops the servers
    return subprocess.Popen(cmd, start_new_session=True)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _stop_all(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM (a server closes its sessions and workers), SIGKILL after `STOP_TIMEOUT_S`,
    then SIGKILL whatever is left in their process groups."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        _kill_group(process)
