"""Policy, value, entropy and KL losses; pure tensor functions over `(B, T)` tensors.

Every loss first builds a per-token loss matrix, then reduces it with one of the
aggregation modes (`AGGREGATIONS`), over `loss_mask == 1` positions only:

    token-mean            sum(l * m) / sum(m)                       (every token weighs the same)
    seq-mean-token-sum    mean over rows of sum_t(l * m)            (Dr. GRPO style)
    seq-mean-token-mean   mean over rows of sum_t(l * m) / sum_t(m) (original GRPO)

Rows with no sampled token are left out of the seq-mean modes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F

from horizonrl.algos.kl import kl_estimate

Tensor = torch.Tensor


def _token_mean(loss: Tensor, loss_mask: Tensor) -> Tensor:
    m = loss_mask.to(loss.dtype)
    return (loss * m).sum() / m.sum().clamp(min=1.0)


def _seq_mean_token_sum(loss: Tensor, loss_mask: Tensor) -> Tensor:
    m = loss_mask.to(loss.dtype)
    rows = m.sum(dim=-1) > 0
    return (loss * m).sum(dim=-1)[rows].sum() / rows.sum().clamp(min=1)


def _seq_mean_token_mean(loss: Tensor, loss_mask: Tensor) -> Tensor:
    m = loss_mask.to(loss.dtype)
    counts = m.sum(dim=-1)
    rows = counts > 0
    per_row = (loss * m).sum(dim=-1)[rows] / counts[rows]
    return per_row.sum() / rows.sum().clamp(min=1)


AGGREGATIONS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "token-mean": _token_mean,
    "seq-mean-token-sum": _seq_mean_token_sum,
    "seq-mean-token-mean": _seq_mean_token_mean,
}


def aggregate(loss: Tensor, loss_mask: Tensor, mode: str) -> Tensor:
    """Reduce a per-token loss `(B, T)` to a scalar with aggregation `mode` (see module docstring)."""
    if mode not in AGGREGATIONS:
        raise KeyError(f"unknown loss aggregation {mode!r}; valid: {', '.join(AGGREGATIONS)}")
    return AGGREGATIONS[mode](loss, loss_mask)


def _label_logprobs(x: Tensor, labels: Tensor, temperature: float) -> Tensor:
    """The plain formula, on a whole tensor or one block: `(..., V), (...) -> (...)`, float32."""
    return F.log_softmax(x.float() / temperature, dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def _entropy(x: Tensor, temperature: float) -> Tensor:
    """The plain formula, on a whole tensor or one block: `(..., V) -> (...)`, float32."""
    logp = F.log_softmax(x.float() / temperature, dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


class _Blockwise(torch.autograd.Function):
    """`fn(logits, *row_args)` over `(B, T, V)` logits one block of `block` positions at a time,
    forward and backward, for a `fn` that works row by row (each position's output depends on that
    position's logits alone) and returns `(B, T)`: what autograd would keep for the whole tensor
    (the float32 log-softmax of every position) and the float32 gradients it would build at full
    size exist one block at a time. Only the logits are saved; the backward reruns `fn` on each
    block under autograd and takes that block's gradient. Every op autograd runs per block is the
    one it runs on the whole tensor, and each is row-wise, so values and gradients equal the whole
    tensor's bit for bit (tests/algos/test_losses.py)."""

    @staticmethod
    def forward(ctx: Any, fn: Callable[..., Tensor], block: int, logits: Tensor, *row_args: Tensor) -> Tensor:
        B, T, _ = logits.shape
        out = torch.empty(B, T, dtype=torch.float32, device=logits.device)
        with torch.no_grad():
            for b in range(B):
                for t in range(0, T, block):
                    rows = slice(t, t + block)
                    out[b, rows] = fn(logits[b, rows], *(a[b, rows] for a in row_args))
        ctx.save_for_backward(logits, *row_args)
        ctx.fn, ctx.block = fn, block
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        logits, *row_args = ctx.saved_tensors
        fn: Callable[..., Tensor] = ctx.fn
        block: int = ctx.block
        B, T, _ = logits.shape
        grad_logits = torch.empty_like(logits)
        for b in range(B):
            for t in range(0, T, block):
                rows = slice(t, t + block)
                with torch.enable_grad():
                    x = logits[b, rows].detach().requires_grad_(True)
                    y = fn(x, *(a[b, rows] for a in row_args))
                    (grad_logits[b, rows],) = torch.autograd.grad(y, x, grad[b, rows])
        return (None, None, grad_logits, *(None for _ in row_args))


def _blockwise(fn: Callable[..., Tensor], block: int, logits: Tensor, *row_args: Tensor) -> Tensor:
    """`fn(logits, *row_args)`, `block > 0` positions at a time (`_Blockwise`) for `(B, T, V)` or
    `(T, V)` logits; the whole tensor at once for `block <= 0` or other shapes."""
    if block <= 0 or logits.dim() not in (2, 3):
        return fn(logits, *row_args)
    if logits.dim() == 2:
        one = [a.unsqueeze(0) for a in row_args]
        return _blockwise(fn, block, logits.unsqueeze(0), *one).squeeze(0)
    out: Tensor = _Blockwise.apply(fn, block, logits, *row_args)
    return out


def logprobs_from_logits(logits: Tensor, labels: Tensor, temperature: float = 1.0, block: int = 0) -> Tensor:
    """`log softmax(logits / temperature)[labels]`: `(B, T, V), (B, T) -> (B, T)`, in float32.

    `temperature` names the distribution: the rollout's sampling temperature gives the logprobs of
    the policy that sampled (what PPO's ratio needs), 1.0 the raw model's. `block > 0` computes it
    `block` positions at a time, forward and backward (`_Blockwise`): with a ~50k vocabulary the
    float32 log-softmax of every position and its gradient are gigabytes a micro-batch, a block's
    are megabytes; the values and gradients are the whole tensor's."""
    return _blockwise(lambda x, y: _label_logprobs(x, y, temperature), block, logits, labels)


def entropy_from_logits(logits: Tensor, temperature: float = 1.0, block: int = 0) -> Tensor:
    """Entropy of `softmax(logits / temperature)`: `(B, T, V) -> (B, T)`, in float32; `block > 0`
    computes it (and its gradient) `block` positions at a time, as `logprobs_from_logits` does."""
    return _blockwise(lambda x: _entropy(x, temperature), block, logits)


@dataclass(frozen=True)
class PolicyLossParams:
    """The settings every policy loss receives (built once from `AlgorithmConfig`)."""

    clip_low: float = 0.2
    """Lower clip of the ratio: `1 - clip_low`."""
    clip_high: float = 0.2
    """Upper clip of the ratio: `1 + clip_high` (raise it for clip-higher)."""
    dual_clip: float | None = None
    """Dual-clip constant c > 1 for negative advantages; None disables."""
    agg: str = "token-mean"
    """Aggregation mode (`AGGREGATIONS`)."""

    def __post_init__(self) -> None:
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1, got {self.dual_clip}")
        if self.agg not in AGGREGATIONS:
            raise KeyError(f"unknown loss aggregation {self.agg!r}; valid: {', '.join(AGGREGATIONS)}")


class PolicyLossFn(Protocol):
    """One signature for every policy loss: per-token `(B, T)` tensors and the shared parameters.

    `logprobs` are the current policy's (with grad), `old_logprobs` the behaviour policy's, both
    under the same distribution (the learner's logprob temperature); returns the aggregated loss
    and detached scalar stats."""

    def __call__(
        self,
        logprobs: Tensor,
        old_logprobs: Tensor,
        advantages: Tensor,
        loss_mask: Tensor,
        params: PolicyLossParams,
    ) -> tuple[Tensor, dict[str, Tensor]]: ...


def ppo_policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    loss_mask: Tensor,
    params: PolicyLossParams,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO's clipped surrogate, with optional asymmetric clip and dual clip.

        ratio = exp(logprobs - old_logprobs)        pi_theta(a|s) / pi_old(a|s)
        l     = max(-A * ratio, -A * clip(ratio, 1 - clip_low, 1 + clip_high))
        dual clip (A < 0 only): l = min(l, -A * dual_clip)       (dual_clip > 1)

    Shapes `(B, T)`; returns the aggregated loss and stats: `clip_frac` (share of tokens
    where the clipped term is active), `approx_kl` (k1 of old vs new, token mean).
    Schulman et al. 2017, https://arxiv.org/abs/1707.06347; dual clip: Ye et al. 2020,
    https://arxiv.org/abs/1912.09729
    """
    log_ratio = (logprobs - old_logprobs).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - params.clip_low, 1.0 + params.clip_high)
    loss = torch.maximum(unclipped, clipped)
    if params.dual_clip is not None:
        loss = torch.where(advantages < 0, torch.minimum(loss, -advantages * params.dual_clip), loss)
    stats = {
        "clip_frac": _token_mean((clipped > unclipped).float(), loss_mask).detach(),
        "approx_kl": _token_mean(-log_ratio, loss_mask).detach(),
        "ratio_max_dev": ((ratio - 1.0).abs() * loss_mask).max().detach(),
    }
    return aggregate(loss, loss_mask, params.agg), stats


def behaviour_weights(
    old_logprobs: Tensor, behaviour_logprobs: Tensor, loss_mask: Tensor, cap: float
) -> tuple[Tensor, dict[str, Tensor]]:
    """Decoupled PPO's per-token weight `min(pi_old / pi_behaviour, cap)`, `(B, T)`, 0 off the mask.

    `old_logprobs` are the proximal policy's (the learner's weights at the update's start),
    `behaviour_logprobs` those of the stale weights that sampled the tokens, both under the same
    distribution. Multiplying a token's advantage by this weight and then taking `ppo_policy_loss`
    against `old_logprobs` is the decoupled objective

        l = w * max(-A * r, -A * clip(r, 1 - eps_low, 1 + eps_high)),  r = pi_theta / pi_old

    (w > 0 and detached, so it factors out of the max and the dual clip). Hilton et al. 2021,
    https://arxiv.org/abs/2110.00641; AReaL (Fu et al. 2025) masks tokens above the cap instead of
    truncating them. Stats: `mean` weight and `truncated_frac` (share of tokens at the cap).
    """
    m = loss_mask.to(old_logprobs.dtype)
    raw = torch.exp((old_logprobs - behaviour_logprobs).clamp(-20.0, 20.0))
    weights = raw.clamp(max=cap) * m
    stats = {
        "mean": _token_mean(weights, loss_mask).detach(),
        "truncated_frac": _token_mean((raw > cap).float(), loss_mask).detach(),
    }
    return weights.detach(), stats


POLICY_LOSSES: dict[str, PolicyLossFn] = {"ppo": ppo_policy_loss}
"""Policy losses by name (`algorithm.policy_loss`), all `PolicyLossFn`."""


def get_policy_loss(name: str) -> PolicyLossFn:
    if name not in POLICY_LOSSES:
        raise KeyError(f"unknown policy loss {name!r}; valid: {', '.join(POLICY_LOSSES)}")
    return POLICY_LOSSES[name]


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    loss_mask: Tensor,
    *,
    clip_range: float | None = 0.2,
    agg: str = "token-mean",
) -> tuple[Tensor, dict[str, Tensor]]:
    """Clipped value loss: `0.5 * max((V - R)^2, (clip(V, V_old +- eps) - R)^2)`, shapes `(B, T)`.

    `clip_range=None` gives the plain squared error. Stats: `clip_frac` (share of tokens where
    the clipped error is the larger one).
    """
    unclipped = (values - returns) ** 2
    if clip_range is None:
        loss, frac = unclipped, torch.zeros_like(unclipped)
    else:
        v_clipped = old_values + (values - old_values).clamp(-clip_range, clip_range)
        clipped = (v_clipped - returns) ** 2
        loss, frac = torch.maximum(unclipped, clipped), (clipped > unclipped).float()
    return 0.5 * aggregate(loss, loss_mask, agg), {"clip_frac": _token_mean(frac, loss_mask).detach()}


def entropy_bonus(entropy: Tensor, loss_mask: Tensor, *, agg: str = "token-mean") -> Tensor:
    """Aggregated entropy `(B, T) -> ()`; the trainer subtracts `entropy_coef *` this from the loss."""
    return aggregate(entropy, loss_mask, agg)


def kl_loss(
    logprobs: Tensor, ref_logprobs: Tensor, loss_mask: Tensor, *, kind: str = "k3", agg: str = "token-mean"
) -> Tensor:
    """KL to the reference policy as a loss term: `aggregate(kl_estimate(lp, ref, kind))`."""
    return aggregate(kl_estimate(logprobs, ref_logprobs, kind), loss_mask, agg)


def kl_reward_penalty(
    token_rewards: Tensor,
    logprobs: Tensor,
    ref_logprobs: Tensor,
    loss_mask: Tensor,
    *,
    coef: float,
    kind: str,
) -> tuple[Tensor, Tensor]:
    """KL as a reward penalty: `r_t - coef * kl_t` on sampled tokens; returns `(rewards, kl)`."""
    kl = kl_estimate(logprobs, ref_logprobs, kind) * loss_mask.to(logprobs.dtype)
    return token_rewards - coef * kl, kl
