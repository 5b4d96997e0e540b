"""`TextEnv`: a base class with defaults, for writing a family in a few lines.

`horizonrl.envs.core.TextEnv` is the contract (a Protocol); this class implements its chores so
that an env only writes `reset` and `step`:

    class GuessEnv(TextEnv):
        def reset(self, item_id, *, seed=None):
            self.begin(item_id)                 # self.item: the item's row of the items file
            return f"Guess a number from 1 to {self.item['high']}.", self.make_info()

        def step(self, action):
            won = action.strip() == f"guess {self.item['target']}"
            return StepResult("Correct!" if won else "No.", float(won), won, False, self.make_info(won))

    SPEC = FamilySpec.from_items("guess", "items.jsonl", GuessEnv)

Defaults: `available_actions()` is None (free-form actions), `close()` does nothing, `make_info`
fills `success`, `score` (1.0 on success, else 0.0, unless given) and the item's `category`.
`begin` reads the item from `self.items`, the table `FamilySpec.from_items` hands each env it
makes; an env that keeps its own data can skip `begin` and set `self.category` itself.
"""

from __future__ import annotations

from typing import Any

from horizonrl.envs import core
from horizonrl.envs.core import StepResult, make_info
from horizonrl.envs.items import DEFAULT_CATEGORY, ItemTable


class TextEnv(core.TextEnv):
    """Base class of an env: subclass it and write `reset` and `step` (see the module docstring)."""

    items: ItemTable | None = None
    """The family's items (set by `FamilySpec.from_items` on each env it makes)."""
    item_id: str | None = None
    """The item of the current episode (set by `begin`)."""
    item: dict[str, Any]
    """The current item's row of the items file (set by `begin`)."""
    category: str = DEFAULT_CATEGORY
    """The current item's category, which `make_info` reports."""

    def begin(self, item_id: str) -> dict[str, Any]:
        """Start an episode on `item_id`: sets `self.item_id`, `self.item` (its row) and
        `self.category`, and returns the row; raises `UnknownItemError` for an unknown id."""
        if self.items is None:
            raise RuntimeError(
                f"{type(self).__name__}.begin() needs the family's items: make the env with "
                "FamilySpec.from_items(...).make_env(), or set self.items"
            )
        row = self.items.item(item_id)
        self.item_id, self.item, self.category = item_id, row, self.items.category_of(item_id)
        return row

    def make_info(self, success: bool = False, score: float | None = None, **extra: Any) -> dict[str, Any]:
        """`info` with `success`, `score` (default: 1.0 on success, else 0.0) and `category`."""
        return make_info(success, float(success) if score is None else score, self.category, **extra)

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError(f"{type(self).__name__} must define reset(item_id, *, seed=None)")

    def step(self, action: str) -> StepResult:
        raise NotImplementedError(f"{type(self).__name__} must define step(action)")

    def available_actions(self) -> list[str] | None:
        return None

    def close(self) -> None:
        return None
