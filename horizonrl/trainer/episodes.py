"""What a training workflow asks its rollout for: `Episode`s to play, the `Rollout` that plays them.

The lowest layer of `horizonrl.trainer`: the rollout implementation (`engine_rollout`) and every
workflow (RL, SFT's eval, AgentEvol's exploration) import it, and it imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from horizonrl.rollout.trajectory import Trajectory


@dataclass(frozen=True)
class Episode:
    """One episode to play: an item, its group (all samples of one item), seed, turn and token caps."""

    item_id: str
    group_id: int
    sample_index: int
    seed: int
    """Env reset seed, shared by the group; sampling seeds derive from it and `sample_index`."""
    max_turns: int
    max_tokens: int | None = None
    """Per-turn token cap of this episode (`rollout.max_tokens_schedule`); None: the engine's."""


class Rollout(Protocol):
    """Plays episodes with the current policy. `greedy` is for evaluation."""

    def __call__(self, episodes: list[Episode], *, step: int, greedy: bool = False) -> list[Trajectory]: ...
