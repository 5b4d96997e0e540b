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


def _eval_block(trajs: Sequence[Trajectory]) -> dict[str, Any]:
    """Figures for one set of trajectories; items are grouped by `(item_id, group_id)` for @k."""
    groups: dict[tuple[str, int], list[Trajectory]] = defaultdict(list)
    for t in trajs:
        groups[(t.item_id, t.group_id)].append(t)
    per_item = [[t.success for t in g] for g in groups.values()]
    return {
        "n_items": len(groups),
        "n_trajectories": len(trajs),
        "n_failed": sum(t.failed for t in trajs),
        "success_rate": _mean([float(t.success) for t in trajs]),
        "mean_score": _mean([t.score for t in trajs]),
        "avg_at_k": _mean([_mean([float(s) for s in item]) for item in per_item]),
        "pass_at_k": _mean([float(any(item)) for item in per_item]),
        "mean_turns": _mean([float(t.num_turns) for t in trajs]),
    }


EVAL_FIELDS = ("n_items", "success_rate", "mean_score", "avg_at_k", "pass_at_k", "mean_turns")


def eval_summary(trajectories: Sequence[Trajectory], categories: Sequence[str] = ()) -> dict[str, Any]:
    """Eval figures overall and `by_category`, with k samples per item.

    - `success_rate`, `mean_score`, `mean_turns`: over all trajectories;
    - `avg_at_k`: mean over items of the fraction of its k samples that succeeded;
    - `pass_at_k`: fraction of items with at least one successful sample;
    - `n_failed`: trajectories whose env broke (they count as unsolved).

    Success is the env's `success` flag (SciWorld: score 100, never merely score > 0).
    Categories in `categories` get a row even when empty.
    """
    by_cat: dict[str, list[Trajectory]] = defaultdict(list)
    for traj in trajectories:
        by_cat[traj.category].append(traj)
    order = list(dict.fromkeys([*categories, *sorted(by_cat)]))
    return {
        **_eval_block(trajectories),
        "by_category": {cat: _eval_block(by_cat.get(cat, [])) for cat in order},
    }
