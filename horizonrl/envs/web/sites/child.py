"""The sites' child process: `python -m horizonrl.envs.web.sites.child --parent PID ...`.

Started by `start_sites()`; binds one socket per site, prints `{site: port}` as one JSON line on
stdout, serves the five apps on one event loop and exits on SIGTERM/SIGINT or when its parent
dies (PR_SET_PDEATHSIG when asked, and a watchdog polling the parent pid). Its tenants' files
live in a temporary directory removed on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from horizonrl.envs.web.sites.runner import SITE_NAMES, TOKEN_VAR


def _die_with_parent(parent: int, pdeathsig: bool) -> None:
    if pdeathsig and sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl took effect
        sys.exit(0)


async def _serve(host: str, ports: dict[str, int], parent: int, token: str, data_dir: Path) -> None:
    import uvicorn

    from horizonrl.envs.web.sites.apps import build_apps
    from horizonrl.envs.web.sites.data import template_path
    from horizonrl.envs.web.sites.tenants import TenantStore

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:  # one handler below stops all five servers
            yield

    store = TenantStore(template_path(), data_dir)
    apps = build_apps(store, token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: dict[str, socket.socket] = {}
    for site in SITE_NAMES:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it
        try:
            sock.bind((host, ports[site]))
        except OSError as exc:
            sys.exit(f"horizonrl web sites: cannot bind {site} to {host}:{ports[site]}: {exc.strerror}")
        sock.listen(128)
        sockets[site] = sock
    servers = [
        _Server(uvicorn.Config(apps[s], log_level="warning", access_log=False, lifespan="off"))
        for s in SITE_NAMES
    ]

    def stop_all() -> None:
        for server in servers:
            server.should_exit = True

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_all)

    async def watchdog() -> None:
        while os.getppid() == parent:
            await asyncio.sleep(0.5)
        stop_all()

    print(json.dumps({s: sock.getsockname()[1] for s, sock in sockets.items()}), flush=True)
    watch = asyncio.ensure_future(watchdog())
    await asyncio.gather(
        *(srv.serve(sockets=[sockets[s]]) for srv, s in zip(servers, SITE_NAMES, strict=True))
    )
    watch.cancel()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the web family's sites (started by start_sites)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--ports", default="{}", help="JSON {site: port}; 0 = a free port")
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--pdeathsig", default="1")
    args = parser.parse_args(argv)
    _die_with_parent(args.parent, args.pdeathsig == "1")
    token = os.environ.pop(TOKEN_VAR, "")
    if not token:
        sys.exit(f"{TOKEN_VAR} is not set: start the sites with horizonrl.envs.web.sites.start_sites")
    ports = {s: 0 for s in SITE_NAMES} | {k: int(v) for k, v in json.loads(args.ports).items()}
    data_dir = Path(tempfile.mkdtemp(prefix="horizonrl-web-tenants-"))
    try:
        asyncio.run(_serve(args.host, ports, args.parent, token, data_dir))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
