"""How episodes are played: the one set of rollout settings and their defaults.

    RolloutSettings                 budgets, sampling, concurrency (the fields below)
    ├── EngineConfig                + max_turns, progress, logprob_temperature (horizonrl.rollout.engine)
    ├── RolloutConfig               + backend, n, dtype: the training config's `rollout:` (horizonrl.config)
    └── EvalRolloutSettings         greedy by default + items, turn cap, samples: what an eval plays
        ├── EvalConfig              + every, at_end, families: the training config's `eval:`
        └── EvalSettings            + model, backend, env, servers, out: `horizonrl eval`

A default changes here and nowhere else. Both evals (the trainer's in-run eval and
`horizonrl eval`) build their engine from an `EvalRolloutSettings` with the same rule for the
turn cap (`turn_cap`: the family's eval cap unless `max_turns` is given), so the two scores of
one checkpoint under the same settings are the same score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

EVAL_MAX_TURNS = {"textcraft": 30, "babyai": 20, "sciworld": 30, "search": 30, "web": 15}
"""The reference's eval turn caps per family (REFERENCE.md); other families get 30."""


@dataclass(frozen=True)
class RolloutSettings:
    """Budgets, sampling and concurrency of a rollout (the fields every rollout user shares)."""

    key_prefix: ClassVar[str] = ""
    """How validation errors name the fields (`rollout.` in the training config)."""

    max_tokens: int = 256
    """Most tokens sampled per turn."""
    max_response_length: int = 8192
    """Most tokens after the prompt (sampled, observation and template tokens), enforced during
    the rollout."""
    temperature: float = 1.0
    """Sampling temperature; 0 is greedy."""
    top_p: float = 1.0
    top_k: int = 0
    """0 disables top-k."""
    batch_size: int = 32
    """Most episodes live at once (= rows of one generation batch; memory bound)."""
    env_timeout_s: float = 60.0
    """Seconds one env reset/step may take before the episode is marked failed."""

    def __post_init__(self) -> None:
        p = self.key_prefix
        for name in ("max_tokens", "max_response_length", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{p}{name} must be >= 1, got {getattr(self, name)}")
        if self.temperature < 0:
            raise ValueError(f"{p}temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"{p}top_p must be in (0, 1], got {self.top_p}")
        if self.env_timeout_s <= 0:
            raise ValueError(f"{p}env_timeout_s must be > 0, got {self.env_timeout_s}")


@dataclass(frozen=True)
class EvalRolloutSettings(RolloutSettings):
    """What an eval plays and how; shared by the trainer's `eval:` section and `horizonrl eval`."""

    temperature: float = 0.0
    """0 = greedy (the reference evaluated at temperature 1, a defect)."""
    split: str = "test"
    limit: int | None = None
    """First N items of the split per family, after the category filter (None: all)."""
    categories: list[str] = field(default_factory=list)
    """Keep only items of these categories (e.g. `[depth 1, depth 2]`); empty keeps all."""
    max_turns: int | None = None
    """Turn cap (None: the family's reference eval cap, `EVAL_MAX_TURNS`: 30 for textcraft)."""
    n: int = 1
    """Samples per item (avg@n / pass@n); the samples of an item share its env seed."""
    seed: int = 0
    """Env reset seed of every item."""

    def __post_init__(self) -> None:
        super().__post_init__()
        p = self.key_prefix
        if self.n < 1:
            raise ValueError(f"{p}n must be >= 1, got {self.n}")
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError(f"{p}max_turns must be >= 1 when set, got {self.max_turns}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"{p}limit must be >= 1 when set, got {self.limit}")

    def turn_cap(self, family: str) -> int:
        """The eval's turn cap for `family`: `max_turns`, else the family's eval cap."""
        return self.max_turns or EVAL_MAX_TURNS.get(family, 30)
