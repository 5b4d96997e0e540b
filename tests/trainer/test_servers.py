"""Launched env servers are supervised: a killed `horizonrl serve` comes back on its port, a run
rides out the outage with only the episodes in flight failed, and nothing outlives the context."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time

import pytest

from horizonrl.config import load_config
from horizonrl.rollout.envpool import AsyncEnv, EnvPool
from horizonrl.server.client import RemoteEnv
from horizonrl.trainer.engine_rollout import EngineRollout
from horizonrl.trainer.rl import RLTrainer
from horizonrl.trainer.servers import LaunchedServer, start_env_servers
from horizonrl.trainer.workflows import RunAborted
from tests.ports import free_port

pytestmark = pytest.mark.timeout(180)

RESTART_DELAY_S = 4.0


def _config(tmp_path, *extra):
    return load_config(
        None,
        [
            "model.path=tiny",
            "model.bf16=false",
            f"trainer.output_dir={tmp_path / 'run'}",
            "data.families=[textcraft]",
            "data.categories=[depth 1]",
            "eval.at_end=false",
            "logging.tensorboard=false",
            "logging.console=false",
            "env.launch=true",
            f"env.base_port={free_port()}",
            *extra,
        ],
    )


def _kill(server: LaunchedServer) -> int:
    """SIGKILL the server (no shutdown of any kind) and wait until it is gone; returns its pid."""
    pid = server.process.pid
    os.kill(pid, signal.SIGKILL)
    server.process.wait()
    return pid


def _wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _gone(pid: int) -> bool:
    """No process with this pid, nor any left in its process group (its workers)."""
    for kill in (os.kill, os.killpg):
        try:
            kill(pid, 0)
        except ProcessLookupError:
            continue
        return False
    return True


def _refused(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as s:
        return s.connect_ex((host, int(port))) != 0


def test_a_killed_server_is_restarted_on_its_port_and_nothing_outlives_the_context(tmp_path, capfd):
    with start_env_servers(_config(tmp_path), restart_delay_s=0.1, poll_s=0.1) as servers:
        server = servers.launched["textcraft"]
        url = servers.urls["textcraft"]
        first = _kill(server)
        _wait_for(lambda: server.restarts == 1 and server.process.pid != first)
        with RemoteEnv(url, family="textcraft", reconnect_s=30.0) as env:  # waits for /healthz too
            observation, _ = env.reset("textcraft_0")
            assert "Crafting commands" in observation
        # the supervisor polls /healthz on its own: the client can be served before it says so
        said: list[str] = []
        _wait_for(lambda: said.append(capfd.readouterr().err) or "is healthy again" in "".join(said))
        second = server.process.pid
    assert server.restarts == 1, "restarted during shutdown"
    assert server.process.returncode is not None and _gone(first) and _gone(second)
    assert _refused(url)
    err = "".join(said) + capfd.readouterr().err
    assert (
        f"env server textcraft ({url}) exited with code -9; restarting it in 0.1 s (restart 1, at most 3"
        in err
    )
    assert f"env server textcraft ({url}) is healthy again" in err


def test_past_max_restarts_the_watcher_gives_up_and_the_context_raises(tmp_path, capfd):
    pids = []
    servers = start_env_servers(_config(tmp_path), max_restarts=1, restart_delay_s=0, poll_s=0.1)
    gave_up = pytest.raises(RunAborted, match=r"env server textcraft .* exited with code -9 after 1 restarts")
    with gave_up, servers as started:
        server = started.launched["textcraft"]
        pids.append(_kill(server))
        _wait_for(lambda: server.restarts == 1 and server.process.pid != pids[0])
        pids.append(_kill(server))
        _wait_for(lambda: server.error is not None)
        time.sleep(0.3)  # a few more polls: no third process
        assert server.restarts == 1 and server.process.pid == pids[1]
    assert all(_gone(pid) for pid in pids)
    assert "gave up on it: its episodes fail from now on" in capfd.readouterr().err


def test_exiting_while_a_restart_is_under_way_leaves_no_process(tmp_path):
    with start_env_servers(_config(tmp_path), restart_delay_s=0, poll_s=0.02) as servers:
        server = servers.launched["textcraft"]
        first = _kill(server)
        _wait_for(lambda: server.process.pid != first)  # the new one is starting, not yet healthy
    assert server.restarts == 1
    assert _gone(first) and server.process.returncode is not None and _gone(server.process.pid)


class KillBeforeFirstStep(EnvPool):
    """Wraps a pool: the first env step played through it SIGKILLs the env server first."""

    def __init__(self, pool: EnvPool, server: LaunchedServer) -> None:
        self.pool, self.server, self.family = pool, server, pool.family
        self.killed = False
        self.stepped = 0
        """Episodes that called the env (so found the server dead) after the kill."""

    async def acquire(self) -> AsyncEnv:
        return _Env(self, await self.pool.acquire())

    async def release(self, env: AsyncEnv, *, broken: bool = False) -> None:
        assert isinstance(env, _Env)
        await self.pool.release(env.env, broken=broken)

    async def aclose(self) -> None:
        await self.pool.aclose()


class _Env:
    def __init__(self, pool: KillBeforeFirstStep, env: AsyncEnv) -> None:
        self.pool, self.env, self.stepped = pool, env, False

    async def reset(self, item_id, *, seed=None):
        return await self.env.reset(item_id, seed=seed)

    async def step(self, action):
        if not self.pool.killed:
            self.pool.killed = True
            _kill(self.pool.server)
        self.pool.stepped += not self.stepped
        self.stepped = True
        return await self.env.step(action)

    async def close(self):
        await self.env.close()


class KillDuringStep(EngineRollout):
    """The trainer's rollout, with the env server killed during the rollout of step `at_step`."""

    def __init__(self, *args, server: LaunchedServer, at_step: int) -> None:
        super().__init__(*args)
        self.server, self.at_step = server, at_step
        self.step: int | None = None
        self.killer: KillBeforeFirstStep | None = None

    def __call__(self, episodes, *, step, greedy=False):
        self.step = step
        return super().__call__(episodes, step=step, greedy=greedy)

    def _pool(self, family: str) -> EnvPool:
        pool = super()._pool(family)
        if self.step != self.at_step:
            return pool
        self.killer = KillBeforeFirstStep(pool, self.server)
        return self.killer


