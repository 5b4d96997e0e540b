"""RemoteEnvPool across an env server outage: a real `horizonrl serve textcraft`, killed and
started again on its port while the pool's episodes are in flight."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from horizonrl.envs.core import EnvError
from horizonrl.rollout.envpool import RemoteEnvPool
from tests.ports import free_port

pytestmark = pytest.mark.timeout(120)


def _serve(port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "horizonrl.cli", "serve", "textcraft", "--port", str(port)]
    return subprocess.Popen(cmd, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})


def _wait_healthy(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise TimeoutError(url)


def test_an_outage_fails_the_sessions_in_flight_and_new_sessions_wait_for_the_server() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = _serve(port)
    processes = [server]

    async def main() -> None:
        nonlocal server
        pool = RemoteEnvPool(url, "textcraft", timeout=10.0, reconnect_s=30.0)
        stepping, idle = await pool.acquire(), await pool.acquire()
        await stepping.reset("textcraft_0", seed=0)
        await idle.reset("textcraft_1", seed=0)
        assert (await stepping.step("inventory")).observation  # keep-alive connections in the pool

        os.kill(server.pid, signal.SIGKILL)
        server.wait()
        start = time.monotonic()
        with pytest.raises(
            EnvError, match=r"step failed .*(cannot connect|connection to the server was lost)"
        ):
            await stepping.step("inventory")
        assert time.monotonic() - start < 5.0
        await pool.release(stepping, broken=True)  # the server is gone: closing must not raise

        # an episode starting during the outage waits for the server to come back
        fresh = await pool.acquire()
        starting = asyncio.ensure_future(fresh.reset("textcraft_2", seed=0))
        await asyncio.sleep(1.0)
        assert not starting.done()
        server = _serve(port)
        processes.append(server)
        observation, _ = await asyncio.wait_for(starting, 30.0)
        assert "Crafting commands" in observation
        assert (await fresh.step("inventory")).observation

        # the old session is not reused on the new server: its episode fails, closing it is quiet
        old_id = idle.session_id  # type: ignore[attr-defined]
        assert fresh.session_id != old_id  # type: ignore[attr-defined]
        with pytest.raises(EnvError, match=rf"session {old_id}: step -> HTTP 404 unknown_session"):
            await idle.step("inventory")
        await pool.release(idle, broken=True)  # DELETE of a session this server never had: 404
        await pool.release(fresh)
        await pool.aclose()

    try:
        _wait_healthy(url)
        asyncio.run(main())
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)
