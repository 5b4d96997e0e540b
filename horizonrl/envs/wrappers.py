"""Wrappers around a `TextEnv`.

The turn cap is never env logic. In a rollout it is counted once, by the rollout engine
(`EngineConfig.max_turns`, which the ScalingInter schedule sets): every assistant turn counts,
also one whose action did not parse and so never stepped the env, which a wrapper cannot see.
`TurnLimit` is the same cap for code that steps a `TextEnv` itself (`horizonrl solve
--max-turns`, scripts); the engine's pools hand out unwrapped envs.
"""

from __future__ import annotations

from typing import Any

from horizonrl.envs.core import StepResult, TextEnv


class TurnLimit:
    """Truncate an episode after `max_turns` steps, for code that steps the env itself.

    The step that reaches the cap is returned with `truncated=True` unless the env itself
    terminated on that step; `terminated` is never set by the cap (the rollout engine's cap
    follows the same rule). Not for envs the engine plays: it counts turns itself.
    """

    def __init__(self, env: TextEnv, max_turns: int) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.env = env
        self.max_turns = max_turns
        self.turns = 0

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.turns = 0
        return self.env.reset(item_id, seed=seed)

    def step(self, action: str) -> StepResult:
        if self.turns >= self.max_turns:
            raise RuntimeError(f"episode already truncated at max_turns={self.max_turns}; call reset()")
        result = self.env.step(action)
        self.turns += 1
        if self.turns >= self.max_turns and not result.terminated:
            result.truncated = True
        return result

    def available_actions(self) -> list[str] | None:
        return self.env.available_actions()

    def close(self) -> None:
        self.env.close()
