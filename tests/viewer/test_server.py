"""`horizonrl view` as a real server process: it prints its URL and answers the page and the API."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx


def test_view_command_serves_page_and_api(runs_root, tmp_path):
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    cmd = [sys.executable, "-m", "horizonrl.cli", "view", str(runs_root), "--port", "0"]
    with (
        (tmp_path / "stderr.txt").open("w") as stderr,
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env) as proc,
    ):
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # printed once the socket listens
            assert " at http://127.0.0.1:" in line, (line, (tmp_path / "stderr.txt").read_text())
            url = line.rsplit(" at ", 1)[1].strip()
            # The socket already listens, so this waits for uvicorn's loop instead of being refused.
            page = httpx.get(url, timeout=30)
            assert page.status_code == 200 and "/static/app.js" in page.text
            runs = httpx.get(url + "api/runs", timeout=10).json()["runs"]
            assert "ppo" in {r["id"] for r in runs}
            traj = httpx.get(url + "api/runs/ppo/trajectories/step_1/0", timeout=10).json()
            assert traj["record"]["item_id"] == "textcraft_0"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_view_command_refuses_a_missing_folder(tmp_path):
    cmd = [sys.executable, "-m", "horizonrl.cli", "view", str(tmp_path / "nope")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "does not exist" in done.stderr
