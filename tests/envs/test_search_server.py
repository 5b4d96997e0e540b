"""The search family through the HTTP server: conformance, the expert, and the reference's routes."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from horizonrl.envs.checker import check_env
from horizonrl.envs.registry import FamilySpec, get_family
from horizonrl.envs.search import make_spec
from horizonrl.envs.search.world import HOP_CATEGORIES, generate_world, write_world
from horizonrl.eval.metrics import success_summary
from horizonrl.eval.solve import solve_items
from horizonrl.server.client import RemoteEnv
from tests.server.conftest import ServerThread


@pytest.fixture(scope="module")
def world_spec(tmp_path_factory: pytest.TempPathFactory) -> FamilySpec:
    out = tmp_path_factory.mktemp("search_server") / "world"
    write_world(generate_world(9, entities=150, n_test=10, n_train=2), out)
    return make_spec(world=str(out))


@pytest.fixture(scope="module")
def server(world_spec: FamilySpec) -> Iterator[ServerThread]:
    started = ServerThread(world_spec)  # type: ignore[arg-type]  # create_app takes a spec or a name
    yield started
    started.stop()


def test_check_env_through_the_server(server: ServerThread, world_spec: FamilySpec) -> None:
    with RemoteEnv(server.url, family="search") as env:
        check_env(env, world_spec, world_spec.split("test")[:6])


def test_expert_through_the_server_solves_every_hop_category(
    server: ServerThread, world_spec: FamilySpec
) -> None:
    trajectories = solve_items(
        lambda: RemoteEnv(server.url, family="search"), world_spec, world_spec.split("test"), workers=4
    )
    assert not [t.fail_reason for t in trajectories if t.failed]
    summary = success_summary(trajectories, world_spec.categories)
    for category in HOP_CATEGORIES:
        assert summary["by_category"][category]["n"] == 10
        assert summary["by_category"][category]["success_rate"] >= 0.9, summary


def test_reference_routes_use_env_idx_and_reset_by_id(server: ServerThread, world_spec: FamilySpec) -> None:
    local = world_spec.make_env()
    question, _ = local.reset("search_3")
    with httpx.Client(base_url=server.url, trust_env=False) as http:
        env_idx = http.post("/create", json={"id": 0}).json()
        assert isinstance(env_idx, int)
        reset = http.post("/reset", json={"env_idx": env_idx, "id": 3})
        assert reset.status_code == 200 and reset.json() == question
        assert http.get("/observation", params={"env_idx": env_idx}).json() == question
        step = http.post("/step", json={"env_idx": env_idx, "action": "<search>anything at all</search>"})
        body = step.json()
        assert set(body) == {"observation", "reward", "done", "info"}
        assert body["observation"].startswith("<information>") and body["done"] is False
        answer = http.post(
            "/step", json={"env_idx": env_idx, "action": "<answer>surely wrong</answer>"}
        ).json()
        assert answer["done"] is True and answer["reward"] == 0.0 and answer["info"]["success"] is False
        assert http.post("/reset", json={"env_idx": env_idx, "id": 10**9}).status_code in (400, 404)
        assert http.post("/close", json={"env_idx": env_idx}).status_code == 200


def test_our_client_speaks_the_reference_routes(server: ServerThread, world_spec: FamilySpec) -> None:
    with RemoteEnv(server.url, family="search", protocol="agentgym") as env:
        observation, _ = env.reset("search_1")
        assert observation == world_spec.make_env().reset("search_1")[0]
        assert "<information>" in env.step("<search>city</search>").observation


def test_default_world_through_the_server() -> None:
    spec = get_family("search")
    started = ServerThread("search")
    try:
        with RemoteEnv(started.url, family="search") as env:
            check_env(env, spec, spec.split("test")[:3])
    finally:
        started.stop()
