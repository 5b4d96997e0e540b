"""A tiny counting env used by contract tests (not a family users see)."""

from __future__ import annotations

from typing import Any

from horizonrl.envs.core import StepResult, UnknownItemError, make_info, parse_item_id
from horizonrl.envs.registry import FamilySpec


class CountEnv:
    """Reach `target` by sending "inc"; anything else is an invalid action."""

    def __init__(self) -> None:
        self.count = 0
        self.target = 0
        self.item_id = ""

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        family, index = parse_item_id(item_id)
        if family != "toy" or index >= 10:
            raise UnknownItemError(f"unknown item {item_id!r}")
        self.item_id, self.count, self.target = item_id, 0, index % 3 + 1
        return f"Count to {self.target}.", make_info(False, 0.0, CATEGORY[index % 2])

    def step(self, action: str) -> StepResult:
        category = CATEGORY[parse_item_id(self.item_id)[1] % 2]
        if action.strip() != "inc":
            return StepResult(
                "Invalid action. Valid actions: inc", 0.0, False, False, make_info(False, 0.0, category)
            )
        self.count += 1
        done = self.count >= self.target
        return StepResult(
            f"Count is {self.count}.", float(done), done, False, make_info(done, float(done), category)
        )

    def available_actions(self) -> list[str] | None:
        return ["inc"]

    def close(self) -> None:
        pass


class IncExpert:
    def reset(self, item_id: str, observation: str, info: dict[str, Any]) -> None:
        pass

    def act(self, observation: str) -> tuple[str, str]:
        return "Increase the count.", "inc"


CATEGORY = ("even", "odd")

TOY_SPEC = FamilySpec(
    name="toy",
    make_env=CountEnv,
    load_splits=lambda: {"train": [f"toy_{i}" for i in range(8)], "test": ["toy_8", "toy_9"]},
    categories=CATEGORY,
    category_of=lambda item_id: CATEGORY[parse_item_id(item_id)[1] % 2],
    make_expert=IncExpert,
)
