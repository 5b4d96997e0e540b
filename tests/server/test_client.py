"""`RemoteEnv` unit tests: the reference's dialects (answers faked with httpx.MockTransport),
and which failures are retried."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from horizonrl.envs.core import EnvError, UnknownItemError
from horizonrl.server.client import AsyncRemoteEnv, RemoteEnv
from tests.ports import free_port


def fake_server(
    answers: dict[str, Callable[[dict[str, Any]], Any]], seen: list[tuple[str, Any]]
) -> httpx.Client:
    """A client answered by `answers[path](json_body)`, always with HTTP 200 as the reference does."""

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        seen.append((request.url.path, body))
        return httpx.Response(200, json=answers[request.url.path](body or {}))

    return httpx.Client(transport=httpx.MockTransport(handle))


def test_agentgym_sciworld_dialect() -> None:
    seen: list[tuple[str, Any]] = []
    answers = {
        "/create": lambda b: {"id": 7},
        "/reset": lambda b: {
            "task_name": "melt",
            "var_num": 0,
            "task_description": "Your task is to melt ice.",
            "observation": "This room is called the kitchen.",
            "reward": 0,
            "score": 0,
            "done": False,
        },  # fmt: skip
        "/step": lambda b: {
            "observation": "You focus on the ice.",
            "reward": 50,
            "score": 50.0,
            "done": False,
        },
        "/close": lambda b: {"ok": True},
    }
    env = RemoteEnv("http://ref", family="sciworld", protocol="agentgym", client=fake_server(answers, seen))
    observation, info = env.reset("sciworld_30", seed=0)
    assert observation == "Your task is to melt ice.\nThis room is called the kitchen."
    assert info["success"] is False and info["score"] == 0.0
    result = env.step("focus on ice")
    assert (result.observation, result.reward, result.terminated, result.truncated) == (
        "You focus on the ice.",
        50.0,
        False,
        False,
    )
    assert result.info["score"] == 0.5 and result.info["success"] is False  # 0-100 scaled to [0, 1]
    env.close()
    assert seen == [
        ("/create", {}),
        ("/reset", {"id": 7, "data_idx": 30, "seed": 0}),
        ("/step", {"id": 7, "action": "focus on ice"}),
        ("/close", {"id": 7}),
    ]


def test_agentgym_search_and_web_dialects() -> None:
    seen: list[tuple[str, Any]] = []
    answers = {
        "/create": lambda b: 3,  # search answers a bare int
        "/reset": lambda b: "Who wrote Hamlet?",  # ... and a bare question
        "/step": lambda b: {"observation": "correct", "reward": 1.0, "done": True, "info": {}},
    }
    env = RemoteEnv("http://ref", family="search", protocol="agentgym", client=fake_server(answers, seen))
    assert env.reset("search_12")[0] == "Who wrote Hamlet?"
    result = env.step("<answer>Shakespeare</answer>")
    assert result.terminated and result.info["success"] and result.info["score"] == 1.0
    assert seen[:2] == [("/create", {"id": 0}), ("/reset", {"env_idx": 3, "id": 12})]
    assert seen[2] == ("/step", {"env_idx": 3, "action": "<answer>Shakespeare</answer>"})

    seen.clear()
    answers = {
        "/create": lambda b: {"env_idx": 1},
        "/reset": lambda b: {"observation": "[1] RootWebArea", "sites": ["shopping"], "object": {}},
        "/step": lambda b: {
            "observation": "done",
            "reward": 0.0,
            "terminated": False,
            "truncated": True,
            "info": {},
        },  # fmt: skip
    }
    env = RemoteEnv("http://ref", family="web", protocol="agentgym", client=fake_server(answers, seen))
    assert env.reset("web_4", seed=2)[0] == "[1] RootWebArea"
    assert seen[1] == ("/reset", {"env_idx": 1, "idx": 4, "seed": 2})
    result = env.step("stop [x]")
    assert (result.terminated, result.truncated, result.info["success"]) == (False, True, False)


def test_agentgym_200_with_error_becomes_an_exception() -> None:
    answers = {
        "/create": lambda b: {"id": 0},
        "/reset": lambda b: (
            {"error": "list index out of range"}
            if b["data_idx"] > 10
            else {"observation": "o", "reward": 0, "score": 0, "done": False}
        ),  # fmt: skip
        "/step": lambda b: {"error": "java.lang.NullPointerException"},
    }
    env = RemoteEnv("http://ref", family="babyai", protocol="agentgym", client=fake_server(answers, []))
    with pytest.raises(UnknownItemError, match="list index out of range"):
        env.reset("babyai_99")
    with pytest.raises(UnknownItemError, match="does not belong"):
        env.reset("textcraft_1")
    env.reset("babyai_1")
    with pytest.raises(
        EnvError, match=r"http://ref session 0: step -> HTTP 200 error: java.lang.NullPointer"
    ):
        env.step("turn left")


def test_agentgym_needs_a_family() -> None:
    with pytest.raises(ValueError, match="family"):
        RemoteEnv("http://ref", protocol="agentgym")


class DroppingServer:
    """Accepts connections, reads one request, closes without answering; counts requests."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.requests.append(conn.recv(65536).split(b"\r\n", 1)[0])