class Forward:
    """A rollout given to the trainer at construction, built once the trainer's learner exists."""

    def __init__(self) -> None:
        self.to: KillDuringStep | None = None

    def __call__(self, episodes, *, step, greedy=False):
        assert self.to is not None
        return self.to(episodes, step=step, greedy=greedy)


# a step that found no server, or (killed mid-request) lost its connection
ENV_CONNECTION_FAILED = re.compile(
    r"^env step failed: EnvError: env server http://127\.0\.0\.1:\d+ session \w+: step failed "
    r".*(cannot connect to the server|the connection to the server was lost)"
)


def test_a_run_rides_out_a_server_killed_mid_rollout(tmp_path, capfd):
    cfg = _config(
        tmp_path,
        "trainer.total_steps=3",
        "trainer.num_threads=1",
        "data.batch_size=2",
        "rollout.n=2",
        "rollout.max_tokens=8",
        "rollout.max_response_length=512",
        "schedule.type=fixed",
        "schedule.rounds=[3]",
        "algorithm.name=grpo",
        "algorithm.adv_estimator=grpo",
        "algorithm.kl_coef=0",
        "algorithm.filter_groups=false",
    )
    # the server is back RESTART_DELAY_S + its start-up after the kill: after step 2's episodes
    # failed (< 1 s), and after step 3 started, whose resets wait for it (RemoteEnvPool.reconnect_s)
    with start_env_servers(cfg, restart_delay_s=RESTART_DELAY_S, poll_s=0.1) as servers:
        forward = Forward()
        trainer = RLTrainer(cfg, rollout=forward, env_urls=servers.urls)
        server = servers.launched["textcraft"]
        forward.to = rollout = KillDuringStep(
            cfg, trainer.learner.actor, trainer.learner.tokenizer, servers.urls, server=server, at_step=1
        )
        trainer.fit()
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    steps = {
        n: [json.loads(line) for line in (run / "trajectories" / f"step_{n}.jsonl").read_text().splitlines()]
        for n in (1, 2, 3)
    }
    # the random model's one-line answers parse as actions, so every episode steps the env
    for n in (1, 3):
        assert not any(t["failed"] for t in steps[n]), n
        assert all(t["num_turns"] == 3 for t in steps[n]), n
    assert rollout.killer is not None and rollout.killer.stepped > 0
    failed = [t for t in steps[2] if t["failed"]]
    assert len(failed) == rollout.killer.stepped  # exactly the episodes that met the dead server
    for t in failed:
        assert ENV_CONNECTION_FAILED.match(t["fail_reason"]), t["fail_reason"]
    assert rows[1]["failed/frac"] == len(failed) / len(steps[2])
    assert rows[0]["failed/frac"] == rows[2]["failed/frac"] == 0.0
    assert server.restarts == 1
    assert "env server textcraft" in capfd.readouterr().err
