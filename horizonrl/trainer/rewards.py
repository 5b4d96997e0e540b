"""What a step's rewards are and which trajectories it trains on: pure functions of `Trajectory`
objects and the config, shared by `RLTrainer` (score, advantages, dynamic sampling) and the tests.

- `outcome_reward` / `turn_credits`: the reward on a trajectory's last sampled token and on each
  turn's last one (`algorithm.reward`, `shaped_weight`, `invalid_action_penalty`);
  `turn_rewards_batch` places both on a padded batch's tokens `(B, T)`;
- `trajectory_return` / `step_returns`: their episode total and each turn's reward-to-go, the
  figures GRPO's groups and gigpo's step groups (`step_groups`) compare;
- `informative_groups` / `trainable` / `select_for_update`: `algorithm.failed`, `filter_groups`
  and `dynamic_sampling_groups`.
"""

from __future__ import annotations

import torch

from horizonrl.algos.advantages import get_estimator, place_rewards
from horizonrl.config import Config
from horizonrl.rollout.trajectory import Trajectory
from horizonrl.trainer.batch import Batch


def outcome_reward(traj: Trajectory, cfg: Config) -> float:
    """The reward on a trajectory's last sampled token, per `algorithm.reward` (0 when failed)."""
    a = cfg.algorithm
    if traj.failed or a.reward == "turn":
        return 0.0
    return float(traj.success) if a.reward == "success" else traj.reward


def shaped_progress(traj: Trajectory) -> list[float]:
    """Each turn's progress (`Trajectory.turn_progress`), clipped so that an episode's sum is <= 1."""
    out, total = [], 0.0
    for p in traj.turn_progress or [0.0] * len(traj.turn_rewards):
        step = min(max(p, 0.0), 1.0 - total)
        total += step
        out.append(step)
    return out


def turn_credits(traj: Trajectory, cfg: Config) -> list[float]:
    """The reward on each turn's last sampled token (one per turn; all 0 when failed): the env's
    turn rewards (`reward: turn`) or `shaped_weight` x progress (`reward: shaped`), minus
    `invalid_action_penalty` on each invalid turn (every reward kind)."""
    a = cfg.algorithm
    n = len(traj.turn_rewards)
    if traj.failed:
        return [0.0] * n
    credits = [float(r) for r in traj.turn_rewards] if a.reward == "turn" else [0.0] * n
    if a.reward == "shaped":
        credits = [c + a.shaped_weight * p for c, p in zip(credits, shaped_progress(traj), strict=True)]
    if a.invalid_action_penalty:
        invalid = traj.turn_invalid or [False] * n
        credits = [c - a.invalid_action_penalty * bad for c, bad in zip(credits, invalid, strict=True)]
    return credits


def trajectory_return(traj: Trajectory, cfg: Config) -> float:
    """The reward total `turn_rewards_batch` places on one trajectory's tokens (0 when failed)."""
    return outcome_reward(traj, cfg) + sum(turn_credits(traj, cfg))


def step_returns(traj: Trajectory, cfg: Config) -> list[float]:
    """Each turn's discounted reward-to-go over turns (`algorithm.step_gamma`), the outcome counted
    on the last turn: the `G` that `gigpo`'s step groups compare."""
    credits = turn_credits(traj, cfg)
    if credits:
        credits[-1] += outcome_reward(traj, cfg)
    out, G = [], 0.0
    for r in reversed(credits):
        G = r + cfg.algorithm.step_gamma * G
        out.append(G)
    return out[::-1]


def step_groups(trajectories: list[Trajectory]) -> dict[tuple[int, str], list[tuple[int, int]]]:
    """`(group id, start-state key) -> [(row, turn), ...]`: the turns each step group holds."""
    groups: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for i, t in enumerate(trajectories):
        for k, state in enumerate(t.turn_states):
            if state is not None:
                groups.setdefault((t.group_id, state), []).append((i, k))
    return groups


def turn_stats(trajectories: list[Trajectory]) -> dict[str, float]:
    """`turns/invalid_frac` (share of all turns that were invalid) and `progress/mean` (mean
    clipped progress per episode that did not fail)."""
    turns = sum(len(t.turn_rewards) for t in trajectories)
    invalid = sum(sum(t.turn_invalid) for t in trajectories)
    played = [t for t in trajectories if not t.failed]
    progress = sum(sum(shaped_progress(t)) for t in played)
    return {"turns/invalid_frac": invalid / max(1, turns), "progress/mean": progress / max(1, len(played))}


def informative_groups(trajectories: list[Trajectory], cfg: Config) -> list[int]:
    """The group ids whose rewards differ (`trajectory_return`), in the order played; with a
    step-level estimator also every group one of whose step groups has unequal step returns."""
    returns: dict[int, list[float]] = {}
    for t in trajectories:
        returns.setdefault(t.group_id, []).append(trajectory_return(t, cfg))
    informative = {g for g, r in returns.items() if len(r) > 1 and max(r) - min(r) > 1e-9}
    if get_estimator(cfg.algorithm.estimator).step_level:
        G = [step_returns(t, cfg) for t in trajectories]
        for (g, _), members in step_groups(trajectories).items():
            r = [G[i][k] for i, k in members]
            if len(r) > 1 and max(r) - min(r) > 1e-9:
                informative.add(g)
    return [g for g in returns if g in informative]


def trainable(trajectories: list[Trajectory], cfg: Config) -> list[Trajectory]:
    """Never those without a sampled token (an env that failed at reset); failed ones dropped
    (`algorithm.failed: drop`) or kept and scored 0 (`zero`)."""
    drop_failed = cfg.algorithm.failed == "drop"
    return [t for t in trajectories if any(t.loss_mask) and not (t.failed and drop_failed)]


def select_for_update(
    trajectories: list[Trajectory], cfg: Config
) -> tuple[list[Trajectory], dict[str, float]]:
    """The trajectories the update trains on: the `trainable` ones; with `algorithm.filter_groups`,
    only the `informative_groups` (a group whose rewards are all equal has all-0 advantages), and
    with `algorithm.dynamic_sampling_groups` K only the first K of them. Also returns the step's
    `turn_stats` and the share of informative groups among all played."""
    a = cfg.algorithm
    stats = turn_stats(trajectories)
    kept = trainable(trajectories, cfg)
    if not a.filter_groups:
        return kept, stats
    groups = informative_groups(kept, cfg)
    stats["groups/informative_frac"] = len(groups) / max(1, len({t.group_id for t in kept}))
    chosen = set(groups[: a.dynamic_sampling_groups or None])
    return [t for t in kept if t.group_id in chosen], stats


def turn_rewards_batch(batch: Batch, trajectories: list[Trajectory], cfg: Config) -> torch.Tensor:
    """`token_rewards (B, T)` per `algorithm.reward` (see AlgorithmConfig), on sampled tokens only:
    `outcome_reward` on each row's last sampled token, `turn_credits` on each turn's last one."""
    outcome = torch.tensor([outcome_reward(t, cfg) for t in trajectories])
    ends = [t.turn_ends[: len(t.turn_rewards)] for t in trajectories]
    credits = [turn_credits(t, cfg) for t in trajectories]
    return place_rewards(batch.loss_mask, outcome, turn_ends=ends, turn_rewards=credits)
