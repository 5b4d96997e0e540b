"""The text-environment contract shared by every family, local or remote.

A `TextEnv` follows Gymnasium's reset/step contract with text in and text out:

    observation, info = env.reset("textcraft_12", seed=0)
    result = env.step("get 1 oak log")          # StepResult
    result.observation, result.reward, result.terminated, result.truncated, result.info

- `terminated` means the task is over for good (solved, or failed irrecoverably);
  `truncated` means the episode was cut (turn cap, budget). They are never merged.
- `info` always carries `success` (bool), `score` (float in [0, 1]) and `category`.
- An invalid action is answered with an observation that says what was wrong; it is
  never an exception.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

REQUIRED_INFO_KEYS = ("success", "score", "category")


class EnvError(RuntimeError):
    """An environment backend failed (crashed JVM, dead browser, lost server).

    Raised for failures of the machinery, never for a bad action: a bad action is an
    observation. The rollout engine marks the affected trajectory `failed` with
    `str(error)` as the reason.
    """


class UnknownItemError(KeyError, ValueError):
    """The item id does not name an item of this family (e.g. `textcraft_99999`)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown item"


@dataclass
class StepResult:
    """What one `step` returns; field names mirror Gymnasium's 5-tuple."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """The episode is over for either reason (the reference protocol's `done`)."""
        return self.terminated or self.truncated

    def to_dict(self) -> dict[str, Any]:
        return {
            "observation": self.observation,
            "reward": self.reward,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "info": self.info,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepResult:
        return cls(
            observation=str(data["observation"]),
            reward=float(data["reward"]),
            terminated=bool(data["terminated"]),
            truncated=bool(data["truncated"]),
            info=dict(data.get("info") or {}),
        )


@runtime_checkable
class TextEnv(Protocol):
    """One episode at a time of one family; see the module docstring."""

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]: ...

    def step(self, action: str) -> StepResult: ...

    def available_actions(self) -> list[str] | None: ...

    def close(self) -> None: ...


def parse_item_id(item_id: str) -> tuple[str, int]:
    """Split `"textcraft_12"` into `("textcraft", 12)`; raise `UnknownItemError` if malformed."""
    family, sep, index = str(item_id).rpartition("_")
    if not sep or not family or not index.isdigit():
        raise UnknownItemError(
            f"malformed item id {item_id!r}: expected '<family>_<index>', e.g. 'textcraft_12'"
        )
    return family, int(index)


def make_info(success: bool, score: float, category: str, **extra: Any) -> dict[str, Any]:
    """Build an `info` dict with the three required keys validated."""
    score = float(score)
    if not (0.0 <= score <= 1.0) or math.isnan(score):
        raise ValueError(f"score must be in [0, 1], got {score}")
    return {"success": bool(success), "score": score, "category": str(category), **extra}


def json_roundtrip(value: Any) -> Any:
    """Return `value` after a JSON encode/decode (what crossing HTTP does to it)."""
    return json.loads(json.dumps(value))
