"""BabyAI through `horizonrl serve babyai`: conformance on both route sets, the reference's
fields, and the expert's success rate on the test split over HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from horizonrl.envs.babyai import SPEC
from horizonrl.envs.checker import check_env
from horizonrl.eval.solve import solve_items
from horizonrl.server.client import RemoteEnv
from tests.server.conftest import ServerThread


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    server = ServerThread("babyai")
    yield server
    server.stop()


@pytest.mark.parametrize("protocol", ["v1", "agentgym"])
def test_check_env_through_the_server(server: ServerThread, protocol: str) -> None:
    env = RemoteEnv(server.url, family="babyai", protocol=protocol)  # type: ignore[arg-type]
    try:
        check_env(env, SPEC, ["babyai_1", "babyai_24", "babyai_35"])
    finally:
        env.close()


def test_agentgym_routes_answer_with_the_reference_fields(server: ServerThread) -> None:
    with httpx.Client(base_url=server.url, trust_env=False) as http:
        created = http.post("/create").json()
        assert set(created) == {"id"}
        reset = http.post("/reset", json={"id": created["id"], "data_idx": 2}).json()
        assert set(reset) >= {"observation", "reward", "score", "done"}
        assert reset["observation"].startswith("Your goal: go to the red ball")
        step = http.post("/step", json={"id": created["id"], "action": "go to red ball 1"}).json()
        assert set(step) == {"observation", "reward", "score", "done"}
        assert step["done"] is True and 0 < step["score"] == step["reward"] <= 1
        http.post("/close", json={"id": created["id"]})


def test_expert_solves_the_test_split_over_http(server: ServerThread) -> None:
    items = SPEC.split("test")
    trajectories = solve_items(lambda: RemoteEnv(server.url, family="babyai"), SPEC, items, workers=2)
    assert not [t.fail_reason for t in trajectories if t.failed]
    rate = sum(t.success for t in trajectories) / len(trajectories)
    assert rate >= 0.95, [t.item_id for t in trajectories if not t.success]
