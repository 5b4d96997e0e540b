"""The learner's update: PPO epochs of clipped policy loss (+ KL, entropy, value loss) over a batch.

`Learner.update` is `ppo_update(learner, batch, step)`; the seam is between what the models
compute (`horizonrl.trainer.learner`: building them, forward passes, `score`) and how they are
optimised here: shuffled mini-batches per epoch, micro-batches weighted so that the accumulated
gradient is the mini-batch loss's under `algorithm.loss_agg` (on every rank of a data-parallel
learner, with lock-step dummies of weight 0), gradient clipping, non-finite steps skipped, and
decoupled PPO's behaviour weights when `rollout.max_staleness > 0`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

import torch

from horizonrl.algos.losses import (
    PolicyLossFn,
    PolicyLossParams,
    aggregate,
    behaviour_weights,
    kl_loss,
    value_loss,
)
from horizonrl.config import Config
from horizonrl.distributed.parallel import SingleProcess
from horizonrl.trainer.batch import Batch


class Learner(Protocol):
    """What the update uses of `horizonrl.trainer.learner.Learner` (its models and forwards)."""

    cfg: Config
    parallel: SingleProcess
    device: torch.device
    actor: Any
    critic: Any
    optimizer: Any
    critic_optimizer: Any
    lr_scheduler: Any
    policy_loss: PolicyLossFn
    policy_loss_params: PolicyLossParams
    logprob_temperature: float

    def _micro_batches(self, batch: Batch, rows: list[int]) -> Iterator[tuple[list[int], Batch, bool]]: ...

    def _grad_sync(self, sync: bool) -> AbstractContextManager[None]: ...

    def _step_schedulers(self) -> None: ...

    def token_logprobs(
        self, model: Any, mb: Batch, *, entropy: bool, temperature: float = 1.0, entropy_grad: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]: ...

    def token_values(self, mb: Batch) -> tuple[torch.Tensor, torch.Tensor]: ...


def ppo_update(self: Learner, batch: Batch, step: int) -> dict[str, float]:
    """`Learner.update`: PPO epochs over the batch; returns mean statistics (losses, kl, entropy,
    clip, grad norm)."""
    a, t = self.cfg.algorithm, self.cfg.trainer
    assert batch.advantages is not None and batch.old_logprobs is not None
    behaviour: dict[str, float] = {}
    if self.cfg.rollout.max_staleness > 0:  # decoupled PPO: rollouts from older weights
        weights, w_stats = behaviour_weights(
            batch.old_logprobs, batch.rollout_logprobs, batch.loss_mask, a.behaviour_is_cap
        )
        batch = batch.with_(advantages=batch.advantages * weights)
        behaviour = {f"behaviour_is/{name}": float(value) for name, value in w_stats.items()}
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}

    def record(name: str, value: float) -> None:
        sums[name] = sums.get(name, 0.0) + value
        counts[name] = counts.get(name, 0) + 1

    token_mode = a.loss_agg == "token-mean"
    nonfinite = optimizer_steps = 0
    ratio_dev = first_dev = 0.0
    self.actor.train()
    if self.critic is not None:
        self.critic.train()
    for epoch in range(a.ppo_epochs):
        order = torch.randperm(
            batch.size, generator=torch.Generator().manual_seed(t.seed * 7919 + step * 31 + epoch)
        )
        for mini in _split(order.tolist(), t.mini_batches):
            mini_batch = batch.select(mini)
            total = _weight_base(mini_batch, token_mode)
            self.optimizer.zero_grad(set_to_none=True)
            if self.critic_optimizer is not None:
                self.critic_optimizer.zero_grad(set_to_none=True)
            objective = 0.0  # the mini-batch loss sum_m w_m L_m (this rank's terms)
            chunks = list(self._micro_batches(batch, mini))
            for k, (_, mb, real) in enumerate(chunks):
                weight = _weight_base(mb, token_mode) / total if real else 0.0
                if weight == 0 and not self.parallel.lockstep:
                    continue
                with self._grad_sync(k == len(chunks) - 1):
                    stats = micro_step(self, mb, weight * self.parallel.grad_scale)
                dev = stats.pop("ratio/max_dev")
                total_loss = stats.pop("loss/total")
                if weight == 0:  # a lock-step dummy (or a row without sampled tokens)
                    continue
                objective += weight * total_loss
                ratio_dev = max(ratio_dev, dev)
                if optimizer_steps == 0:  # before any update: pi_theta is pi_old exactly
                    first_dev = max(first_dev, dev)
                for name, value in stats.items():
                    record(name, value)
            record("loss/objective", float(self.parallel.all_reduce_sum(torch.tensor(objective))))
            params = [p for p in self.actor.parameters() if p.requires_grad]
            grad_norm = self.parallel.clip_grad_norm(params, t.max_grad_norm)
            critic_norm = None
            if self.critic is not None:
                critic_norm = self.parallel.clip_grad_norm(list(self.critic.parameters()), t.max_grad_norm)
            finite = bool(torch.isfinite(grad_norm)) and (
                critic_norm is None or bool(torch.isfinite(critic_norm))
            )
            optimizer_steps += 1
            if not finite:  # never apply NaN/inf: drop these gradients, keep the weights
                nonfinite += 1
                self.optimizer.zero_grad(set_to_none=True)
                if self.critic_optimizer is not None:
                    self.critic_optimizer.zero_grad(set_to_none=True)
                continue
            record("grad/norm", float(grad_norm))
            self.optimizer.step()
            if self.critic is not None and critic_norm is not None:
                record("grad/critic_norm", float(critic_norm))
                self.critic_optimizer.step()
    self._step_schedulers()
    self.actor.eval()
    if self.parallel.lockstep:  # statistics over every rank's micro-batches
        sums, counts, ratio_dev, first_dev = _merge_ranks(
            self.parallel.all_gather_object((sums, counts, ratio_dev, first_dev))
        )
    out = {name: sums[name] / counts[name] for name in sums}
    out["lr"] = float(self.lr_scheduler.get_last_lr()[0])
    out["update/nonfinite"] = float(nonfinite)
    out["update/nonfinite_frac"] = nonfinite / max(1, optimizer_steps)
    out["ratio/max_dev"] = ratio_dev
    out["ratio/first_pass_max_dev"] = first_dev
    return out | behaviour


def micro_step(self: Learner, mb: Batch, weight: float) -> dict[str, float]:
    """Forward + backward of one micro-batch, scaled by its share `weight` of the mini-batch."""
    a = self.cfg.algorithm
    assert mb.advantages is not None and mb.old_logprobs is not None
    mask = mb.loss_mask.to(self.device)
    logprobs, entropy = self.token_logprobs(  # the entropy is logged always, trained on when weighed
        self.actor, mb, entropy=True, temperature=self.logprob_temperature, entropy_grad=a.entropy_coef != 0
    )
    assert entropy is not None
    pg, pg_stats = self.policy_loss(
        logprobs,
        mb.old_logprobs.to(self.device),
        mb.advantages.to(self.device),
        mask,
        self.policy_loss_params,
    )
    ent = aggregate(entropy, mask, a.loss_agg)
    loss = pg - a.entropy_coef * ent
    stats = {
        "loss/policy": float(pg.detach()),
        "entropy/mean": float(ent.detach()),
        "clip/frac": float(pg_stats["clip_frac"]),
        "kl/old_approx": float(pg_stats["approx_kl"]),
        "ratio/max_dev": float(pg_stats["ratio_max_dev"]),
    }
    if mb.ref_logprobs is not None:
        kl = kl_loss(logprobs, mb.ref_logprobs.to(self.device), mask, kind=a.kl_estimator, agg=a.loss_agg)
        if not a.kl_in_reward:
            loss = loss + a.kl_coef * kl
        stats["loss/kl"] = float(kl.detach())
    (loss * weight).backward()
    stats["loss/total"] = float(loss.detach())
    if self.critic is not None:
        assert mb.values is not None and mb.returns is not None
        values, _ = self.token_values(mb)
        vl, v_stats = value_loss(
            values,
            mb.values.to(self.device),
            mb.returns.to(self.device),
            mask,
            clip_range=a.value_clip,
            agg=a.loss_agg,
        )
        (a.vf_coef * vl * weight).backward()
        stats["loss/total"] += a.vf_coef * float(vl.detach())
        stats["loss/value"] = float(vl.detach())
        stats["value/clip_frac"] = float(v_stats["clip_frac"])
    return stats


def _merge_ranks(
    parts: list[tuple[dict[str, float], dict[str, int], float, float]],
) -> tuple[dict[str, float], dict[str, int], float, float]:
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for part_sums, part_counts, _, _ in parts:
        for name, value in part_sums.items():
            sums[name] = sums.get(name, 0.0) + value
            counts[name] = counts.get(name, 0) + part_counts[name]
    return sums, counts, max(p[2] for p in parts), max(p[3] for p in parts)


def _weight_base(mb: Batch, token_mode: bool) -> float:
    """Tokens (token-mean) or rows with a sampled token (seq-mean modes) in `mb`."""
    if token_mode:
        return float(mb.loss_mask.sum())
    return float((mb.loss_mask.sum(dim=-1) > 0).sum())


def _split(rows: list[int], parts: int) -> list[list[int]]:
    parts = max(1, min(parts, len(rows)))
    size = math.ceil(len(rows) / parts)
    return [rows[i : i + size] for i in range(0, len(rows), size)]
