"""The env server over real HTTP (uvicorn on a free port): TextCraft through the reference's
routes, the client, concurrency, and worker processes."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import threading
import time

import httpx
import pytest

from horizonrl.envs.checker import check_env
from horizonrl.envs.core import EnvError, UnknownItemError
from horizonrl.envs.registry import get_family
from horizonrl.server.client import AsyncRemoteEnv, RemoteEnv
from horizonrl.server.schemas import MAX_BODY_BYTES

TEXTCRAFT = get_family("textcraft")


def reference_action(action: str) -> str:
    """What the reference's TextCraft client does to an action before sending it."""
    action = re.sub(r"[^A-Za-z0-9, ]+", "", action)
    return " ".join(action.split()).strip()


def test_reference_routes_play_textcraft_items_to_reward_1(serve) -> None:
    server = serve("textcraft")
    with httpx.Client(base_url=server.url, timeout=10) as http:
        play_with_reference_routes(http)


def play_with_reference_routes(http: httpx.Client) -> None:
    # the reference client's create body, and the fields it reads from the answer
    created = http.post(
        "/create", json={"minecraft_dir": "agentenv_textcraft/", "commands": None, "goal": None}
    )
    assert created.status_code == 200
    env_id = created.json()["id"]
    assert isinstance(env_id, int) and created.json()["observation"] and created.json()["done"] is False
    test_items = TEXTCRAFT.split("test")
    items = [next(i for i in test_items if TEXTCRAFT.category_of(i) == f"depth {d}") for d in (1, 2, 3, 4)]
    for item in items:
        index = int(item.rsplit("_", 1)[1])
        reset = http.post("/reset", json={"id": env_id, "data_idx": index})
        assert reset.status_code == 200
        observation = reset.json()["observation"]
        assert set(reset.json()) == {"id", "observation", "done", "reward"}
        expert = TEXTCRAFT.make_expert()  # type: ignore[misc]
        expert.reset(item, observation, {})
        for _ in range(60):
            _, action = expert.act(observation)
            step = http.post("/step", json={"id": env_id, "action": reference_action(action)})
            assert step.status_code == 200
            assert set(step.json()) == {"observation", "reward", "done"}
            observation = step.json()["observation"]
            if step.json()["done"]:
                break
        assert step.json()["reward"] == 1, f"{item}: {observation}"
        assert http.get("/observation", params={"id": env_id}).json() == observation
    assert http.post("/close", json={"id": env_id}).status_code == 200


@pytest.mark.parametrize("protocol", ["v1", "agentgym"])
def test_check_env_passes_through_the_client(serve, protocol) -> None:
    server = serve("textcraft")
    env = RemoteEnv(server.url, family="textcraft", protocol=protocol)
    check_env(env, TEXTCRAFT, TEXTCRAFT.split("test")[:2])
    env.close()
    toy = serve("srvtoy")
    env = RemoteEnv(toy.url, family="srvtoy", protocol=protocol)
    check_env(env, get_family("srvtoy"), ["srvtoy_1", "srvtoy_2"])
    env.close()
    assert httpx.get(f"{toy.url}/healthz").json()["sessions"] == 0


def test_local_check_env_passes_for_textcraft() -> None:
    check_env(TEXTCRAFT.make_env(), TEXTCRAFT, TEXTCRAFT.split("test")[:2])


def test_200_concurrent_sessions_each_get_their_own_observations(serve_process) -> None:
    server = serve_process("textcraft")
    items = TEXTCRAFT.split("train")[:200]
    n_steps = 4

    def expected(item: str) -> list[str]:
        env, expert = TEXTCRAFT.make_env(), TEXTCRAFT.make_expert()  # type: ignore[misc]
        observation, info = env.reset(item, seed=1)
        expert.reset(item, observation, info)
        trace = [observation]
        for _ in range(n_steps):
            observation = env.step(expert.act(observation)[1]).observation
            trace.append(observation)
        return trace

    async def play(item: str, start: asyncio.Event) -> list[str]:
        env = AsyncRemoteEnv(server.url, family="textcraft")
        expert = TEXTCRAFT.make_expert()  # type: ignore[misc]
        observation, info = await env.reset(item, seed=1)
        expert.reset(item, observation, info)
        trace = [observation]
        await start.wait()  # every session is open: now all step at once
        for _ in range(n_steps):
            observation = (await env.step(expert.act(observation)[1])).observation
            trace.append(observation)
        await env.close()
        return trace

    async def main() -> list[list[str]]:
        start = asyncio.Event()
        tasks = [asyncio.create_task(play(item, start)) for item in items]
        async with httpx.AsyncClient(base_url=server.url) as client:
            while (await client.get("/healthz")).json()["sessions"] < len(items):
                await asyncio.sleep(0.05)
        start.set()
        return await asyncio.gather(*tasks)

    traces = asyncio.run(main())
    for item, trace in zip(items, traces, strict=True):
        assert trace == expected(item), item
    metrics = httpx.get(f"{server.url}/metrics").text
    assert f'route="v1_step",status="200"}} {200 * n_steps}' in metrics
    assert 'horizonrl_sessions_live{family="textcraft"} 0' in metrics


