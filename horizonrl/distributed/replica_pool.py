"""`ReplicaEnvPool`: the sessions of one family balanced over several env-server replicas.

    pool = ReplicaEnvPool(["http://10.0.0.5:36100", "http://10.0.0.6:36100"], "textcraft")
    env = await pool.acquire()          # a session on the replica with the fewest live sessions

Each replica is a `RemoteEnvPool` (its own pooled client). A new episode goes to the live
replica with the fewest sessions in flight (ties: the lower index). A replica is taken out of the
pool (`down`) when one of its sessions fails with an `EnvError` other than an unknown item (the
server died, broke or stopped answering): the episodes in flight on it fail (their sessions died
with it), the others go on, and later episodes go to the survivors. A reset that cannot even
connect moves to another replica, since no session was opened yet. The pool is built per
rollout; at the start of each it asks every replica's `/healthz`, so a replica that came back
(a restarted Ray actor, a restarted server) serves the next step again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from horizonrl.envs.core import EnvError, StepResult, UnknownItemError
from horizonrl.rollout.envpool import AsyncEnv, EnvPool, RemoteEnvPool

HEALTH_TIMEOUT_S = 2.0


class _ReplicaEnv:
    """One episode's env on replica `index`; a failure there marks the replica down."""

    def __init__(self, pool: ReplicaEnvPool, index: int, inner: AsyncEnv) -> None:
        self.pool, self.index, self.inner = pool, index, inner

    async def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        while True:
            try:
                return await self.inner.reset(item_id, seed=seed)
            except UnknownItemError:
                raise
            except EnvError as exc:
                self.pool.mark_down(self.index, str(exc))
                if "cannot connect" not in str(exc) or not await self.pool.move(self):
                    raise

    async def step(self, action: str) -> StepResult:
        try:
            return await self.inner.step(action)
        except EnvError as exc:
            self.pool.mark_down(self.index, str(exc))
            raise

    async def available_actions(self) -> list[str] | None:
        try:
            return await self.inner.available_actions()
        except EnvError as exc:
            self.pool.mark_down(self.index, str(exc))
            raise

    async def close(self) -> None:
        await self.inner.close()


class ReplicaEnvPool(EnvPool):
    def __init__(
        self,
        urls: list[str],
        family: str,
        *,
        timeout: float = 60.0,
        retries: int = 2,
        reconnect_s: float = 0.0,
    ) -> None:
        if not urls:
            raise ValueError(f"ReplicaEnvPool({family!r}) needs at least one URL")
        self.family = family
        self.urls = list(urls)
        self.replicas = [
            RemoteEnvPool(url, family, timeout=timeout, retries=retries, reconnect_s=reconnect_s)
            for url in urls
        ]
        self.live = [0] * len(urls)
        """Sessions in flight per replica."""
        self.opened = [0] * len(urls)
        """Sessions opened per replica over the pool's life (what the balance did)."""
        self.down: dict[int, str] = {}
        """Replica index -> why it was taken out."""
        self._checked = False

    def mark_down(self, index: int, reason: str) -> None:
        self.down.setdefault(index, reason)

    def _pick(self) -> int:
        up = [k for k in range(len(self.urls)) if k not in self.down]
        if not up:
            raise EnvError(f"every {self.family} replica is down: {'; '.join(self.down.values())}")
        return min(up, key=lambda k: (self.live[k], k))

    async def _check_health(self) -> None:
        import httpx

        async def healthy(url: str) -> bool:
            try:
                async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S, trust_env=False) as client:
                    return (await client.get(f"{url}/healthz")).status_code == 200
            except httpx.HTTPError:
                return False

        self._checked = True
        answers = await asyncio.gather(*(healthy(url) for url in self.urls))
        for k, ok in enumerate(answers):
            if not ok:
                self.mark_down(k, f"{self.urls[k]}: /healthz did not answer 200")

    async def acquire(self) -> AsyncEnv:
        if not self._checked:
            await self._check_health()
        index = self._pick()
        inner = await self.replicas[index].acquire()
        self.live[index] += 1
        self.opened[index] += 1
        return _ReplicaEnv(self, index, inner)

    async def move(self, env: _ReplicaEnv) -> bool:
        """Give `env` (not reset yet) a session on another live replica; False when none is left."""
        try:
            index = self._pick()
        except EnvError:
            return False
        await self.replicas[env.index].release(env.inner, broken=True)
        self.live[env.index] -= 1
        env.index, env.inner = index, await self.replicas[index].acquire()
        self.live[index] += 1
        self.opened[index] += 1
        return True

    async def release(self, env: AsyncEnv, *, broken: bool = False) -> None:
        assert isinstance(env, _ReplicaEnv)
        self.live[env.index] -= 1
        await self.replicas[env.index].release(env.inner, broken=broken)

    async def aclose(self) -> None:
        for replica in self.replicas:
            await replica.aclose()
