"""Serving the five sites: one child process, one loopback port per site, tied to its parent.

    with start_sites() as sites:                    # ports picked by the OS
        sites.urls["shopping"]                      # "http://127.0.0.1:41234"
        sites.reset_tenant("s1")                    # fresh copy of the template for tenant s1
        sites.query("s1", "SELECT COUNT(*) FROM cart_items")   # [[0]]

The child (`python -m horizonrl.envs.web.sites.child`) binds every port itself, prints one JSON
line `{site: port}` and serves all five Starlette apps on one event loop. It keeps its tenants'
databases in a temporary directory that it deletes on exit, and it exits when its parent dies:
PR_SET_PDEATHSIG (Linux; set only when the sites are started from the main thread, since the
signal follows the thread that forked) plus a watchdog that polls the parent pid twice a second.

Worker processes attach to sites their parent started with `RunningSites.from_env()` (JSON in
`HORIZONRL_WEB_SITES`, written by `to_env()`); an attached handle's `stop()` does nothing.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from horizonrl.envs.web.sites.tenants import ADMIN_HEADER

SITE_NAMES = ("shopping", "shopping_admin", "reddit", "gitlab", "map")
"""The sites as WebArena names them in a task's `sites` field."""
ENV_VAR = "HORIZONRL_WEB_SITES"
TOKEN_VAR = "HORIZONRL_WEB_ADMIN_TOKEN"
"""How the admin token reaches the child (an environment variable, not its command line)."""
START_TIMEOUT_S = 60.0


class SitesError(RuntimeError):
    """The sites process could not start, or an admin call failed."""


@dataclass
class RunningSites:
    """Handle on the sites process: its URLs, the admin token, and the tenant helpers."""

    urls: dict[str, str]
    """Site name -> base URL without a trailing slash, e.g. `http://127.0.0.1:41234`."""
    admin_token: str
    """Value of the `X-Horizonrl-Admin` header that the admin routes require."""
    process: subprocess.Popen | None = None
    """The child process, or None for a handle attached with `from_env()`."""
    pid: int | None = None
    _client: httpx.Client | None = field(default=None, repr=False)

    def _admin(self, method: str, path: str, **kwargs: Any) -> Any:
        if self._client is None:
            self._client = httpx.Client(timeout=30.0)
        response = self._client.request(
            method,
            f"{self.urls['shopping']}/__horizonrl__/{path}",
            headers={ADMIN_HEADER: self.admin_token},
            **kwargs,
        )
        if response.status_code != 200:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:200]
            raise SitesError(f"{method} {path}: HTTP {response.status_code}: {message}")
        return response.json()

    def reset_tenant(self, token: str) -> None:
        """Give `token` a fresh copy of the template database (the exact start state)."""
        self._admin("POST", f"tenants/{token}/reset")

    def query(self, token: str, sql: str) -> list[list]:
        """Rows of `sql` on `token`'s database, over a read-only connection."""
        rows: list[list] = self._admin("POST", f"tenants/{token}/query", json={"sql": sql})["rows"]
        return rows

    def drop_tenant(self, token: str) -> bool:
        """Delete `token`'s database; False if it had none."""
        return bool(self._admin("DELETE", f"tenants/{token}")["dropped"])

    def to_env(self) -> str:
        """JSON for the `HORIZONRL_WEB_SITES` variable of child processes."""
        return json.dumps({"urls": self.urls, "admin_token": self.admin_token, "pid": self.pid})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RunningSites | None:
        """Attach to sites started by a parent process, or None if `HORIZONRL_WEB_SITES` is unset."""
        raw = (os.environ if environ is None else environ).get(ENV_VAR)
        if not raw:
            return None
        try:
            data = json.loads(raw)
            return cls(urls=dict(data["urls"]), admin_token=str(data["admin_token"]), pid=data.get("pid"))
        except (ValueError, KeyError, TypeError) as exc:
            raise SitesError(f"{ENV_VAR} is not what RunningSites.to_env() writes: {exc}") from exc

    def stop(self) -> None:
        """Stop the sites process (SIGTERM, then SIGKILL after 5 s); a no-op for attached handles."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> RunningSites:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_sites(host: str = "127.0.0.1", ports: dict[str, int] | None = None) -> RunningSites:
    """Start all five sites in one child process and wait until each answers.

    `ports` maps site names to ports; a missing site or port 0 gets a free port.
    """
    ports = dict(ports or {})
    unknown = set(ports) - set(SITE_NAMES)
    if unknown:
        raise ValueError(f"unknown sites {sorted(unknown)}; sites: {', '.join(SITE_NAMES)}")
    token = secrets.token_hex(16)
    main_thread = threading.current_thread() is threading.main_thread()
    cmd = [
        sys.executable,
        "-m",
        "horizonrl.envs.web.sites.child",
        "--host",
        host,
        "--ports",
        json.dumps({s: int(ports.get(s, 0)) for s in SITE_NAMES}),
        "--parent",
        str(os.getpid()),
        "--pdeathsig",
        "1" if main_thread else "0",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env={**os.environ, TOKEN_VAR: token})
    try:
        bound = _read_ports(proc)
        display = f"[{host}]" if ":" in host else host
        sites = RunningSites({s: f"http://{display}:{bound[s]}" for s in SITE_NAMES}, token, proc, proc.pid)
        _wait_ready(proc, sites.urls)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return sites


def _read_ports(proc: subprocess.Popen) -> dict[str, int]:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=START_TIMEOUT_S):
            raise SitesError(f"the web sites process sent no ports within {START_TIMEOUT_S:.0f} s")
    line = proc.stdout.readline()
    proc.stdout.close()
    if not line:
        raise SitesError(
            f"the web sites process exited ({proc.wait()}) before it bound its ports (its error is above)"
        )
    return {k: int(v) for k, v in json.loads(line).items()}


def _wait_ready(proc: subprocess.Popen, urls: dict[str, str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    with httpx.Client(timeout=2.0) as client:
        for site, base in urls.items():
            while True:
                if proc.poll() is not None:
                    raise SitesError(
                        f"the web sites process exited with code {proc.returncode} while starting"
                    )
                try:
                    if client.get(f"{base}/__horizonrl__/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SitesError(f"site {site} at {base} did not answer within {START_TIMEOUT_S:.0f} s")
                time.sleep(0.05)


WEBARENA_VARIABLES = {"shopping": "SHOPPING", "shopping_admin": "SHOPPING_ADMIN", "reddit": "REDDIT",
                      "gitlab": "GITLAB", "map": "MAP"}  # fmt: skip


def web_sites_main(args: Any) -> int:
    """`horizonrl web-sites [--host H] [--port-base P]`: serve the sites until Ctrl-C."""
    ports = {s: args.port_base + i for i, s in enumerate(SITE_NAMES)} if args.port_base else None
    try:
        sites = start_sites(args.host, ports)
    except SitesError as exc:
        print(f"horizonrl: error: {exc}", file=sys.stderr)
        return 1
    with sites:
        for site, url in sites.urls.items():
            print(f"{site:<15} {url}")
        print(f"admin token     {sites.admin_token}")
        exports = " ".join(f"{WEBARENA_VARIABLES[s]}={u}" for s, u in sites.urls.items())
        print(f"WebArena's variables: export {exports}", flush=True)
        assert sites.process is not None
        try:
            return sites.process.wait()
        except KeyboardInterrupt:
            return 0