def test_concurrent_steps_on_one_inline_session_are_serialized(serve) -> None:
    server = serve("srvtoy")
    sid = httpx.post(f"{server.url}/v1/sessions", json={"item_id": "srvtoy_2"}).json()["session_id"]

    async def main() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url) as client:
            calls = [client.post(f"/v1/sessions/{sid}/step", json={"action": f"a{i}"}) for i in range(20)]
            return await asyncio.gather(*calls)

    replies = asyncio.run(main())
    assert all(r.status_code == 200 for r in replies)
    turns = sorted(int(r.json()["observation"].split("turn=")[1].split(":")[0]) for r in replies)
    assert turns == list(range(1, 21))
    assert httpx.get(f"{server.url}/v1/sessions/{sid}").json()["turns"] == 20


def test_worker_sessions_refuse_a_second_concurrent_step_with_409(serve) -> None:
    server = serve("srvtoyproc")
    env = RemoteEnv(server.url, family="srvtoyproc")
    env.reset("srvtoyproc_2", seed=3)
    url = f"{server.url}/v1/sessions/{env.session_id}/step"
    slow: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: slow.append(httpx.post(url, json={"action": "sleep 1.5"})))
    thread.start()
    # the server says the session is busy before the second call goes (a fixed 0.3 s wait could
    # send it first on a loaded machine)
    assert wait_until(lambda: listed(server.url)[env.session_id]["busy"])
    second = httpx.post(url, json={"action": "look"})
    thread.join()
    assert second.status_code == 409 and second.json()["error"]["code"] == "session_busy"
    assert slow[0].status_code == 200 and "turn=1" in slow[0].json()["observation"]
    assert env.step("look").observation == "srvtoyproc_2 seed=3 turn=2: you said look"
    env.close()


def test_a_dead_worker_fails_its_session_only_and_shutdown_leaves_no_children(serve) -> None:
    server = serve("srvtoyproc")
    http = httpx.Client()  # closed by hand: the sessions must stay open until the server shuts down
    victim = RemoteEnv(server.url, family="srvtoyproc", client=http)
    bystander = RemoteEnv(server.url, family="srvtoyproc", client=http)
    victim.reset("srvtoyproc_1")
    bystander.reset("srvtoyproc_2")
    pids = [
        httpx.get(f"{server.url}/v1/sessions/{e.session_id}").json()["worker_pid"]
        for e in (victim, bystander)
    ]
    assert all(isinstance(p, int) and p != os.getpid() for p in pids)
    os.kill(pids[0], 9)
    with pytest.raises(EnvError, match=r"HTTP 503 backend_failed.*worker process died") as err:
        victim.step("look")
    assert server.url in str(err.value) and str(victim.session_id) in str(err.value)
    r = httpx.post(f"{server.url}/v1/sessions/{victim.session_id}/step", json={"action": "look"})
    assert r.status_code == 503 and "died" in r.json()["error"]["message"]
    assert bystander.step("look").observation == "srvtoyproc_2 seed=None turn=1: you said look"
    # a reset gives the failed session a new worker
    assert victim.reset("srvtoyproc_3")[0] == "hello srvtoyproc_3 seed=None"
    assert victim.step("look").observation == "srvtoyproc_3 seed=None turn=1: you said look"
    state = httpx.get(f"{server.url}/v1/sessions/{victim.session_id}").json()
    pids.append(state["worker_pid"])
    assert state["failed"] is None and state["worker_pid"] not in pids[:2]
    http.close()
    server.stop()
    time.sleep(0.2)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_client_errors_name_the_server_and_session(serve) -> None:
    server = serve("srvtoy")
    env = RemoteEnv(server.url, family="srvtoy")
    with pytest.raises(UnknownItemError, match="srvtoy_<index>"):
        env.reset("srvtoy_12345")
    env.reset("srvtoy_1")
    sid = env.session_id
    httpx.delete(f"{server.url}/v1/sessions/{sid}")
    with pytest.raises(EnvError, match=rf"{server.url} session {sid}: step -> HTTP 404 unknown_session"):
        env.step("look")
    assert env.reset("srvtoy_2")[0] == "hello srvtoy_2 seed=None"  # a lost session is reopened at reset
    assert env.session_id != sid
    env.close()


