"""Toy families for the server tests: session-specific observations, and actions that
sleep, raise, kill the worker or slow its close, so every server path can be driven on purpose."""

from __future__ import annotations

import os
import time
from typing import Any

from horizonrl.envs.core import StepResult, UnknownItemError, make_info, parse_item_id
from horizonrl.envs.registry import FamilySpec, register

N_ITEMS = 300


class ToyEnv:
    """Observations name the item, seed and turn, so a mixed-up session is visible.

    Actions: "win" solves the item; "sleep S" sleeps S seconds; "boom" raises;
    "die" kills the process (only sensible in a worker); "slowclose S" makes `close`
    take S seconds; anything else is echoed.
    """

    family = "srvtoy"

    def __init__(self, greeting: str = "hello") -> None:
        self.greeting = greeting
        self.item_id: str | None = None
        self.seed: int | None = None
        self.turn = 0
        self.close_delay = 0.0

    def _category(self) -> str:
        return "even" if parse_item_id(self.item_id or "x_0")[1] % 2 == 0 else "odd"

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        family, index = parse_item_id(item_id)
        if family != self.family or index >= N_ITEMS:
            raise UnknownItemError(f"unknown item {item_id!r}")
        self.item_id, self.seed, self.turn = item_id, seed, 0
        return f"{self.greeting} {item_id} seed={seed}", make_info(False, 0.0, self._category())

    def step(self, action: str) -> StepResult:
        self.turn += 1
        if action.startswith("sleep "):
            time.sleep(float(action.split()[1]))
        elif action == "boom":
            raise RuntimeError("the toy env exploded")
        elif action == "die":
            os._exit(3)
        elif action.startswith("slowclose "):
            self.close_delay = float(action.split()[1])
        won = action == "win"
        said = "solved" if won else f"you said {action[:30]}"
        obs = f"{self.item_id} seed={self.seed} turn={self.turn}: {said}"
        return StepResult(obs, float(won), won, False, make_info(won, float(won), self._category()))

    def available_actions(self) -> list[str] | None:
        return ["win", "look"]

    def close(self) -> None:
        time.sleep(self.close_delay)


class ProcToyEnv(ToyEnv):
    family = "srvtoyproc"


def _splits(family: str) -> Any:
    return lambda: {"train": [f"{family}_{i}" for i in range(N_ITEMS - 10)],
                    "test": [f"{family}_{i}" for i in range(N_ITEMS - 10, N_ITEMS)]}  # fmt: skip


def _category_of(item_id: str) -> str:
    if parse_item_id(item_id)[1] >= N_ITEMS:
        raise UnknownItemError(item_id)
    return "even" if parse_item_id(item_id)[1] % 2 == 0 else "odd"


class WinExpert:
    def reset(self, item_id: str, observation: str, info: dict[str, Any]) -> None:
        pass

    def act(self, observation: str) -> tuple[str, str]:
        return "Just win.", "win"


TOY = FamilySpec("srvtoy", ToyEnv, _splits("srvtoy"), ("even", "odd"), _category_of, make_expert=WinExpert)
PROC_TOY = FamilySpec(
    "srvtoyproc", ProcToyEnv, _splits("srvtoyproc"), ("even", "odd"), _category_of, make_expert=WinExpert,
    isolate=True,
)  # fmt: skip
register(TOY, overwrite=True)
register(PROC_TOY, overwrite=True)
