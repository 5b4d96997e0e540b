"""SciWorld through `horizonrl serve sciworld` (a real server process, one JVM per session)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from horizonrl.envs.checker import check_env
from horizonrl.envs.registry import get_family
from horizonrl.envs.sciworld.expert import GOLD_PATHS
from horizonrl.eval.solve import solve_items
from horizonrl.server.client import RemoteEnv

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
MAX_SESSIONS = 2


class Server:
    """`horizonrl serve sciworld` on a free port, in a process of its own."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "horizonrl.cli", "serve", "sciworld", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert "ready on " in line, f"server did not start: {line!r}"
        self.url = line.rsplit("ready on ", 1)[1].strip()
        self.http = httpx.Client(base_url=self.url, timeout=120, trust_env=False)

    def open_session(self, item_id: str = "sciworld_0") -> str:
        response = self.http.post("/v1/sessions", json={"item_id": item_id})
        assert response.status_code == 201, response.text
        return str(response.json()["session_id"])

    def jvm_of(self, sid: str) -> int:
        worker = self.http.get(f"/v1/sessions/{sid}").json()["worker_pid"]
        jvms = [p for p in descendants(worker) if "java" in cmdline(p)]
        assert len(jvms) == 1, f"worker {worker} runs {len(jvms)} JVMs"
        return jvms[0]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.http.close()
        if self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(60)
        assert self.process.stdout is not None
        self.process.stdout.close()


def children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


def descendants(pid: int) -> list[int]:
    found = children(pid)
    for kid in list(found):
        found += descendants(kid)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def wait_gone(pids: list[int], timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(running(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if running(p)]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    server = Server("--max-sessions", str(MAX_SESSIONS))
    yield server
    server.stop()
    GOLD_PATHS.close()


def test_check_env_through_the_server(server: Server) -> None:
    spec = get_family("sciworld")
    remote = RemoteEnv(server.url, family="sciworld")
    try:
        item = next(i for i in spec.split("test") if spec.category_of(i) == "classification")
        check_env(remote, spec, [item])
        remote.reset("sciworld_0")
        assert "open door to kitchen" in (remote.available_actions() or [])
    finally:
        remote.close()


def test_expert_scores_1_on_test_items_of_all_six_categories_through_the_server(server: Server) -> None:
    spec = get_family("sciworld")
    per_category: dict[str, list[str]] = {c: [] for c in spec.categories}
    for item_id in spec.split("test"):
        category_items = per_category[spec.category_of(item_id)]
        if len(category_items) < 4:
            category_items.append(item_id)
    items = [i for ids in per_category.values() for i in ids]
    trajectories = solve_items(
        lambda: RemoteEnv(server.url, family="sciworld"), spec, items, max_turns=200, workers=2
    )
    solved = [t for t in trajectories if t.success and t.score == 1.0]
    assert not [t for t in trajectories if t.failed]
    assert len(solved) >= 20, [(t.item_id, t.score) for t in trajectories if not t.success]
    assert set(Counter(t.category for t in solved)) == set(spec.categories)


def test_killed_jvm_fails_only_its_own_session(server: Server) -> None:
    victim, bystander = server.open_session("sciworld_0"), server.open_session("sciworld_30")
    try:
        os.kill(server.jvm_of(victim), signal.SIGKILL)
        response = server.http.post(f"/v1/sessions/{victim}/step", json={"action": "look around"})
        assert response.status_code == 503 and response.json()["error"]["code"] == "backend_failed"
        message = response.json()["error"]["message"]
        assert "JVM" in message and "died" in message and "Traceback" not in message
        response = server.http.post(f"/v1/sessions/{bystander}/step", json={"action": "look around"})
        assert response.status_code == 200 and "This room is called" in response.json()["observation"]
    finally:
        for sid in (victim, bystander):
            server.http.delete(f"/v1/sessions/{sid}")


def test_session_cap_answers_429(server: Server) -> None:
    sids = [server.open_session() for _ in range(MAX_SESSIONS)]
    try:
        response = server.http.post("/v1/sessions", json={"item_id": "sciworld_0"})
        assert response.status_code == 429 and "sessions" in response.json()["error"]["message"]
    finally:
        for sid in sids:
            server.http.delete(f"/v1/sessions/{sid}")


def test_agentgym_routes_give_the_reference_fields(server: Server) -> None:
    env_id = server.http.post("/create").json()["id"]
    try:
        reset = server.http.post("/reset", json={"id": env_id, "data_idx": 30}).json()
        assert (reset["task_name"], reset["var_num"], reset["score"], reset["done"]) == ("melt", 0, 0, False)
        assert reset["task_description"].startswith("Your task is to melt")
        assert reset["observation"].startswith("This room is called")
        step = server.http.post("/step", json={"id": env_id, "action": "look around"}).json()
        assert set(step) == {"observation", "reward", "score", "done"} and step["done"] is False
    finally:
        server.http.post("/close", json={"id": env_id})


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["shutdown", "killed"])
def test_no_jvm_outlives_the_server(sig: int) -> None:
    server = Server("--max-sessions", "2")
    try:
        jvms = [server.jvm_of(server.open_session()) for _ in range(2)]
        workers = [p for p in descendants(server.process.pid) if p not in jvms]
        assert all(running(p) for p in jvms)
    finally:
        server.stop(sig)
    assert wait_gone(jvms) == [], "JVMs left behind after the server stopped"
    assert wait_gone(workers) == []