def post_and_close(url: str, path: str, body: bytes) -> tuple[int, dict]:
    """POST with `Connection: close`, sending the whole body before reading the answer (as urllib does)."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        headers = {"Content-Type": "application/json", "Connection": "close"}
        conn.request("POST", path, body=body, headers=headers)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


def test_an_oversized_body_of_any_size_gets_413_and_the_server_keeps_serving(serve) -> None:
    server = serve("srvtoy")
    sid = httpx.post(f"{server.url}/v1/sessions", json={"item_id": "srvtoy_2"}).json()["session_id"]
    num = httpx.post(f"{server.url}/create").json()["id"]
    httpx.post(f"{server.url}/reset", json={"id": num, "data_idx": 2})
    routes = ["/v1/sessions", f"/v1/sessions/{sid}/step", "/create", "/step"]
    for mib in (1, 3, 10, 50):  # bodies past the socket buffers (10 MiB here) used to reset the connection
        body = b" " * (mib << 20)
        for path in routes:
            status, payload = post_and_close(server.url, path, body)
            assert status == 413 and payload["error"]["code"] == "payload_too_large", (mib, path)
            assert f"is {len(body)} bytes; limit {MAX_BODY_BYTES}" in payload["error"]["message"]
    kept_alive = httpx.post(f"{server.url}/step", content=b" " * (10 << 20))
    assert kept_alive.status_code == 413 and kept_alive.json()["error"]["code"] == "payload_too_large"
    assert httpx.get(f"{server.url}/healthz").json()["sessions"] == 2
    step = httpx.post(f"{server.url}/v1/sessions/{sid}/step", json={"action": "look"})
    assert step.json()["observation"] == "srvtoy_2 seed=None turn=1: you said look"
    assert httpx.post(f"{server.url}/step", json={"id": num, "action": "win"}).json()["reward"] == 1.0


def wait_until(condition, timeout: float = 10.0) -> bool:
    """Poll `condition()` until it holds or `timeout` seconds pass; whether it held."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def listed(url: str) -> dict[str, dict]:
    """`GET /v1/sessions` by session id (the listing does not count as using a session)."""
    return {row["session_id"]: row for row in httpx.get(f"{url}/v1/sessions").json()["sessions"]}


def metric(url: str, line_start: str) -> str:
    (line,) = [line for line in httpx.get(f"{url}/metrics").text.splitlines() if line.startswith(line_start)]
    return line.rsplit(" ", 1)[1]


@pytest.mark.parametrize("protocol", ["v1", "agentgym"])
def test_clients_that_time_out_on_a_slow_step_leave_no_sessions_behind(serve, protocol) -> None:
    server = serve("srvtoyproc", max_sessions=2)
    for _ in range(2):  # fill the cap with clients that give up on their step
        env = RemoteEnv(server.url, family="srvtoyproc", protocol=protocol, timeout=0.5)
        env.reset("srvtoyproc_1")
        with pytest.raises(EnvError, match="step"):
            env.step("sleep 1.5")
        env.close()  # its session is busy with the step the client gave up on
    assert wait_until(lambda: httpx.get(f"{server.url}/healthz").json()["sessions"] == 0)
    assert metric(server.url, "horizonrl_sessions_live") == "0"
    assert metric(server.url, 'horizonrl_sessions_closed_total{family="srvtoyproc",reason="client"}') == "2"
    players = [RemoteEnv(server.url, family="srvtoyproc", protocol=protocol, retries=0) for _ in range(2)]
    for env in players:  # the cap is free again
        env.reset("srvtoyproc_2")
        assert env.step("win").reward == 1.0
    for env in players:
        env.close()


