"""Env-server replicas on a real local Ray cluster (2 CPUs, loopback address, no dashboard),
played by the real rollout engine through `ReplicaEnvPool` (a scripted policy backend).

Two textcraft replicas serve one rollout of 8 episodes; replica 0's process is SIGKILLed after
the first round. Only its episodes fail (their reasons name its URL); the others finish. Ray
restarts it on the same port, and the next rollout plays on the survivor and the replacement.
"""

from __future__ import annotations

import os
import signal
import socket

import pytest

from horizonrl.distributed.ray_envs import RayEnvReplicas
from horizonrl.distributed.replica_pool import ReplicaEnvPool
from horizonrl.models import load_tokenizer
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.trainer.servers import wait_healthy
from tests.ports import free_port
from tests.rollout.helpers import ScriptedBackend

ray = pytest.importorskip("ray")
ITEMS = ["textcraft_0", "textcraft_1", "textcraft_2", "textcraft_3"]


def _two_free_ports() -> int:
    for _ in range(50):
        port = free_port()
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("no two consecutive free ports")


@pytest.fixture(scope="module")
def replicas():
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    placed = RayEnvReplicas({"textcraft": 2}, base_port=_two_free_ports(), cpus=0.25)
    yield placed
    placed.stop()
    ray.shutdown()


def _rollout(urls, on_round=None):
    backend = ScriptedBackend(load_tokenizer("tiny"), lambda req: "Thought: check.\nAction: inventory")
    pool = ReplicaEnvPool(urls, "textcraft", timeout=10.0, retries=1)
    config = EngineConfig(max_turns=3, progress=False, max_tokens=16, env_timeout_s=20.0)
    trajectories = RolloutEngine(backend, pool, config).run(ITEMS, n=2, seed=0, on_round=on_round)
    return trajectories, pool


def test_killing_a_replica_fails_only_its_episodes_and_a_replacement_serves_the_next_step(replicas):
    urls = replicas.urls()["textcraft"]
    assert len(urls) == 2 and all(u.startswith("http://127.0.0.1:") for u in urls)
    before = replicas.pids()

    def kill_replica_0(round_index, live):
        if round_index == 1:
            os.kill(before[0], signal.SIGKILL)

    trajectories, pool = _rollout(urls, on_round=kill_replica_0)
    assert pool.opened == [4, 4]  # balanced: the fewest live sessions first
    failed = [t for t in trajectories if t.failed]
    assert len(failed) == 4, [t.fail_reason for t in trajectories]
    assert all(urls[0] in (t.fail_reason or "") for t in failed)
    survivors = [t for t in trajectories if not t.failed]
    assert all(t.num_turns == 3 and t.truncated for t in survivors)
    assert 0 in pool.down and 1 not in pool.down

    after = replicas.pids()  # waits for Ray to restart replica 0
    assert after[0] != before[0] and after[1] == before[1]
    wait_healthy(urls[0], timeout=60.0)
    trajectories, pool = _rollout(urls)
    assert not any(t.failed for t in trajectories)
    assert pool.opened == [4, 4] and not pool.down