@pytest.fixture
def dropping() -> Iterator[DroppingServer]:
    server = DroppingServer()
    yield server
    server.sock.close()


def test_a_step_that_may_have_been_applied_is_not_replayed(dropping: DroppingServer) -> None:
    env = RemoteEnv(dropping.url, family="srvtoy", retries=3, backoff=0.01)
    env._session.sid = "abc"  # as if reset had succeeded
    with pytest.raises(
        EnvError,
        match=r"session abc: step failed mid-request: the connection to the server was lost "
        r"\(RemoteProtocolError: .*\); .* not replayed",
    ):
        env.step("craft 1 stick using 2 planks")
    assert dropping.requests == [b"POST /v1/sessions/abc/step HTTP/1.1"]
    env._session.sid = None
    env._client.close()


def test_idempotent_calls_are_retried_a_bounded_number_of_times(dropping: DroppingServer) -> None:
    env = RemoteEnv(dropping.url, family="srvtoy", retries=2, backoff=0.01)
    with pytest.raises(
        EnvError, match=rf"{dropping.url} session \(none\): create session .* after 3 attempts"
    ):
        env.reset("srvtoy_1")
    assert dropping.requests == [b"POST /v1/sessions HTTP/1.1"] * 3
    env.close()


def test_an_unreachable_server_raises_env_error_naming_it() -> None:
    port = free_port()  # nothing listens there
    env = AsyncRemoteEnv(f"http://127.0.0.1:{port}", family="srvtoy", retries=2, backoff=0.01)

    async def main() -> None:
        with pytest.raises(
            EnvError,
            match=rf"127.0.0.1:{port} .* after 3 attempts in [\d.]+ s: cannot connect to the server "
            r"\(ConnectError",
        ):
            await env.reset("srvtoy_1")
        await env.close()

    asyncio.run(main())


def _refusing_port() -> socket.socket:
    """A bound socket that does not listen yet: connections to its port are refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def _answer_later(sock: socket.socket, delay: float, body: dict[str, Any]) -> threading.Thread:
    """After `delay` s, listen on `sock` and answer one request with `body` (a server come back)."""

    def serve() -> None:
        time.sleep(delay)
        sock.listen(1)
        conn, _ = sock.accept()
        with conn:
            conn.recv(65536)
            data = json.dumps(body).encode()
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            conn.sendall(head.encode() + b"Connection: close\r\n\r\n" + data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_a_reset_waits_up_to_reconnect_s_for_a_server_that_refuses_connections() -> None:
    sock = _refusing_port()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    created = {"session_id": "s1", "observation": "hello", "info": {"category": "a"}}
    thread = _answer_later(sock, 0.8, created)
    env = AsyncRemoteEnv(url, family="srvtoy", retries=2, backoff=0.05, reconnect_s=10.0)

    async def main() -> None:
        assert await env.reset("srvtoy_1") == ("hello", {"category": "a"})
        assert env.session_id == "s1"
        env._session.sid = None  # nothing to close on this one-shot server
        await env.close()

    asyncio.run(main())
    thread.join(5)
    sock.close()


def test_without_reconnect_s_or_past_it_a_reset_fails_on_a_refused_connection() -> None:
    with _refusing_port() as sock:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        took = []
        for reconnect_s in (0.0, 1.0):
            env = RemoteEnv(url, family="srvtoy", retries=2, backoff=0.05, reconnect_s=reconnect_s)
            start = time.monotonic()
            with pytest.raises(EnvError, match=r"create session .* cannot connect to the server"):
                env.reset("srvtoy_1")
            took.append(time.monotonic() - start)
            env.close()
        assert took[0] < 0.5 < took[1] < 1.5  # 3 attempts; then attempts until the next would pass 1 s


def test_a_step_is_not_held_up_by_reconnect_s() -> None:
    """The session in flight died with its server: waiting for a new server cannot save it."""
    with _refusing_port() as sock:
        env = RemoteEnv(f"http://127.0.0.1:{sock.getsockname()[1]}", family="srvtoy", retries=2,
                        backoff=0.05, reconnect_s=30.0)  # fmt: skip
        env._session.sid = "abc"  # as if reset had succeeded on a server that then died
        start = time.monotonic()
        with pytest.raises(EnvError, match=r"session abc: step failed after 3 attempts .* cannot connect"):
            env.step("inventory")
        assert time.monotonic() - start < 2.0
        env._session.sid = None
        env.close()
