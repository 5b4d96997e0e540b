"""Advantage estimators: pure tensor functions, registered by name, one signature for all.

    advantages, returns = ESTIMATORS["grpo"](token_rewards, loss_mask, values, group_ids, cfg)

Shapes: `token_rewards`, `loss_mask`, `values`, `advantages`, `returns` are `(B, T)` over the
whole conversation (prompt, sampled and observation tokens); `group_ids` is `(B,)` (samples of
one item share an id). `values` is None for estimators that need no critic.

Reward placement (DESIGN.md §6): the outcome reward sits on the trajectory's last sampled
token, per-turn rewards on each turn's last sampled token, and a per-token KL penalty (if any)
on sampled tokens. A reward on a `loss_mask == 0` position would be invisible to GAE and
REINFORCE++ (the reference's defect), so every estimator rejects it with a `ValueError`.
Advantages are zero wherever `loss_mask` is 0.

Whether an estimator needs a critic is a property of its registry entry (`needs_critic`), so
the trainer never branches on a name. Step-level estimators (`gigpo`) also read the batch's
turn structure from the parameter object (`cfg.turns`, a `TurnSteps`): which turn each sampled
token belongs to and which env state that turn started from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Protocol

import torch

Tensor = torch.Tensor


class AlgorithmParams(Protocol):
    """The hyper-parameters estimators read; `horizonrl.config.AlgorithmConfig` provides them."""

    @property
    def gamma(self) -> float: ...
    @property
    def lam(self) -> float: ...
    @property
    def norm_eps(self) -> float: ...
    @property
    def grpo_norm_by_std(self) -> bool: ...
    @property
    def whiten_advantages(self) -> bool: ...
    @property
    def step_adv_weight(self) -> float: ...
    @property
    def step_gamma(self) -> float: ...


class AdvantageParams(AlgorithmParams, Protocol):
    """What every estimator gets as `cfg`: the hyper-parameters plus this batch's turn structure."""

    @property
    def turns(self) -> TurnSteps | None: ...


@dataclass(frozen=True)
class TurnSteps:
    """A batch's turn structure, read by step-level estimators; both tensors `(B, T)` long.

    `turn_index[i, t]` is the assistant turn (0, 1, ...) that sampled token t of row i belongs
    to, -1 on every other position. `state_ids[i, t]` identifies the env state that token's turn
    started from (`info["state_key"]`): equal ids are equal states, -1 means the family reported
    no state. Built from trajectories by `horizonrl.trainer.batch.turn_steps`.
    """

    turn_index: Tensor
    state_ids: Tensor


@dataclass(frozen=True)
class EstimatorParams:
    """The parameter object estimators get: `AlgorithmConfig`'s fields plus `turns`. Build it
    with `EstimatorParams.of(cfg, turns)`; the defaults serve tests and notebooks."""

    gamma: float = 1.0
    lam: float = 1.0
    norm_eps: float = 1e-6
    grpo_norm_by_std: bool = True
    whiten_advantages: bool = True
    step_adv_weight: float = 1.0
    step_gamma: float = 0.95
    turns: TurnSteps | None = None

    @classmethod
    def of(cls, cfg: AlgorithmParams, turns: TurnSteps | None = None) -> EstimatorParams:
        """`cfg`'s hyper-parameters (e.g. an `AlgorithmConfig`) with this batch's `turns`."""
        names = [f.name for f in fields(cls) if f.name != "turns"]
        return cls(**{name: getattr(cfg, name) for name in names}, turns=turns)


def check_reward_placement(token_rewards: Tensor, loss_mask: Tensor) -> None:
    """Raise if any reward sits on a non-sampled token (where estimators would never see it)."""
    stray = (token_rewards != 0) & (loss_mask == 0)
    if bool(stray.any()):
        rows, cols = stray.nonzero(as_tuple=True)
        raise ValueError(
            f"reward on a non-sampled token (row {int(rows[0])}, position {int(cols[0])}): rewards must sit "
            "on sampled tokens (loss_mask == 1), e.g. the last sampled token of the trajectory"
        )


