"""The rollout phase of `RLTrainer.fit`: which weights each step's trajectories are sampled with.

    producer = RolloutProducer(cfg, rollout, plan, learner.sampling_model(), tokenizer, env_urls)
    cap, episodes, trajectories, stats = producer.take(step)      # once per step, in order

`plan(step)` gives the step's turn cap and episodes (the trainer's schedule and data cursor; it is
always called on the trainer's thread). Every trajectory gets `policy_version`: the number of
training steps whose update its sampling weights include.

- `rollout.max_staleness: 0` (default): `take(s)` plans step s and plays it at once with the
  trainer's rollout (the learner's own weights, synced in the step's `weight_sync` phase): the
  synchronous loop, `policy_version = s`, no extra metric.
- `rollout.max_staleness: k > 0`: one background thread plays the steps' rollouts in order on a
  **separate copy of the actor** (the `hf` backend's learner and rollout otherwise share one
  module, which the update changes under a running rollout). `take(s)` runs between updates, so
  it can publish a snapshot of the learner's weights as version s (a clone of the parameters),
  plan and queue the steps up to `s + k`, and wait for step s. The thread loads the newest
  snapshot into its copy before each rollout (the copy's own `rollout.dtype` sampler is then
  refreshed from it as usual), so step j is played with a version v, `j - k <= v <= j`: while
  step s trains, the rollouts of steps s+1..s+k run. Logged per step: `staleness/mean`,
  `staleness/max` (`s - policy_version` over the step's trajectories). The update corrects for
  the older weights with decoupled PPO (`Learner.update`, `algorithm.behaviour_is_cap`).

With k > 0 the plan of step j is made up to k steps early: the ScalingInter schedule's turn cap of
step j is decided before the successes of steps j-k..j-1 are known (a threshold schedule reacts k
steps later), and the data cursor saved in a checkpoint is past the items of the rollouts in
flight. Those rollouts are discarded on resume (never saved): the resumed run starts a fresh
producer at the checkpoint's step, with the checkpoint's weights as its first version, so the
items of the discarded steps are not replayed.

Memory with k > 0: the copy and one snapshot (two more fp32 copies of the actor's parameters),
plus the copy's own sampler in `rollout.dtype: bfloat16`.
"""

from __future__ import annotations

import copy
import queue
import threading
from collections.abc import Callable
from typing import Any

import torch

from horizonrl.config import Config
from horizonrl.rollout.trajectory import Trajectory
from horizonrl.trainer.engine_rollout import EngineRollout
from horizonrl.trainer.episodes import Episode, Rollout

Plan = Callable[[int], tuple[int, list[Episode]]]
"""`plan(step) -> (turn cap, episodes)` of one training step."""


class RolloutProducer:
    """Plays each training step's episodes with the weights `rollout.max_staleness` allows."""

    def __init__(
        self,
        cfg: Config,
        rollout: Rollout,
        plan: Plan,
        model: Any,
        tokenizer: Any,
        env_urls: dict[str, str],
        *,
        background: bool | None = None,
    ) -> None:
        """`rollout` plays the synchronous path; `model` is the learner's sampling module (copied
        for the background path). `background` defaults to `rollout.max_staleness > 0`; True with
        k = 0 runs the background machinery in lock-step with the trainer (tests)."""
        self.cfg = cfg
        self.k = cfg.rollout.max_staleness
        self.rollout = rollout
        self.plan = plan
        self.background = self.k > 0 if background is None else background
        self.planned: dict[int, tuple[int, list[Episode]]] = {}
        self.next_step: int | None = None
        """The next step to queue (the background path); None before the first `take`."""
        self._source = model
        self._thread: threading.Thread | None = None
        if self.background:
            self._model = copy.deepcopy(model).eval().requires_grad_(False)
            self._model_version = -1
            self._stale = EngineRollout(cfg, self._model, tokenizer, env_urls)
            self._snapshot: tuple[int, list[torch.Tensor]] | None = None
            self._lock = threading.Lock()
            self._jobs: queue.Queue[tuple[int, list[Episode]] | None] = queue.Queue()
            self._results: queue.Queue[tuple[int, list[Trajectory] | BaseException]] = queue.Queue()

    def take(self, step: int) -> tuple[int, list[Episode], list[Trajectory], dict[str, float]]:
        """Step `step`'s turn cap, episodes and trajectories, and its staleness metrics."""
        if not self.background:
            cap, episodes = self.plan(step)
            return cap, episodes, self.play(step, episodes), {}
        self._publish(step)
        if self.next_step is None:
            self.next_step = step
        last = min(step + self.k, self.cfg.trainer.total_steps - 1)
        while self.next_step <= last:
            j = self.next_step
            self.planned[j] = self.plan(j)
            self._jobs.put((j, self.planned[j][1]))
            self.next_step += 1
        self._start()
        done, result = self._results.get()
        if isinstance(result, BaseException):
            raise result
        if done != step:
            raise RuntimeError(f"rollout producer: got step {done}'s trajectories for step {step}")
        cap, episodes = self.planned.pop(step)
        lags = [step - (t.policy_version if t.policy_version is not None else step) for t in result]
        stats = {
            "staleness/mean": sum(lags) / max(1, len(lags)),
            "staleness/max": float(max(lags, default=0)),
        }
        return cap, episodes, result, stats

    def play(self, step: int, episodes: list[Episode]) -> list[Trajectory]:
        """Play `episodes` of step `step` now with the trainer's rollout (the learner's current
        weights): the synchronous path's rollout, and a step's further dynamic-sampling batches."""
        if self.background:
            raise RuntimeError("RolloutProducer.play runs with rollout.max_staleness: 0 only")
        trajectories = self.rollout(episodes, step=step)
        for traj in trajectories:
            traj.policy_version = step
        return trajectories

    def close(self) -> None:
        """Stop the background thread (after its queued rollouts) and free the copy's backend."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None
        if self.background:
            self._stale.close()

    # --- the background path --------------------------------------------------------------
    @torch.no_grad()
    def _publish(self, version: int) -> None:
        """A snapshot of the learner's weights as `version` (called between updates)."""
        params = [p.detach().clone() for p in self._source.parameters()]
        with self._lock:
            self._snapshot = (version, params)

    @torch.no_grad()
    def _load_newest(self) -> int:
        """Load the newest snapshot into the copy (if newer); the copy's version."""
        with self._lock:
            snapshot, self._snapshot = self._snapshot, None
        if snapshot is not None and snapshot[0] > self._model_version:
            for dst, src in zip(self._model.parameters(), snapshot[1], strict=True):
                dst.copy_(src)
            self._model_version = snapshot[0]
            self._stale.synced = False  # the copy's own sampler (bf16) refreshes from it
        return self._model_version

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="rollout-producer", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            step, episodes = job
            try:
                version = self._load_newest()
                trajectories = self._stale(episodes, step=step)
                for traj in trajectories:
                    traj.policy_version = version
                self._results.put((step, trajectories))
            except BaseException as exc:  # handed to the trainer's thread, which raises it
                self._results.put((step, exc))
                return
