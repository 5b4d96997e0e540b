"""The rollout engines by name: `rollout.engine` in the training config picks one.

    engine = make_engine("async", backend, LocalEnvPool("textcraft"), EngineConfig(max_turns=30))

| name | what it does |
|---|---|
| `lockstep` | `RolloutEngine`: rounds of one batched generation for all live episodes, then their env steps |
| `async` | `AsyncRolloutEngine`: each episode advances as soon as its own env step returns |

Both play the same episodes with the same per-turn code, budgets and trajectory fields
(docs/rollout.md, "Engines").
"""

from __future__ import annotations

from horizonrl.agent.prompts import FamilyPrompt
from horizonrl.rollout.async_engine import AsyncRolloutEngine
from horizonrl.rollout.backends.base import PolicyBackend
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.rollout.envpool import EnvPool

ENGINES: dict[str, type[RolloutEngine]] = {"lockstep": RolloutEngine, "async": AsyncRolloutEngine}


def make_engine(
    name: str,
    backend: PolicyBackend,
    pool: EnvPool,
    config: EngineConfig | None = None,
    *,
    prompt: FamilyPrompt | None = None,
) -> RolloutEngine:
    """The engine registered as `name` (`lockstep`, `async`) over `backend` and `pool`."""
    if name not in ENGINES:
        raise KeyError(f"unknown rollout engine {name!r}; known: {', '.join(ENGINES)}")
    return ENGINES[name](backend, pool, config, prompt=prompt)