def masked_whiten(x: Tensor, loss_mask: Tensor, eps: float) -> Tensor:
    """`(x - mean) / (std + eps)` with mean and std over `loss_mask == 1` positions; 0 elsewhere."""
    m = loss_mask.to(x.dtype)
    n = m.sum().clamp(min=1.0)
    mean = (x * m).sum() / n
    var = (((x - mean) * m) ** 2).sum() / n
    return (x - mean) / (var.sqrt() + eps) * m


def _discounted_over_sampled(
    token_rewards: Tensor, loss_mask: Tensor, values: Tensor, gamma: float, lam: float
) -> Tensor:
    """GAE recursion that walks only sampled tokens: positions with `loss_mask == 0` are skipped.

    Vectorised over the batch, looping over T backwards. For a sampled token t whose next
    sampled token is t' (or none: end of episode, value 0):
        delta_t = r_t + gamma * V(t') - V(t);   A_t = delta_t + gamma * lam * A_t'
    With `values = 0` and `lam = 1` this gives discounted returns over sampled tokens.
    """
    B, T = token_rewards.shape
    mask = loss_mask.bool()
    advantages = torch.zeros_like(token_rewards)
    next_value = token_rewards.new_zeros(B)  # (B,) value of the next sampled token
    next_adv = token_rewards.new_zeros(B)  # (B,)
    for t in reversed(range(T)):
        delta = token_rewards[:, t] + gamma * next_value - values[:, t]
        adv_t = delta + gamma * lam * next_adv
        m = mask[:, t]
        next_adv = torch.where(m, adv_t, next_adv)
        next_value = torch.where(m, values[:, t], next_value)
        advantages[:, t] = torch.where(m, adv_t, torch.zeros_like(adv_t))
    return advantages


def gae(
    token_rewards: Tensor, loss_mask: Tensor, values: Tensor | None, group_ids: Tensor, cfg: AdvantageParams
) -> tuple[Tensor, Tensor]:
    """Generalized Advantage Estimation over sampled tokens only (needs a critic).

    Observation and template tokens are skipped, not discounted through: the step after a
    turn's last token is the next turn's first sampled token. `returns = A + V` (the critic's
    target, unwhitened); advantages are whitened over the batch's sampled tokens when
    `cfg.whiten_advantages`. Values at `loss_mask == 0` positions never matter.
    Schulman et al. 2015, https://arxiv.org/abs/1506.02438
    """
    if values is None:
        raise ValueError("gae needs critic values; got values=None")
    check_reward_placement(token_rewards, loss_mask)
    m = loss_mask.to(token_rewards.dtype)
    values = values.to(token_rewards.dtype) * m  # values off the sampled tokens are never read
    raw = _discounted_over_sampled(token_rewards, loss_mask, values, cfg.gamma, cfg.lam)
    returns = (raw + values) * m
    advantages = masked_whiten(raw, loss_mask, cfg.norm_eps) if cfg.whiten_advantages else raw
    return advantages, returns


def _sequence_scores(token_rewards: Tensor, loss_mask: Tensor) -> Tensor:
    return (token_rewards * loss_mask.to(token_rewards.dtype)).sum(dim=-1)  # (B,)


