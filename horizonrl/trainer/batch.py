"""Trajectories -> padded tensors, and the micro-batches the learner runs over.

All tensors are `(B, T)` over the whole conversation, right-padded to the longest row. The
attention mask comes from each row's length, never from comparing ids with the pad id
(SmolLM2's pad token is its end-of-turn token, which also appears inside conversations).

Bounded context (`agent.context`): an episode whose context dropped turns trains as one row per
context window (`horizonrl.rollout.trajectory.training_rows`), each the exact ids the model saw;
its rows share `episode_ids`. `episode_advantages` then gives a group-relative estimator (GRPO,
RLOO) one score per episode (the sum of its rows' rewards: the outcome on the episode's last
sampled token) and puts the episode's advantage on every sampled token of each of its rows.

Logprob alignment: `logprobs[:, t]` is the logprob of token `t` given tokens `< t`, so every
per-token tensor lines up with `input_ids` and `loss_mask` (position 0 is always a prompt token).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields, replace

import torch

from horizonrl.algos.advantages import AdvantageParams, Estimator, TurnSteps
from horizonrl.rollout.trajectory import Trajectory

Tensor = torch.Tensor


@dataclass
class Batch:
    input_ids: Tensor  # (B, T) long
    attention_mask: Tensor  # (B, T) long, 1 on real tokens
    loss_mask: Tensor  # (B, T) long, 1 on sampled tokens
    rollout_logprobs: Tensor  # (B, T) float, sampling logprobs (0 where loss_mask is 0)
    group_ids: Tensor  # (B,) long
    prompt_lengths: Tensor  # (B,) long
    token_rewards: Tensor | None = None  # (B, T)
    old_logprobs: Tensor | None = None  # (B, T) learner logprobs before the update
    ref_logprobs: Tensor | None = None  # (B, T) frozen reference policy
    values: Tensor | None = None  # (B, T) critic before the update
    bootstrap_values: Tensor | None = None  # (B,) critic after each row's last token
    truncated: Tensor | None = None  # (B,) bool: cut by a turn/length cap, not ended by the env
    advantages: Tensor | None = None  # (B, T)
    returns: Tensor | None = None  # (B, T)
    episode_ids: Tensor | None = None  # (B,) long: rows of one episode (bounded context) share one

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def lengths(self) -> Tensor:
        return self.attention_mask.sum(dim=-1)

    def select(self, rows: Sequence[int] | Tensor) -> Batch:
        """Rows `rows` (in that order), trimmed to their own longest length."""
        index = torch.as_tensor(rows, dtype=torch.long)
        width = int(self.lengths[index].max()) if len(index) else 0
        out: dict[str, Tensor | None] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                out[f.name] = None
            elif value.dim() == 1:
                out[f.name] = value[index]
            else:
                out[f.name] = value[index, :width]
        return Batch(**out)  # type: ignore[arg-type]

    def with_(self, **tensors: Tensor | None) -> Batch:
        return replace(self, **tensors)  # type: ignore[arg-type]


def collate(trajectories: Sequence[Trajectory]) -> Batch:
    """Pad token-level trajectories into a `Batch` (group ids renumbered densely, order kept)."""
    if not trajectories:
        raise ValueError("collate needs at least one trajectory")
    empty = [t.item_id for t in trajectories if not t.token_ids]
    if empty:
        raise ValueError(f"trajectories without token ids cannot be trained on: {empty[:3]}")
    B, T = len(trajectories), max(len(t.token_ids) for t in trajectories)
    input_ids = torch.zeros(B, T, dtype=torch.long)
    attention_mask = torch.zeros(B, T, dtype=torch.long)
    loss_mask = torch.zeros(B, T, dtype=torch.long)
    logprobs = torch.zeros(B, T, dtype=torch.float32)
    for i, traj in enumerate(trajectories):
        n = len(traj.token_ids)
        input_ids[i, :n] = torch.tensor(traj.token_ids, dtype=torch.long)
        attention_mask[i, :n] = 1
        loss_mask[i, :n] = torch.tensor(traj.loss_mask, dtype=torch.long)
        logprobs[i, :n] = torch.tensor([lp if lp is not None else 0.0 for lp in traj.logprobs])
    loss_mask[:, 0] = 0  # nothing predicts the first token
    groups = {g: k for k, g in enumerate(dict.fromkeys(t.group_id for t in trajectories))}
    episodes = {e: k for k, e in enumerate(dict.fromkeys((t.group_id, t.sample_index) for t in trajectories))}
    return Batch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        loss_mask=loss_mask,
        rollout_logprobs=logprobs,
        group_ids=torch.tensor([groups[t.group_id] for t in trajectories], dtype=torch.long),
        prompt_lengths=torch.tensor([max(t.prompt_length, 1) for t in trajectories], dtype=torch.long),
        truncated=torch.tensor([t.truncated and not t.terminated for t in trajectories], dtype=torch.bool),
        episode_ids=torch.tensor([episodes[(t.group_id, t.sample_index)] for t in trajectories]),
    )


def turn_steps(loss_mask: Tensor, trajectories: Sequence[Trajectory]) -> TurnSteps:
    """The turn structure of a collated batch (`loss_mask (B, T)`, rows in `trajectories`' order).

    A sampled token at position p belongs to turn k, the first turn with `turn_ends[k] >= p`
    (tokens after the last recorded turn belong to none: -1). Its state id numbers the turn's
    start-state key (`Trajectory.turn_states`) densely over the batch; -1 where the key is None
    or the trajectory recorded no states.
    """
    B, T = loss_mask.shape
    turn_index = torch.full((B, T), -1, dtype=torch.long)
    state_ids = torch.full((B, T), -1, dtype=torch.long)
    ids: dict[str, int] = {}
    positions = torch.arange(T)
    for i, traj in enumerate(trajectories):
        ends = torch.tensor(traj.turn_ends[: len(traj.turn_rewards)], dtype=torch.long)
        if not len(ends):
            continue
        k = torch.searchsorted(ends, positions)  # (T,) first turn whose end is >= p
        sampled = loss_mask[i].bool() & (k < len(ends))
        turn_index[i] = torch.where(sampled, k, -1)
        states = traj.turn_states or [None] * len(ends)
        per_turn = torch.tensor(
            [-1 if s is None else ids.setdefault(s, len(ids)) for s in states[: len(ends)]]
        )
        state_ids[i] = torch.where(sampled, per_turn[k.clamp(max=len(ends) - 1)], -1)
    return TurnSteps(turn_index=turn_index, state_ids=state_ids)


def is_segmented(batch: Batch) -> bool:
    """Some episode of the batch has several rows (bounded context)."""
    ids = batch.episode_ids
    return ids is not None and bool(ids.numel()) and int(ids.max()) + 1 < batch.size


def episode_advantages(
    estimator: Estimator, token_rewards: Tensor, batch: Batch, params: AdvantageParams
) -> tuple[Tensor, Tensor]:
    """A group-relative `estimator` over one score per episode, broadcast to its rows' sampled tokens."""
    if not estimator.group_relative or estimator.step_level:
        raise ValueError(
            "bounded context (agent.context) splits episodes into several rows; their advantages "
            "need an episode-level group-relative estimator (grpo, rloo), not one that reads "
            "per-token returns or per-turn states"
        )
    assert batch.episode_ids is not None
    ids, mask = batch.episode_ids, batch.loss_mask
    n = int(ids.max()) + 1
    totals = torch.zeros(n, dtype=token_rewards.dtype).index_add_(0, ids, (token_rewards * mask).sum(-1))
    groups = torch.zeros(n, dtype=torch.long).scatter_(0, ids, batch.group_ids)
    adv, ret = estimator(totals[:, None], torch.ones(n, 1, dtype=torch.long), None, groups, params)
    m = mask.to(token_rewards.dtype)
    return adv[ids, 0][:, None] * m, ret[ids, 0][:, None] * m


def micro_batches(batch: Batch, rows: Sequence[int], size: int) -> Iterator[tuple[list[int], Batch]]:
    """Split `rows` into micro-batches of `size` rows of similar length (less padding); yields
    each one's row indices into `batch` and its `Batch`."""
    ordered = sorted(rows, key=lambda r: int(batch.lengths[r]))
    for start in range(0, len(ordered), size):
        chunk = ordered[start : start + size]
        yield chunk, batch.select(chunk)
