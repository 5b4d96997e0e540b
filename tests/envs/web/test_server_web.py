"""`horizonrl serve web` as users run it (a subprocess), real Chromium in its workers: both route
sets, check_env through HTTP, isolation between sessions, a killed browser, no Chromium left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import httpx
import psutil
import pytest

from horizonrl.envs.checker import check_env
from horizonrl.envs.registry import get_family
from horizonrl.envs.web import tasks
from horizonrl.envs.web.expert import WebExpert
from horizonrl.server.client import RemoteEnv
from tests.ports import free_port

SPEC = get_family("web")


class Server:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k != "HORIZONRL_WEB_SITES"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "horizonrl.cli", "serve", "web", "--port", str(self.port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "ready on" in line, line + self.proc.stdout.read()
        self.http = httpx.Client(base_url=self.url, timeout=120, trust_env=False)

    def descendants(self) -> list[psutil.Process]:
        return psutil.Process(self.proc.pid).children(recursive=True)

    def chromiums(self) -> list[psutil.Process]:
        return [p for p in self.descendants() if "chrom" in p.name()]

    def close(self) -> None:
        self.http.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        if self.proc.stdout:
            self.proc.stdout.close()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def solution_actions(server: Server, item: str) -> tuple[str, list[dict]]:
    """Open a v1 session on `item` and play the expert to its last step before `stop`."""
    reply = server.http.post("/v1/sessions", json={"item_id": item, "seed": 0})
    assert reply.status_code == 201, reply.text
    body = reply.json()
    expert = WebExpert()
    expert.reset(item, body["observation"], body["info"])
    observation, results = body["observation"], []
    while expert.position < len(expert.steps) - 1:
        _, action = expert.act(observation)
        step = server.http.post(f"/v1/sessions/{body['session_id']}/step", json={"action": action}).json()
        observation = step["observation"]
        results.append(step)
    return body["session_id"], results


def test_check_env_through_the_server(server: Server) -> None:
    test = SPEC.split("test")
    items = [next(i for i in test if SPEC.category_of(i) == c) for c in SPEC.categories[2:]]
    env = RemoteEnv(server.url, family="web")
    try:
        check_env(env, SPEC, item_ids=items, n_actions=3)
    finally:
        env.close()


def test_agentgym_routes(server: Server) -> None:
    created = server.http.post("/create", json={}).json()
    idx = created["env_idx"]
    reset = server.http.post("/reset", json={"env_idx": idx, "seed": 0, "idx": 1}).json()
    assert set(reset) == {"observation", "sites", "object"}
    assert reset["sites"] == tasks.get_task("web_1")["sites"] and "OBJECTIVE: " in reset["observation"]
    step = server.http.post("/step", json={"env_idx": idx, "action": "stop [nothing]"}).json()
    assert set(step) == {"observation", "reward", "terminated", "truncated", "info"}
    assert step["terminated"] is True and step["truncated"] is False
    assert server.http.post("/close", json={"env_idx": idx}).status_code == 200


def test_concurrent_sessions_do_not_see_each_other(server: Server) -> None:
    """Two sessions on one state-changing task: what one changes the other never sees."""
    item = next(i for i in SPEC.split("test") if "db_state" in tasks.get_task(i)["eval"]["eval_types"])
    changed, _ = solution_actions(server, item)
    fresh = server.http.post("/v1/sessions", json={"item_id": item, "seed": 0}).json()
    scored = server.http.post(f"/v1/sessions/{fresh['session_id']}/step", json={"action": "stop []"}).json()
    assert scored["reward"] == 0.0  # the change made in `changed` is not in this session's data
    solution = tasks.get_task(item)["horizonrl"]["solution"]
    final = server.http.post(
        f"/v1/sessions/{changed}/step", json={"action": f"stop [{solution[-1].get('answer', '')}]"}
    ).json()
    assert final["reward"] == 1.0 and final["info"]["success"] is True
    for sid in (changed, fresh["session_id"]):
        server.http.delete(f"/v1/sessions/{sid}")


def test_killed_browser_fails_only_its_session(server: Server) -> None:
    item = SPEC.split("test")[0]
    victim = server.http.post("/v1/sessions", json={"item_id": item}).json()["session_id"]
    other = server.http.post("/v1/sessions", json={"item_id": item}).json()["session_id"]
    worker = server.http.get(f"/v1/sessions/{victim}").json()["worker_pid"]
    browsers = [  # Chromium's browser process (not the /bin/sh wrapper, not its helpers)
        p for p in psutil.Process(worker).children(recursive=True)
        if "chrom" in p.exe() and "--type=" not in " ".join(p.cmdline())
    ]  # fmt: skip
    assert len(browsers) == 1
    browsers[0].kill()
    browsers[0].wait(10)
    failed = server.http.post(f"/v1/sessions/{victim}/step", json={"action": "scroll [down]"})
    assert failed.status_code == 503 and failed.json()["error"]["code"] == "backend_failed"
    assert "browser" in failed.json()["error"]["message"]
    fine = server.http.post(f"/v1/sessions/{other}/step", json={"action": "scroll [down]"})
    assert fine.status_code == 200 and "OBSERVATION:" in fine.json()["observation"]
    revived = server.http.post(f"/v1/sessions/{victim}/reset", json={"item_id": item})
    assert revived.status_code == 200  # a reset gives the session a new worker and browser
    for sid in (victim, other):
        server.http.delete(f"/v1/sessions/{sid}")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_no_chromium_survives_the_server(how: str) -> None:
    server = Server()
    try:
        for _ in range(2):
            assert server.http.post("/v1/sessions", json={"item_id": "web_0"}).status_code == 201
        chromiums = server.chromiums()
        everything = server.descendants()
        assert len(chromiums) >= 4  # two browsers, each with its helpers
        server.proc.send_signal(getattr(signal, how))
        server.proc.wait(30)
        _, alive = psutil.wait_procs(everything, timeout=15)
        assert [p for p in alive if p in chromiums] == [], f"Chromium outlived the server ({how})"
        assert alive == [], f"processes outlived the server ({how}): {[p.cmdline()[:2] for p in alive]}"
    finally:
        server.close()
