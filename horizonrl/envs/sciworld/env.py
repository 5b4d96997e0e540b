"""`SciWorldEnv`: one ScienceWorld episode at a time over one JVM (see the package docstring)."""

from __future__ import annotations

from typing import Any

from horizonrl.envs.core import StepResult, make_info
from horizonrl.envs.sciworld.jvm import DEFAULT_JAVA_OPTS, SimulatorJVM
from horizonrl.envs.sciworld.tasks import Item, item_of

MAX_ACTION_CHARS = 1000
NO_MATCH = "No known action matches that input."


def heap_opts(heap_mb: int | None, java_opts: tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    """JVM options: `java_opts` if given, else the defaults with `-Xmx` set to `heap_mb`."""
    if java_opts is not None:
        return tuple(java_opts)
    if heap_mb is None:
        return DEFAULT_JAVA_OPTS
    return (f"-Xmx{int(heap_mb)}m", *(o for o in DEFAULT_JAVA_OPTS if not o.startswith("-Xmx")))


class SciWorldEnv:
    """ScienceWorld as a `TextEnv`. The JVM starts in the constructor (~1-2 s) and is reused
    across resets: `reset` only reloads the task (~0.1 s).

    Args:
        simplifications: ScienceWorld's simplification string ("" = none, as the reference;
            "easy" or e.g. "openDoors,teleportAction").
        heap_mb: JVM heap cap in MiB (default 256).
        java_opts: full JVM option list; overrides `heap_mb`.
    """

    def __init__(
        self,
        simplifications: str = "",
        heap_mb: int | None = None,
        java_opts: tuple[str, ...] | list[str] | None = None,
    ) -> None:
        self.simplifications = simplifications
        self.java_opts = heap_opts(heap_mb, java_opts)
        self.jvm = SimulatorJVM(self.java_opts)
        self._item: Item | None = None
        self._score = 0.0
        self._raw_score = 0
        self._done = False
        self._best = 0.0
        """Highest score of the episode before completion (progress counts each gain once)."""
        self._templates: list[str] | None = None
        self._task_description = ""

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Load the item's (task, variation) and look around. `seed` is accepted for the
        contract but changes nothing: a ScienceWorld variation is fully deterministic.
        A JVM that died is replaced here, so a reset recovers the env."""
        item = item_of(item_id)
        if not self.jvm.alive:
            self.jvm.close()
            self.jvm = SimulatorJVM(self.java_opts)
        self.jvm.load(item.task.name, item.variation, self.simplifications)
        self._item, self._score, self._raw_score, self._done = item, 0.0, 0, False
        self._best = 0.0
        self._templates = None
        self._task_description = self.jvm.task_description()
        observation = self.jvm.step("look around")
        info = self._info(success=False, task_description=self._task_description)
        return f"{self._task_description}\n{observation}", info

    def step(self, action: str) -> StepResult:
        if self._item is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            return StepResult(
                "The episode is over; reset to play again.", 0.0, True, False, self._info(self._success)
            )
        action = " ".join(str(action).split())[:MAX_ACTION_CHARS]
        observation = self.jvm.step(action)
        raw_score = int(round(100 * self.jvm.score()))
        completed = self.jvm.completed()
        failed = raw_score < 0
        # info.score is ScienceWorld's score / 100, with a failure (-100) counted as 0, and the
        # reward is its change: the rewards of an episode sum to its final score.
        score = min(1.0, max(0.0, raw_score / 100))
        reward = score - self._score
        self._score, self._raw_score = score, raw_score
        self._done = completed or failed
        rejected = observation.strip() == NO_MATCH
        # progress: the score's new highs short of completion (completing is the outcome reward)
        progress = 0.0 if self._success else max(0.0, score - self._best)
        self._best += progress
        if rejected:
            observation = f"{NO_MATCH} Valid action forms: {', '.join(self.action_templates())}."
        elif failed:
            observation += "\nThat was the wrong choice: the task has failed (score 0)."
        info = self._info(self._success, invalid_action=rejected, progress=progress)
        return StepResult(observation, reward, self._done, False, info)

    @property
    def _success(self) -> bool:
        return self._raw_score >= 100

    def _info(self, success: bool, **extra: Any) -> dict[str, Any]:
        assert self._item is not None
        return make_info(
            success,
            self._score,
            self._item.category,
            raw_score=self._raw_score,
            task_name=self._item.task.name,
            task_id=self._item.task.task_id,
            variation=self._item.variation,
            **extra,
        )

    def available_actions(self) -> list[str] | None:
        """Every valid concrete action in the current state (hundreds; ~50-100 ms to compute)."""
        if self._item is None:
            return None
        return self.jvm.valid_actions()

    def action_templates(self) -> list[str]:
        """The action forms, e.g. `open OBJ`, `move OBJ to OBJ` (cached per episode)."""
        if self._templates is None:
            self._templates = self.jvm.action_templates()
        return list(self._templates)

    def task_description(self) -> str:
        return self._task_description

    def close(self) -> None:
        self.jvm.close()
