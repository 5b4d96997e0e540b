"""The weight of Ray on an env step: a Ray-placed replica vs a plain `horizonrl serve`, over HTTP.

    python benchmarks/ray_envs.py --steps 300 --out benchmarks/results/ray_envs.md

Ray only places the env servers: the rollout still talks HTTP straight to the replica
(`ReplicaEnvPool`), so the expected overhead of the placement itself is nil. Measured here, all
on this machine, sequentially (one session, `--steps` TextCraft `inventory` steps after a warm-up):

- direct:      `horizonrl serve textcraft` as a subprocess, `AsyncRemoteEnv` steps (today's path)
- ray replica: the same server inside a Ray actor (`RayEnvReplicas`), stepped through
               `ReplicaEnvPool` (what the trainer does with `resources.ray`)
- ray rpc:     for contrast, each step as a Ray actor method call (`actor.step.remote`) on a local
               env in the actor: what routing env steps through Ray itself would cost

Local Ray cluster: `num_cpus=2`, loopback address, no dashboard, `RAY_USAGE_STATS_ENABLED=0`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _http_steps(pool: Any, steps: int) -> list[float]:
    env = await pool.acquire()
    await env.reset("textcraft_0", seed=0)
    for _ in range(20):
        await env.step("inventory")
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        await env.step("inventory")
        times.append(time.perf_counter() - start)
    await pool.release(env)
    await pool.aclose()
    return times


class LocalEnvActor:
    def __init__(self) -> None:
        from horizonrl.envs.registry import get_family

        self.env = get_family("textcraft").make_env()
        self.env.reset("textcraft_0", seed=0)

    def step(self, action: str) -> str:
        return str(self.env.step(action).observation)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    from horizonrl.distributed.ray_envs import RayEnvReplicas
    from horizonrl.distributed.replica_pool import ReplicaEnvPool
    from horizonrl.rollout.envpool import RemoteEnvPool
    from horizonrl.trainer.servers import wait_healthy

    results: dict[str, list[float]] = {}
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "horizonrl.cli", "serve", "textcraft", "--port", str(port)]
    server = subprocess.Popen(cmd, env=env)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server)
        results["direct HTTP (horizonrl serve)"] = asyncio.run(
            _http_steps(RemoteEnvPool(f"http://127.0.0.1:{port}", "textcraft"), args.steps)
        )
    finally:
        server.terminate()
        server.wait()
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        placed = RayEnvReplicas({"textcraft": 1}, base_port=_free_port(), cpus=0.25)
        pool = ReplicaEnvPool(placed.urls()["textcraft"], "textcraft")
        results["Ray-placed replica, HTTP"] = asyncio.run(_http_steps(pool, args.steps))
        placed.stop()
        actor: Any = ray.remote(num_cpus=0.25)(LocalEnvActor).remote()  # type: ignore[attr-defined]
        for _ in range(20):
            ray.get(actor.step.remote("inventory"))
        rpc = []
        for _ in range(args.steps):
            start = time.perf_counter()
            ray.get(actor.step.remote("inventory"))
            rpc.append(time.perf_counter() - start)
        results["Ray actor call per step (contrast)"] = rpc
    finally:
        ray.shutdown()
    base = statistics.median(results["direct HTTP (horizonrl serve)"])
    lines = ["| path | median ms/step | p90 ms | ratio to direct |", "|---|---|---|---|"]
    for name, times in results.items():
        med = statistics.median(times)
        p90 = sorted(times)[int(0.9 * len(times))]
        lines.append(f"| {name} | {med * 1e3:.2f} | {p90 * 1e3:.2f} | {med / base:.2f} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(
            "# Ray's weight per env step\n\n"
            f"`python benchmarks/ray_envs.py --steps {args.steps} --out {args.out}` (TextCraft `inventory`, "
            "one session, sequential, all on this machine)\n\n" + text + "\n"
        )


if __name__ == "__main__":
    main()