@pytest.mark.parametrize("protocol", ["v1", "agentgym"])
def test_closing_a_busy_session_is_accepted_and_done_when_its_call_returns(serve, protocol) -> None:
    server = serve("srvtoyproc")
    if protocol == "v1":
        sid = httpx.post(f"{server.url}/v1/sessions", json={"item_id": "srvtoyproc_1"}).json()["session_id"]
        step = lambda: httpx.post(f"{server.url}/v1/sessions/{sid}/step", json={"action": "sleep 0.8"})  # noqa: E731
        close = lambda: httpx.delete(f"{server.url}/v1/sessions/{sid}")  # noqa: E731
    else:
        num = httpx.post(f"{server.url}/create").json()["id"]
        httpx.post(f"{server.url}/reset", json={"id": num, "data_idx": 1})
        (sid,) = listed(server.url)
        step = lambda: httpx.post(f"{server.url}/step", json={"id": num, "action": "sleep 0.8"})  # noqa: E731
        close = lambda: httpx.post(f"{server.url}/close", json={"id": num})  # noqa: E731
    replies: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: replies.append(step()))
    thread.start()
    assert wait_until(lambda: listed(server.url)[sid]["busy"])
    accepted = close()
    assert accepted.status_code == (202 if protocol == "v1" else 200)
    assert accepted.json()["closed"] is False and accepted.json()["closing"] is True
    assert listed(server.url)[sid]["closing"] is True
    assert metric(server.url, "horizonrl_sessions_closing") == "1"
    thread.join()
    assert replies[0].status_code == 200 and "turn=1: you said sleep 0.8" in replies[0].text
    assert listed(server.url) == {}
    gone = httpx.get(f"{server.url}/v1/sessions/{sid}")
    assert gone.status_code == 404 and "closed by the client" in gone.json()["error"]["message"]
    assert metric(server.url, "horizonrl_sessions_live") == "0"
    assert metric(server.url, "horizonrl_sessions_closing") == "0"
    assert metric(server.url, 'horizonrl_sessions_closed_total{family="srvtoyproc",reason="client"}') == "1"


def test_the_reaper_skips_a_session_that_became_busy_during_its_round(serve) -> None:
    """A round of the reaper lists the idle sessions, then closes them one by one, each close
    awaiting its worker: one listed idle may be busy by the time the reaper reaches it."""
    # times with margins for a loaded CI machine: the client polls well within the 1 s TTL, and a
    # step's reply reaches the test thread well before its session can be idle for 1 s again
    server = serve("srvtoyproc", idle_ttl=1.0)
    blocker, slow, victim = (
        httpx.post(f"{server.url}/v1/sessions", json={"item_id": "srvtoyproc_1"}).json()["session_id"]
        for _ in range(3)
    )
    for sid in (blocker, slow):  # closing these two keeps the reaper busy for 2.5 s each
        httpx.post(f"{server.url}/v1/sessions/{sid}/step", json={"action": "slowclose 2.5"})

    def touch(*sids: str) -> None:
        for sid in sids:
            httpx.get(f"{server.url}/v1/sessions/{sid}")

    # 1. keep the other two in use until the reaper has started closing the blocker; while it
    # waits for that worker they go idle, so its next round lists [slow, victim] together
    assert wait_until(lambda: touch(slow, victim) or blocker not in listed(server.url))
    # 2. the reaper is now closing `slow`, `victim` next: make `victim` busy meanwhile
    assert wait_until(lambda: slow not in listed(server.url))
    replies: list[httpx.Response] = []
    url = f"{server.url}/v1/sessions/{victim}/step"
    thread = threading.Thread(target=lambda: replies.append(httpx.post(url, json={"action": "sleep 4"})))
    thread.start()
    seen_during_step = []
    while thread.is_alive():
        seen_during_step.append(victim in listed(server.url))
        time.sleep(0.05)
    assert all(seen_during_step), "the reaper closed a session in the middle of its step"
    assert replies[0].status_code == 200 and "you said sleep 4" in replies[0].text