def _group_stats(scores: Tensor, group_ids: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per-row group sum, group size and unbiased group std (std 1 for groups of one)."""
    _, inverse = torch.unique(group_ids, return_inverse=True)
    G = int(inverse.max()) + 1 if inverse.numel() else 0
    sums = scores.new_zeros(G).index_add_(0, inverse, scores)
    counts = scores.new_zeros(G).index_add_(0, inverse, torch.ones_like(scores))
    means = sums / counts
    sq = scores.new_zeros(G).index_add_(0, inverse, (scores - means[inverse]) ** 2)
    std = torch.where(counts > 1, (sq / (counts - 1).clamp(min=1)).sqrt(), torch.ones_like(counts))
    return sums[inverse], counts[inverse], std[inverse]


def grpo(
    token_rewards: Tensor, loss_mask: Tensor, values: Tensor | None, group_ids: Tensor, cfg: AdvantageParams
) -> tuple[Tensor, Tensor]:
    """GRPO: each trajectory's total reward, normalized within its group, on every sampled token.

        s_i = sum_t r_{i,t};   A_i = (s_i - mean_g(s)) / (std_g(s) + eps)

    (std is the unbiased group std; divide by it only when `cfg.grpo_norm_by_std`). A group of
    one gets advantage 0. Advantages of a group sum to zero. Returns equal advantages.
    Shao et al. 2024 (DeepSeekMath), https://arxiv.org/abs/2402.03300
    """
    check_reward_placement(token_rewards, loss_mask)
    scores = _sequence_scores(token_rewards, loss_mask)
    sums, counts, std = _group_stats(scores, group_ids)
    adv = scores - sums / counts
    if cfg.grpo_norm_by_std:
        adv = adv / (std + cfg.norm_eps)
    advantages = adv[:, None] * loss_mask.to(token_rewards.dtype)
    return advantages, advantages.clone()


def rloo(
    token_rewards: Tensor, loss_mask: Tensor, values: Tensor | None, group_ids: Tensor, cfg: AdvantageParams
) -> tuple[Tensor, Tensor]:
    """RLOO: each trajectory's total reward minus the mean of the other samples of its item.

        A_i = s_i - (sum_g(s) - s_i) / (n_g - 1)

    A group of one has no other sample and gets advantage 0 (no baseline, no signal). A
    group's advantages sum to zero. Returns equal advantages.
    Ahmadian et al. 2024, https://arxiv.org/abs/2402.14740
    """
    check_reward_placement(token_rewards, loss_mask)
    scores = _sequence_scores(token_rewards, loss_mask)
    sums, counts, _ = _group_stats(scores, group_ids)
    baseline = (sums - scores) / (counts - 1).clamp(min=1)
    adv = torch.where(counts > 1, scores - baseline, torch.zeros_like(scores))
    advantages = adv[:, None] * loss_mask.to(token_rewards.dtype)
    return advantages, advantages.clone()


def reinforce_pp(
    token_rewards: Tensor, loss_mask: Tensor, values: Tensor | None, group_ids: Tensor, cfg: AdvantageParams
) -> tuple[Tensor, Tensor]:
    """REINFORCE++: gamma-discounted returns over sampled tokens, whitened over the batch.

        G_t = r_t + gamma * G_t'  (t' = next sampled token; observation tokens skipped)
        A_t = (G_t - mean(G)) / (std(G) + eps), mean/std over all sampled tokens of the batch

    Returns are the unwhitened G. Hu 2025, https://arxiv.org/abs/2501.03262
    """
    check_reward_placement(token_rewards, loss_mask)
    zeros = torch.zeros_like(token_rewards)
    returns = _discounted_over_sampled(token_rewards, loss_mask, zeros, cfg.gamma, 1.0)
    return masked_whiten(returns, loss_mask, cfg.norm_eps), returns


def _turn_returns(token_rewards: Tensor, loss_mask: Tensor, turns: TurnSteps, gamma: float) -> Tensor:
    """`G (B, K)`: each turn's reward-to-go over turns, `G_k = R_k + gamma * G_{k+1}`, where `R_k`
    sums the rewards on turn k's sampled tokens (K = the batch's most turns; 0 past a row's end)."""
    index = torch.where(loss_mask.bool(), turns.turn_index, torch.full_like(turns.turn_index, -1))
    K = int(index.max()) + 1 if index.numel() else 0
    B = token_rewards.shape[0]
    on_turn = index >= 0
    R = token_rewards.new_zeros(B, K + 1)  # column K collects the tokens of no turn (dropped)
    R.scatter_add_(1, torch.where(on_turn, index, K), token_rewards * on_turn.to(token_rewards.dtype))
    G = token_rewards.new_zeros(B, K + 1)
    for k in reversed(range(K)):
        G[:, k] = R[:, k] + gamma * G[:, k + 1]
    return G[:, :K]


