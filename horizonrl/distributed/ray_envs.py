"""Env-server replicas placed by Ray (`resources.ray: auto | ADDRESS`, `resources.env_replicas`).

    with ray_env_servers(cfg) as urls:        # {"textcraft": "http://10.0.0.5:36100,http://..."}
        ...                                   # the trainer's rollouts use `ReplicaEnvPool`s

Each replica is a Ray actor that runs the family's HTTP server (`horizonrl.server.app`, uvicorn in
a thread of the actor's process) on the actor's node, bound to `env.host` (127.0.0.1 by default:
this machine only; set `env.host=0.0.0.0` on a cluster, and the URL then names the node's address)
on ports from `env.base_port` up, reserving `resources.env_replica_cpus` CPUs
(fractions allowed), so Ray puts replicas wherever CPUs are free: CPU nodes of a cluster, or this
machine. Actors are created with `max_restarts`: when a replica's process dies, Ray starts it
again (about a second later on a local cluster) on the same port, so its URL stays valid; the
episodes in flight on it fail, and the next rollout's pool finds it healthy and uses it again.
URLs given in `env.servers` are kept, ahead of the placed replicas (a mix of both is allowed).

Ray is imported only here and only when `resources.ray` is set. `auto` joins a running cluster on
this machine or starts a local one (loopback address, no dashboard); set
`RAY_USAGE_STATS_ENABLED=0` is the default this module applies.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from horizonrl.config import Config

MAX_RESTARTS = 5
"""Times Ray restarts one replica's process before giving up on it."""
STARTUP_TIMEOUT_S = 120.0


class EnvServerActor:
    """The body of one replica actor: `horizonrl serve FAMILY` in this process, on `port`."""

    def __init__(self, family: str, host: str, port: int, env_kwargs: dict[str, Any] | None = None) -> None:
        import ray
        import uvicorn

        from horizonrl.envs.registry import get_family
        from horizonrl.server.app import create_app, uvicorn_options

        # bound to `host` (env.host); reached at it, or at the node's address when bound to all
        self.host = _node_address(ray) if host in ("0.0.0.0", "::", "") else host
        self.port = port
        app = create_app(get_family(family), env_kwargs=dict(env_kwargs or {}))
        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, **uvicorn_options()))
        self.thread = threading.Thread(target=self.server.run, name=f"env-{family}", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"env server {family} did not start on {self.host}:{port}")
            time.sleep(0.05)

    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def pid(self) -> int:
        return os.getpid()


def _node_address(ray: Any) -> str:
    """The address this actor's Ray node registered with (127.0.0.1 for a loopback cluster)."""
    node_id = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node["NodeID"] == node_id:
            return str(node["NodeManagerAddress"])
    return str(ray.util.get_node_ip_address())


def connect(address: str) -> bool:
    """Join the Ray cluster at `address` (`auto`: this machine's, else start a local one).
    Returns whether this call started Ray (and so should shut it down)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        return False
    if address != "auto":
        ray.init(address=address, include_dashboard=False)
        return True
    try:
        ray.init(address="auto", include_dashboard=False)
    except ConnectionError:  # no cluster running here: a local one on the loopback address
        ray.init(include_dashboard=False, _node_ip_address="127.0.0.1")
    return True


@dataclass
class Replica:
    family: str
    index: int
    actor: Any
    url: str


class RayEnvReplicas:
    """The replicas of every family, started together; `urls()` gives the pools' URL lists."""

    def __init__(
        self,
        replicas: dict[str, int],
        *,
        base_port: int,
        host: str = "127.0.0.1",
        cpus: float = 1.0,
        env_kwargs: dict[str, Any] | None = None,
        max_restarts: int = MAX_RESTARTS,
    ) -> None:
        import ray

        remote: Any = ray.remote(num_cpus=cpus, max_restarts=max_restarts)(EnvServerActor)
        handles = []
        port = base_port
        for family, count in replicas.items():
            for k in range(count):
                kwargs = dict((env_kwargs or {}).get(family) or {})
                handles.append((family, k, remote.remote(family, host, port, kwargs)))
                port += 1
        urls = ray.get([h.url.remote() for _, _, h in handles], timeout=STARTUP_TIMEOUT_S)
        self.replicas = [Replica(f, k, h, url) for (f, k, h), url in zip(handles, urls, strict=True)]

    def urls(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in self.replicas:
            out.setdefault(r.family, []).append(r.url)
        return out

    def pids(self, timeout: float = STARTUP_TIMEOUT_S) -> list[int]:
        """Each replica's process id; waits for replicas that Ray is restarting."""
        import ray
        from ray.exceptions import ActorUnavailableError

        deadline = time.monotonic() + timeout
        while True:
            try:
                return list(ray.get([r.actor.pid.remote() for r in self.replicas], timeout=timeout))
            except ActorUnavailableError:  # restarting: ask again
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self) -> None:
        import ray

        for r in self.replicas:
            ray.kill(r.actor, no_restart=True)


@contextmanager
def ray_env_servers(cfg: Config) -> Iterator[dict[str, str]]:
    """`{family: "url,url,..."}`: `env.servers` URLs, then the Ray replicas of every family played."""
    import ray

    r = cfg.resources
    assert r.ray is not None
    started = connect(r.ray)
    families = list(dict.fromkeys([*cfg.data.families, *cfg.eval.families]))
    placed: RayEnvReplicas | None = None
    try:
        placed = RayEnvReplicas(
            {f: int(r.env_replicas.get(f, 1)) for f in families},
            base_port=cfg.env.base_port,
            host=cfg.env.host,
            cpus=r.env_replica_cpus,
            env_kwargs=dict(cfg.env.kwargs),
        )
        urls = {f: [u.strip() for u in cfg.env.servers[f].split(",")] for f in cfg.env.servers}
        for family, placed_urls in placed.urls().items():
            urls.setdefault(family, []).extend(placed_urls)
        yield {f: ",".join(u) for f, u in urls.items()}
    finally:
        if placed is not None:
            placed.stop()
        if started:
            ray.shutdown()
