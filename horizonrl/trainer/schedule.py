"""ScalingInter-RL: the turn cap of each training step's rollout, and other per-step schedules.

The paper (AgentGym-RL, https://arxiv.org/abs/2509.08755) trains with a short interaction
horizon first, so the agent learns to act before it learns to explore, and raises the cap in
stages. A schedule only picks the number the rollout engine enforces (`max_turns`).

A schedule is a schedule of an int: its `rounds` are any per-stage values. The same classes
pick the turn cap (`schedule:`), the per-turn token cap (`rollout.max_tokens_schedule`,
`schedule/max_tokens`) and the curriculum stage (`data.curriculum`, values 1..stages, see
`horizonrl.trainer.data.CurriculumSampler`); `value` / `group_values` are the generic names of
`max_turns` / `group_caps`.

    schedule = make_schedule(ScheduleConfig(type="stepwise", rounds=[2, 4, 6], every=1))
    schedule.max_turns(step)             # the stage's cap for 0-based `step`: 2, 4, 6, 6, ...
    schedule.group_caps(step, n_groups)  # cap of each item group in the step's batch
    schedule.update(step, success_rate)  # after the step (adaptive reads it)
    schedule.state_dict() / load_state_dict(...)   # part of every checkpoint

Types:
- `fixed`: one cap, `rounds=[N]`.
- `stepwise` (the paper's method): `rounds[min(step // every, len - 1)]`. A pure function of
  the step, so a resumed run continues on the same stage (the reference's counter was off by
  one after resume).
- `adaptive`: advance to the next cap once at least `every` steps were spent in the stage and
  the success rate averaged over the last `window` steps reaches `threshold`, or has moved less
  than `plateau_tol` since the window before (a plateau).
- `mixed`: the stepwise stage, but a `mixed_fraction` of the groups (chosen by a seeded draw per
  step) get the next stage's cap, so the longer horizon is seen before the switch.
"""

from __future__ import annotations

import random
from typing import Any

from horizonrl.config import ScheduleConfig


class TurnSchedule:
    """Base class: a fixed list of stage values; subclasses decide the stage."""

    def __init__(self, cfg: ScheduleConfig, seed: int = 0) -> None:
        self.cfg = cfg
        self.rounds = list(cfg.rounds)
        self.seed = seed

    def stage(self, step: int) -> int:
        """Index into `rounds` of the stage that `step` (0-based) runs in."""
        return 0

    def value(self, step: int) -> int:
        """The stage's value at `step`."""
        return self.rounds[self.stage(step)]

    def group_values(self, step: int, n_groups: int) -> list[int]:
        """The value of each of the step's `n_groups` item groups (all samples of an item share it)."""
        return [self.value(step)] * n_groups

    def max_turns(self, step: int) -> int:
        """The stage's cap at `step` (what `schedule/max_turns` logs)."""
        return self.value(step)

    def group_caps(self, step: int, n_groups: int) -> list[int]:
        """The cap of each of the step's `n_groups` item groups."""
        return self.group_values(step, n_groups)

    def update(self, step: int, success_rate: float) -> None:  # noqa: B027 (stateless by default)
        """Record the success rate measured at `step` (after its rollout)."""

    def state_dict(self) -> dict[str, Any]:
        return {"type": self.cfg.type, "rounds": self.rounds}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if list(state.get("rounds", self.rounds)) != self.rounds:
            where = self.cfg.key_prefix.rstrip(".")
            raise ValueError(
                f"checkpoint's {where} rounds {state['rounds']} differ from the config's {self.rounds}"
            )


class FixedSchedule(TurnSchedule):
    """One cap for the whole run."""


class StepwiseSchedule(TurnSchedule):
    """`rounds[min(step // every, len(rounds) - 1)]`: the paper's ScalingInter-RL."""

    def stage(self, step: int) -> int:
        return min(step // self.cfg.every, len(self.rounds) - 1)


class MixedSchedule(StepwiseSchedule):
    """Stepwise, with a seeded `mixed_fraction` of each step's groups on the next stage's cap."""

    def group_values(self, step: int, n_groups: int) -> list[int]:
        stage = self.stage(step)
        caps = [self.rounds[stage]] * n_groups
        if stage + 1 < len(self.rounds):
            k = round(self.cfg.mixed_fraction * n_groups)
            for i in random.Random(f"{self.seed}:{step}").sample(range(n_groups), k):
                caps[i] = self.rounds[stage + 1]
        return caps


class AdaptiveSchedule(TurnSchedule):
    """Advance when the moving success rate passes `threshold` or plateaus (see module docstring)."""

    def __init__(self, cfg: ScheduleConfig, seed: int = 0) -> None:
        super().__init__(cfg, seed)
        self.current = 0
        self.history: list[float] = []
        """Success rates measured in the current stage, in step order."""
        self.advanced_at: list[int] = []
        """Steps after which the schedule moved to the next stage."""

    def stage(self, step: int) -> int:
        return self.current

    def update(self, step: int, success_rate: float) -> None:
        self.history.append(float(success_rate))
        if self.current + 1 >= len(self.rounds) or len(self.history) < self.cfg.every:
            return
        w = self.cfg.window
        recent = self.history[-w:]
        moving = sum(recent) / len(recent)
        plateau = False
        if len(self.history) >= 2 * w:
            before = self.history[-2 * w : -w]
            plateau = abs(moving - sum(before) / w) < self.cfg.plateau_tol
        if moving >= self.cfg.threshold or plateau:
            self.current += 1
            self.history = []
            self.advanced_at.append(step)

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "current": self.current,
            "history": list(self.history),
            "advanced_at": list(self.advanced_at),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.current = int(state["current"])
        self.history = [float(x) for x in state["history"]]
        self.advanced_at = [int(x) for x in state["advanced_at"]]


SCHEDULES: dict[str, type[TurnSchedule]] = {
    "fixed": FixedSchedule,
    "stepwise": StepwiseSchedule,
    "adaptive": AdaptiveSchedule,
    "mixed": MixedSchedule,
}


def make_schedule(cfg: ScheduleConfig, seed: int = 0) -> TurnSchedule:
    """The schedule `cfg.type` names; unknown types raise a KeyError naming the valid ones."""
    if cfg.type not in SCHEDULES:
        raise KeyError(f"unknown schedule type {cfg.type!r}; valid: {', '.join(SCHEDULES)}")
    return SCHEDULES[cfg.type](cfg, seed)