def gigpo(
    token_rewards: Tensor, loss_mask: Tensor, values: Tensor | None, group_ids: Tensor, cfg: AdvantageParams
) -> tuple[Tensor, Tensor]:
    """GiGPO: GRPO's episode advantage plus a step-level relative advantage per turn (anchor states).

        A_{i,t} = A^E_i + w * A^S_{i,k(t)}            (t a sampled token of turn k(t) of row i)
        A^E_i   = GRPO's advantage of trajectory i (its total reward against its group's)
        G_{i,k} = sum_{j >= k} step_gamma^(j-k) * R_{i,j}   (R_{i,j}: rewards on turn j's tokens)
        A^S_{i,k} = (G_{i,k} - mean_S(G)) / (std_S(G) + eps)   over the step group S of (i, k)

    A step group is every turn, of every trajectory of one GRPO group (`group_ids`), that started
    from the same env state (`cfg.turns.state_ids`, the families' `info["state_key"]`); a state
    revisited within one trajectory puts both visits in the group, and the discount then favours
    the visit closer to the reward, as in the paper. `w` is `cfg.step_adv_weight`; std is the
    unbiased step-group std, divided by only when `cfg.grpo_norm_by_std` (else mean-centred only).
    A singleton step group, and a turn whose state is unknown (-1), get A^S = 0; step advantages
    of each step group sum to zero. Returns equal advantages (no critic).

    Shapes: `token_rewards`, `loss_mask` `(B, T)`, `group_ids` `(B,)`, `cfg.turns` two `(B, T)`
    tensors; `G` and `A^S` are `(B, K)` with K the batch's most turns. Simplifications against
    the paper: anchor states are the families' compact state keys, not raw observations; the step
    return discounts per turn (`step_gamma`, the paper's 0.95) while the episode advantage is
    undiscounted; rewards on sampled tokens outside any turn count for A^E only.
    Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training",
    https://arxiv.org/abs/2505.10978
    """
    check_reward_placement(token_rewards, loss_mask)
    turns = cfg.turns
    if turns is None:
        raise ValueError("gigpo needs the batch's turn structure: pass cfg.turns (a TurnSteps)")
    if turns.turn_index.shape != loss_mask.shape or turns.state_ids.shape != loss_mask.shape:
        raise ValueError(
            f"cfg.turns tensors must be shaped like loss_mask {tuple(loss_mask.shape)}, got "
            f"{tuple(turns.turn_index.shape)} and {tuple(turns.state_ids.shape)}"
        )
    episode, _ = grpo(token_rewards, loss_mask, values, group_ids, cfg)
    G = _turn_returns(token_rewards, loss_mask, turns, cfg.step_gamma)  # (B, K)
    B, K = G.shape
    on_turn = loss_mask.bool() & (turns.turn_index >= 0)
    index = torch.where(on_turn, turns.turn_index, torch.zeros_like(turns.turn_index))
    state = turns.state_ids.new_full((B, K), -1).scatter_reduce_(
        1, index, torch.where(on_turn, turns.state_ids, -1), "amax"
    )  # (B, K) start state of each turn, -1 for none
    known = state >= 0
    _, group = torch.unique(group_ids, return_inverse=True)  # (B,) dense group index
    key = torch.stack([group[:, None].expand(B, K)[known], state[known]], dim=1)  # (N, 2)
    step_adv = G.new_zeros(B, K)
    if key.numel():
        _, step_group = torch.unique(key, dim=0, return_inverse=True)  # (N,)
        sums, counts, std = _group_stats(G[known], step_group)
        adv = G[known] - sums / counts
        if cfg.grpo_norm_by_std:
            adv = adv / (std + cfg.norm_eps)
        step_adv[known] = torch.where(counts > 1, adv, torch.zeros_like(adv))
    per_token = torch.where(on_turn, step_adv.gather(1, index), torch.zeros_like(token_rewards))
    advantages = episode + cfg.step_adv_weight * per_token
    return advantages, advantages.clone()


