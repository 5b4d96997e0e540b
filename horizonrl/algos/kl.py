"""KL divergence to a frozen reference policy, estimated per token from logprobs.

With `log r = ref_logprobs - logprobs` on tokens sampled from the current policy
(Schulman, "Approximating KL divergence", http://joschu.net/blog/kl-approx.html):

    k1 = -log r                      unbiased, high variance, can be negative
    k2 = (log r)^2 / 2               biased, low variance, >= 0
    k3 = (r - 1) - log r             unbiased, low variance, >= 0 ("low_var_kl" in verl)

All functions take `(B, T)` tensors and return `(B, T)`; masking and aggregation are the
caller's job (see `horizonrl.algos.losses.aggregate`). The KL enters training either as a
loss term (`algorithm.kl_in_reward: false`, the reference's setting) or as a per-token reward
penalty `r_t -= kl_coef * kl_t` before advantages are computed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Tensor = torch.Tensor

# exp() of a large log-ratio overflows k3; verl clamps the same way.
K3_CLAMP = 10.0


def k1(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """`logprobs - ref_logprobs`."""
    return logprobs - ref_logprobs


def k2(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """`0.5 * (logprobs - ref_logprobs)^2`."""
    return 0.5 * (logprobs - ref_logprobs) ** 2


def k3(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """`exp(ref - lp) - (ref - lp) - 1`, log-ratio clamped to +-10 and the result to [-10, 10]."""
    log_ratio = (ref_logprobs - logprobs).clamp(-K3_CLAMP, K3_CLAMP)
    return (torch.exp(log_ratio) - log_ratio - 1.0).clamp(-K3_CLAMP, K3_CLAMP)


KL_ESTIMATORS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"k1": k1, "k2": k2, "k3": k3}
KL_ALIASES = {"kl": "k1", "mse": "k2", "low_var_kl": "k3"}
"""Names the reference (verl) uses for the same estimators."""


def kl_estimate(logprobs: Tensor, ref_logprobs: Tensor, kind: str) -> Tensor:
    """Per-token KL estimate `(B, T)` with the estimator `kind` (k1, k2, k3 or an alias)."""
    name = KL_ALIASES.get(kind, kind)
    if name not in KL_ESTIMATORS:
        valid = ", ".join([*KL_ESTIMATORS, *KL_ALIASES])
        raise KeyError(f"unknown KL estimator {kind!r}; valid: {valid}")
    return KL_ESTIMATORS[name](logprobs, ref_logprobs)
