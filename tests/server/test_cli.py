"""`horizonrl serve` as users run it: a process that says when it is ready and stops cleanly."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx

from tests.server.conftest import ROOT


def test_serve_textcraft_then_solve_through_it(serve_process) -> None:
    server = serve_process("textcraft", "--max-sessions", "8", "--idle-ttl", "60")
    health = httpx.get(f"{server.url}/healthz")
    assert health.status_code == 200 and health.json()["family"] == "textcraft"
    assert httpx.get(f"{server.url}/v1/info").json()["max_sessions"] == 8
    solve = subprocess.run(
        [
            sys.executable,
            "-m",
            "horizonrl.cli",
            "solve",
            "textcraft",
            "--split",
            "test",
            "--limit",
            "6",
            "--server",
            server.url,
            "--workers",
            "2",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
        timeout=120,
    )
    assert solve.returncode == 0, solve.stderr
    summary = json.loads(solve.stdout.strip().splitlines()[-1])
    assert (summary["n"], summary["success_rate"]) == (6, 1.0)
    assert httpx.get(f"{server.url}/healthz").json()["sessions"] == 0  # the solver closed its sessions
    assert "stopped, 0 open sessions closed" in server.stop()


def test_worker_processes_are_gone_after_sigterm(serve_process) -> None:
    server = serve_process("srvtoyproc")
    pids = []
    for item in ("srvtoyproc_1", "srvtoyproc_2"):
        sid = httpx.post(f"{server.url}/v1/sessions", json={"item_id": item}).json()["session_id"]
        pids.append(httpx.get(f"{server.url}/v1/sessions/{sid}").json()["worker_pid"])
    assert all(os.path.exists(f"/proc/{pid}") for pid in pids)
    assert "stopped, 2 open sessions closed" in server.stop()
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}"), f"worker {pid} outlived the server"


def test_bad_env_kwargs_are_refused() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "horizonrl.cli", "serve", "textcraft", "--env-kwargs", "[1]"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 2 and "JSON object" in result.stderr