EstimatorFn = Callable[[Tensor, Tensor, "Tensor | None", Tensor, AdvantageParams], tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class Estimator:
    """A registry entry: the function plus the facts the trainer needs about it."""

    fn: EstimatorFn
    needs_critic: bool = False
    """The trainer builds and trains a value model only for estimators that read `values`."""
    group_relative: bool = False
    """Advantages compare samples of one item, so a group whose rewards are all equal has all-0
    advantages (what `algorithm.filter_groups` drops)."""
    step_level: bool = False
    """Advantages also compare turns that started from the same env state (`cfg.turns`), so a
    group whose episode rewards are all equal may still carry signal; `filter_groups` keeps it
    when its step groups' returns differ."""

    def __call__(
        self,
        token_rewards: Tensor,
        loss_mask: Tensor,
        values: Tensor | None,
        group_ids: Tensor,
        cfg: AdvantageParams,
    ) -> tuple[Tensor, Tensor]:
        return self.fn(token_rewards, loss_mask, values, group_ids, cfg)


ESTIMATORS: dict[str, Estimator] = {
    "gae": Estimator(gae, needs_critic=True),
    "grpo": Estimator(grpo, group_relative=True),
    "rloo": Estimator(rloo, group_relative=True),
    "reinforce_pp": Estimator(reinforce_pp),
    "gigpo": Estimator(gigpo, group_relative=True, step_level=True),
}


def get_estimator(name: str) -> Estimator:
    """The registered estimator `name`; an unknown name raises a KeyError naming the valid ones."""
    if name not in ESTIMATORS:
        raise KeyError(f"unknown advantage estimator {name!r}; valid: {', '.join(ESTIMATORS)}")
    return ESTIMATORS[name]


def bootstrap_truncated(
    token_rewards: Tensor, loss_mask: Tensor, truncated: Tensor, bootstrap_values: Tensor, *, gamma: float
) -> Tensor:
    """Bootstrap episodes cut by a cap: add `gamma * V(s_cut)` to each truncated row's last sampled
    token's reward. `(B, T), (B, T), (B,) bool, (B,) -> (B, T)`.

    GAE's last delta is `r_L + gamma * V_next - V_L` with `V_next = 0` at a terminal state; at a
    cut the episode would have gone on, so `V_next` is the critic's value of the state after the
    last token (`bootstrap_values`). Adding `gamma * V(s_cut)` to `r_L` gives exactly that delta
    (and the critic's target `R_L = r_L + gamma * V(s_cut)`), so every estimator stays one pure
    function of rewards and values. Rows without a sampled token are left alone.
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", https://arxiv.org/abs/1712.00378
    """
    B, T = loss_mask.shape
    positions = torch.arange(T, device=loss_mask.device).expand(B, T)
    last = torch.where(loss_mask.bool(), positions, torch.full_like(positions, -1)).max(dim=-1).values
    rows = torch.nonzero(truncated.bool() & (last >= 0), as_tuple=True)[0]
    out = token_rewards.clone()
    out[rows, last[rows]] += gamma * bootstrap_values.to(out.dtype)[rows]
    return out


def place_rewards(
    loss_mask: Tensor,
    outcome: Tensor,
    turn_ends: list[list[int]] | None = None,
    turn_rewards: list[list[float]] | None = None,
) -> Tensor:
    """Build `token_rewards (B, T)`: `outcome (B,)` on each row's last sampled token, and
    `turn_rewards[i][k]` on `turn_ends[i][k]` (each turn's last sampled token) when given.

    Rows without any sampled token get no reward (they contribute nothing to any estimator).
    """
    B, T = loss_mask.shape
    rewards = torch.zeros(B, T, dtype=torch.float32)
    positions = torch.arange(T).expand(B, T)
    last = torch.where(loss_mask.bool(), positions, torch.full_like(positions, -1)).max(dim=-1).values
    has = last >= 0
    rows = torch.arange(B)[has]
    rewards[rows, last[has]] += outcome.to(torch.float32)[has]
    if turn_ends is not None and turn_rewards is not None:
        for i, (ends, values) in enumerate(zip(turn_ends, turn_rewards, strict=False)):
            for pos, value in zip(ends, values, strict=False):
                if not value:
                    continue
                if not (0 <= pos < T and loss_mask[i, pos]):
                    raise ValueError(f"row {i}: turn end {pos} is not a sampled token; cannot place reward")
                rewards[i, pos] += float(value)
    return rewards
