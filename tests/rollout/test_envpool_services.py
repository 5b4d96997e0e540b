"""LocalEnvPool and a family's shared backends (`FamilySpec.host_services`): started once, even when
the first episodes acquire their envs at the same moment, passed to every env, stopped at `aclose`."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any

from horizonrl.envs.registry import get_family, register
from horizonrl.rollout.envpool import LocalEnvPool

EVENTS: list[str] = []
MADE: list[dict[str, Any]] = []
_lock = threading.Lock()


@contextlib.contextmanager
def services(env_kwargs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    with _lock:
        EVENTS.append("start")
    time.sleep(0.2)  # a slow start (the web family's sites take about a second)
    yield {"backend": "shared-1"}
    EVENTS.append("stop")


def make_env(**kwargs: Any) -> Any:
    backend = kwargs.pop("backend")
    MADE.append({"backend": backend})
    return get_family("textcraft").make_env(**kwargs)


def test_services_start_once_for_concurrent_first_acquires() -> None:
    spec = dataclasses.replace(get_family("textcraft"), name="services_toy", make_env=make_env,
                               host_services=services)  # fmt: skip
    register(spec, overwrite=True)

    async def run() -> None:
        pool = LocalEnvPool("services_toy")
        envs = await asyncio.gather(*(pool.acquire() for _ in range(6)))
        assert EVENTS == ["start"]
        for env in envs:
            await pool.release(env)
        await pool.aclose()

    asyncio.run(run())
    assert EVENTS == ["start", "stop"]
    assert MADE == [{"backend": "shared-1"}] * 6
