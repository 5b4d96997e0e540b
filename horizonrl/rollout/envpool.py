"""Env pools: one async env per episode, from local `TextEnv` objects or remote HTTP sessions.

    pool = LocalEnvPool("textcraft")                         # spec.make_env(), run in threads
    pool = RemoteEnvPool("http://127.0.0.1:36005", "textcraft")   # a server session per episode
    env = await pool.acquire()
    observation, info = await env.reset("textcraft_3", seed=0)
    result = await env.step("inventory")
    await pool.release(env, broken=False)
    await pool.aclose()

Local envs are sync objects; their calls run in worker threads (`asyncio.to_thread`) so a
slow step (a JVM, a browser) does not hold up the other episodes. A local env is reused by
later episodes unless it broke (an error or a timeout), so expensive envs are created once
per concurrent episode, not once per item. A family's shared backends
(`FamilySpec.host_services`: the web family's sites) start with the pool's first env and stop
at `aclose`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from horizonrl.envs.core import StepResult, TextEnv
from horizonrl.envs.registry import get_family


class AsyncEnv(Protocol):
    """The `TextEnv` contract with awaitable methods (what the engine drives)."""

    async def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]: ...

    async def step(self, action: str) -> StepResult: ...

    async def available_actions(self) -> list[str] | None: ...

    async def close(self) -> None: ...


class ThreadedEnv:
    """An async view of a sync `TextEnv`: each call runs in a worker thread of `executor`."""

    def __init__(self, env: TextEnv, executor: ThreadPoolExecutor | None = None) -> None:
        self.env = env
        self.executor = executor

    async def _call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        result: tuple[str, dict[str, Any]] = await self._call(
            functools.partial(self.env.reset, item_id, seed=seed)
        )
        return result

    async def step(self, action: str) -> StepResult:
        result: StepResult = await self._call(self.env.step, action)
        return result

    async def available_actions(self) -> list[str] | None:
        actions: list[str] | None = await self._call(self.env.available_actions)
        return actions

    async def close(self) -> None:
        await self._call(self.env.close)


class EnvPool(ABC):
    """Hands out one env per episode; `family` names the prompt and categories to use."""

    family: str

    @abstractmethod
    async def acquire(self) -> AsyncEnv: ...

    @abstractmethod
    async def release(self, env: AsyncEnv, *, broken: bool = False) -> None:
        """Give an episode's env back; a `broken` one is closed, never reused."""

    async def aclose(self) -> None:  # noqa: B027 (optional)
        """Close every env the pool still holds."""


class LocalEnvPool(EnvPool):
    """Envs made in this process by the family's factory (or `make_env`), reused across episodes."""

    def __init__(
        self,
        family: str,
        *,
        make_env: Any = None,
        env_kwargs: dict[str, Any] | None = None,
        max_threads: int = 32,
    ) -> None:
        self.family = family
        self._env_kwargs = dict(env_kwargs or {})
        self._custom_make = make_env
        self.max_threads = max_threads
        self._free: list[ThreadedEnv] = []
        self._executor: ThreadPoolExecutor | None = None
        self._services: contextlib.ExitStack | None = None
        self._services_lock = threading.Lock()  # the first acquires run at once, in several threads
        self.created = 0

    def _start_services(self) -> Any:
        """The env factory; the family's shared backends (`FamilySpec.host_services`) start on first use."""
        if self._custom_make is not None:
            return self._custom_make
        spec = get_family(self.family)
        with self._services_lock:
            if self._services is None:
                services = contextlib.ExitStack()
                self._env_kwargs = services.enter_context(spec.services(self._env_kwargs))
                self._services = services
            kwargs = self._env_kwargs
        return lambda: spec.make_env(**kwargs)

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.max_threads, thread_name_prefix=f"env-{self.family}")
        return self._executor

    async def acquire(self) -> AsyncEnv:
        if self._free:
            return self._free.pop()
        self.created += 1
        executor = self._pool()
        loop = asyncio.get_running_loop()
        make = await loop.run_in_executor(executor, self._start_services)
        env = await loop.run_in_executor(executor, make)
        return ThreadedEnv(env, executor)

    async def release(self, env: AsyncEnv, *, broken: bool = False) -> None:
        if broken or not isinstance(env, ThreadedEnv):
            # a timed-out call may still be running in its thread: close without waiting for it
            self._pool().submit(_close_quietly, env)
            return
        self._free.append(env)

    async def aclose(self) -> None:
        envs, self._free = self._free, []
        if self._executor is not None:
            loop = asyncio.get_running_loop()
            await asyncio.gather(*(loop.run_in_executor(self._executor, _close_quietly, e) for e in envs))
            # a hung env call must not hold up the caller: leave its thread behind
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        if self._services is not None:
            services, self._services = self._services, None
            await asyncio.get_running_loop().run_in_executor(None, services.close)


def _close_quietly(env: Any) -> None:
    inner = env.env if isinstance(env, ThreadedEnv) else env
    with contextlib.suppress(Exception):  # a broken env may fail to close; nothing to do about it
        inner.close()


RECONNECT_S = 30.0
"""How long a remote episode's reset waits for a server that refuses connections (restarting)."""


class RemoteEnvPool(EnvPool):
    """One session per episode on a `horizonrl serve` (or reference AgentGym) server.

    All sessions share one pooled `httpx.AsyncClient`, created in the running event loop.
    Every episode opens a fresh session, so none outlives a server restart. If the server dies,
    the episodes in flight fail (`EnvError`: their sessions died with it; closing them is
    best-effort and never raises), and an episode whose reset finds the server refusing
    connections retries for up to `reconnect_s` seconds, so episodes started while a supervised
    server restarts (`horizonrl.trainer.servers`) play on the new one.
    """

    def __init__(
        self,
        base_url: str,
        family: str,
        *,
        protocol: str = "v1",
        timeout: float = 60.0,
        retries: int = 2,
        reconnect_s: float = RECONNECT_S,
        max_connections: int = 64,
    ) -> None:
        self.family = family
        self.base_url = base_url
        self.protocol = protocol
        self.timeout = timeout
        self.retries = retries
        self.reconnect_s = reconnect_s
        self.max_connections = max_connections
        self._client: Any = None

    def _shared_client(self) -> Any:
        import httpx

        if self._client is None:
            limits = httpx.Limits(
                max_connections=self.max_connections, max_keepalive_connections=self.max_connections
            )
            self._client = httpx.AsyncClient(timeout=self.timeout, limits=limits, trust_env=False)
        return self._client

    async def acquire(self) -> AsyncEnv:
        from horizonrl.server.client import AsyncRemoteEnv

        env: AsyncEnv = AsyncRemoteEnv(
            self.base_url,
            self.family,
            protocol=self.protocol,  # type: ignore[arg-type]
            timeout=self.timeout,
            retries=self.retries,
            reconnect_s=self.reconnect_s,
            client=self._shared_client(),
        )
        return env

    async def release(self, env: AsyncEnv, *, broken: bool = False) -> None:
        # the server may be gone; its session TTL cleans up what we could not close
        with contextlib.suppress(Exception):
            await asyncio.wait_for(env.close(), timeout=min(self.timeout, 10.0))

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
