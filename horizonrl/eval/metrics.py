"""Aggregate trajectories into success / score figures, overall and per category."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from horizonrl.rollout.trajectory import Trajectory


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def success_summary(trajectories: Sequence[Trajectory], categories: Sequence[str] = ()) -> dict[str, Any]:
    """`{"n", "success_rate", "mean_score", "by_category": {cat: {"n", "success_rate", "mean_score"}}}`.

    Categories listed in `categories` appear even when no trajectory has them (n = 0), so
    reports keep one row per sub-task; a failed (env-broken) trajectory counts as unsolved.
    """
    by_cat: dict[str, list[Trajectory]] = defaultdict(list)
    for traj in trajectories:
        by_cat[traj.category].append(traj)
    order = list(dict.fromkeys([*categories, *sorted(by_cat)]))

    def block(trajs: Sequence[Trajectory]) -> dict[str, Any]:
        return {
            "n": len(trajs),
            "success_rate": _mean([float(t.success) for t in trajs]),
            "mean_score": _mean([t.score for t in trajs]),
        }

    return {**block(trajectories), "by_category": {cat: block(by_cat.get(cat, [])) for cat in order}}
