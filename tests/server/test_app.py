"""The env server's routes and every error case, in process (FastAPI's TestClient)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

import tests.server.toyenv  # noqa: F401 - registers the toy families
from horizonrl.server import sessions
from horizonrl.server.app import create_app
from horizonrl.server.schemas import MAX_ACTION_BYTES


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app("srvtoy", max_sessions=5), raise_server_exceptions=False) as c:
        yield c


def open_session(client: TestClient, item: str = "srvtoy_3", seed: int | None = 7) -> str:
    r = client.post("/v1/sessions", json={"item_id": item, "seed": seed})
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


def assert_error(r, status: int, code: str, *words: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert error["code"] == code
    for word in words:
        assert word in error["message"], error["message"]


def test_v1_session_lifecycle(client: TestClient) -> None:
    r = client.post("/v1/sessions", json={"item_id": "srvtoy_3", "seed": 7})
    assert r.status_code == 201
    body = r.json()
    assert body["observation"] == "hello srvtoy_3 seed=7"
    assert body["info"] == {"success": False, "score": 0.0, "category": "odd"}
    sid = body["session_id"]

    r = client.post(f"/v1/sessions/{sid}/step", json={"action": "look"})
    assert r.json() == {
        "observation": "srvtoy_3 seed=7 turn=1: you said look",
        "reward": 0.0,
        "terminated": False,
        "truncated": False,
        "info": {"success": False, "score": 0.0, "category": "odd"},
    }
    win = client.post(f"/v1/sessions/{sid}/step", json={"action": "win"}).json()
    assert win["reward"] == 1.0 and win["terminated"] and win["info"]["success"]

    state = client.get(f"/v1/sessions/{sid}").json()
    assert (state["item_id"], state["seed"], state["turns"], state["done"]) == ("srvtoy_3", 7, 2, True)
    assert client.get(f"/v1/sessions/{sid}/actions").json() == {"actions": ["win", "look"]}

    again = client.post(f"/v1/sessions/{sid}/reset", json={"item_id": "srvtoy_4"}).json()
    assert again == {"session_id": sid, "observation": "hello srvtoy_4 seed=None", "info": again["info"]}
    assert client.get(f"/v1/sessions/{sid}").json()["turns"] == 0
    assert [s["session_id"] for s in client.get("/v1/sessions").json()["sessions"]] == [sid]

    assert client.delete(f"/v1/sessions/{sid}").json() == {"session_id": sid, "closed": True}
    assert_error(client.get(f"/v1/sessions/{sid}"), 404, "unknown_session", "closed by the client")


def test_info_health_and_metrics(client: TestClient) -> None:
    info = client.get("/v1/info").json()
    assert info["family"] == "srvtoy" and info["splits"] == {"train": 290, "test": 10}
    assert info["categories"] == ["even", "odd"] and info["max_sessions"] == 5
    sid = open_session(client)
    client.post(f"/v1/sessions/{sid}/step", json={"action": "look"})
    client.post("/v1/sessions/nope/step", json={"action": "look"})
    assert client.get("/healthz").json() == {"status": "ok", "family": "srvtoy", "sessions": 1}
    metrics = client.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert 'horizonrl_sessions_live{family="srvtoy"} 1' in text
    assert 'horizonrl_requests_total{family="srvtoy",route="v1_step",status="200"} 1' in text
    assert 'horizonrl_requests_total{family="srvtoy",route="v1_step",status="404"} 1' in text
    assert 'horizonrl_step_seconds_count{family="srvtoy"} 1' in text


def test_bad_requests_get_json_errors_and_the_server_keeps_serving(client: TestClient) -> None:
    sid = open_session(client)
    step = f"/v1/sessions/{sid}/step"
    assert_error(client.post(step, content=b'{"action": '), 400, "bad_json", "not valid JSON")
    assert_error(client.post(step, content=b""), 400, "bad_json", "empty")
    assert_error(client.post(step, content=b'["look"]'), 400, "bad_json", "JSON object")
    assert_error(client.post(step, json={}), 422, "missing_field", "'action'")
    assert_error(client.post(step, json={"action": 3}), 422, "bad_field", "string")
    assert_error(client.post("/v1/sessions", json={"seed": 1}), 422, "missing_field", "'item_id'")
    assert_error(client.post("/v1/sessions", json={"item_id": "srvtoy_1", "seed": "x"}), 422, "bad_field")
    assert_error(client.post(step, json={"action": "a" * (MAX_ACTION_BYTES + 1)}), 413, "payload_too_large")
    assert_error(client.post(step, content=b" " * 2_000_000), 413, "payload_too_large")
    assert_error(
        client.post("/v1/sessions/nope/step", json={"action": "x"}), 404, "unknown_session", "'nope'"
    )
    assert_error(client.delete("/v1/sessions/nope"), 404, "unknown_session")
    assert_error(client.get("/nowhere"), 404, "not_found")
    assert_error(client.put("/healthz"), 405, "method_not_allowed")
    # an action just under the cap is an ordinary (invalid) action
    assert client.post(step, json={"action": "a" * 1000}).status_code == 200
    # the env raising is a 500 for that call; the session stays usable
    assert_error(client.post(step, json={"action": "boom"}), 500, "env_failed", "exploded")
    ok = client.post(step, json={"action": "look"})
    assert ok.status_code == 200 and ok.json()["observation"].startswith("srvtoy_3 seed=7 turn=")


def test_unknown_item_is_404_naming_the_valid_form(client: TestClient) -> None:
    for item in ("srvtoy_999", "babyai_1", "garbage"):
        r = client.post("/v1/sessions", json={"item_id": item})
        assert_error(r, 404, "unknown_item", "srvtoy_<index>")
    assert client.get("/healthz").json()["sessions"] == 0  # failed creations leave nothing behind


def test_session_cap_gives_429_until_one_closes(client: TestClient) -> None:
    sids = [open_session(client) for _ in range(5)]
    assert_error(
        client.post("/v1/sessions", json={"item_id": "srvtoy_1"}), 429, "over_capacity", "5 sessions"
    )
    assert_error(client.post("/create"), 429, "over_capacity")
    client.delete(f"/v1/sessions/{sids[0]}")
    open_session(client)
    assert 'horizonrl_sessions_rejected_total{family="srvtoy"} 2' in client.get("/metrics").text


def test_idle_sessions_expire_after_the_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    # The store's clock is the test's: a slow machine stalling between two requests must not
    # count as idleness (a 0.3 s real-time stall once expired the session in use on CI).
    now = [1000.0]
    monkeypatch.setattr(
        sessions, "time", SimpleNamespace(monotonic=lambda: now[0], perf_counter=time.perf_counter)
    )
    with TestClient(create_app("srvtoy", idle_ttl=0.3)) as client:
        idle, busy = open_session(client), open_session(client)
        for _ in range(3):  # `busy` is used every 0.2 s of the store's clock, `idle` never
            now[0] += 0.2
            assert client.post(f"/v1/sessions/{busy}/step", json={"action": "look"}).status_code == 200
        deadline = time.monotonic() + 10.0  # the reaper wakes every 0.075 s of real time
        while client.get("/healthz").json()["sessions"] > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert_error(client.get(f"/v1/sessions/{idle}"), 404, "unknown_session", "expired after 0.3 s idle")
        assert client.get(f"/v1/sessions/{busy}").status_code == 200


def test_agentgym_routes_share_sessions_with_v1(client: TestClient) -> None:
    num = client.post("/create").json()["id"]
    assert client.post("/reset", json={"id": num, "data_idx": 4}).json() == {
        "observation": "hello srvtoy_4 seed=0",
        "reward": 0,
        "score": 0.0,
        "done": False,
    }
    assert client.post("/step", json={"id": num, "action": "win"}).json() == {
        "observation": "srvtoy_4 seed=0 turn=1: solved",
        "reward": 1.0,
        "score": 1.0,
        "done": True,
    }
    assert client.get("/observation", params={"id": num}).json() == "srvtoy_4 seed=0 turn=1: solved"
    (row,) = client.get("/v1/sessions").json()["sessions"]
    assert (row["id"], row["item_id"], row["turns"]) == (num, "srvtoy_4", 1)
    assert client.post("/close", json={"id": num}).json() == {"id": num, "closed": True}


def test_agentgym_errors_are_real_status_codes(client: TestClient) -> None:
    num = client.post("/create").json()["id"]
    assert_error(client.post("/step", json={"id": num, "action": "x"}), 409, "no_episode", "reset")
    assert_error(client.post("/reset", json={"id": num, "data_idx": 5000}), 404, "unknown_item")
    assert_error(client.post("/reset", json={"id": 999, "data_idx": 1}), 404, "unknown_session", "999")
    assert_error(client.post("/reset", json={"data_idx": 1}), 422, "missing_field", "'id'")
    assert_error(client.post("/reset", content=b"{nope"), 400, "bad_json")
    assert_error(client.post("/step", json={"id": num, "action": "a" * 70_000}), 413, "payload_too_large")
    assert_error(client.get("/observation"), 422, "missing_field")
    assert_error(client.post("/close", json={"id": 999}), 404, "unknown_session")
