"""The rollout phase split over the learner's ranks (`resources.learner_world_size > 1`).

Decision: every rank plays a share of the step's groups (round-robin over the groups in plan
order) with its own whole copy of the weights, then the ranks exchange their trajectories
(`all_gather_object`), so every rank holds the same list in plan order. Why not rank 0 alone:
with the `hf` backend generation is most of a step, and W ranks generate W times as many
tokens per second as rank 0 alone; the other ranks would idle meanwhile. Everything after the
rollout (selection, padding, advantages) is deterministic, so all ranks build the same batch
(the learner checks it), and rank 0 alone writes metrics, trajectories and reports.

Under FSDP2 the whole copy is `Learner.sampler`, refreshed from the shards before each call (a
collective); under DDP it is the rank's own module. A resumed run at the same world size samples
what the uninterrupted run sampled; at another world size the groups fall on other ranks, so the
samples differ (each engine seeds its sampling per step).
"""

from __future__ import annotations

from collections.abc import Callable

from horizonrl.distributed.parallel import SingleProcess
from horizonrl.rollout.trajectory import Trajectory
from horizonrl.trainer.episodes import Episode, Rollout


class ShardedRollout:
    def __init__(self, inner: Rollout, parallel: SingleProcess, refresh: Callable[[], None]) -> None:
        self.inner = inner
        self.parallel = parallel
        self.refresh = refresh

    def __call__(self, episodes: list[Episode], *, step: int, greedy: bool = False) -> list[Trajectory]:
        self.refresh()  # every rank, also one with nothing to play: a collective under FSDP2
        w = self.parallel.world
        groups = list(dict.fromkeys(ep.group_id for ep in episodes))
        mine = {g for k, g in enumerate(groups) if k % w.size == w.rank}
        own = [ep for ep in episodes if ep.group_id in mine]
        played = self.inner(own, step=step, greedy=greedy) if own else []
        keyed = [((ep.group_id, ep.sample_index), traj) for ep, traj in zip(own, played, strict=True)]
        index = {key: traj for part in self.parallel.all_gather_object(keyed) for key, traj in part}
        return [index[(ep.group_id, ep.sample_index)] for ep in episodes]
