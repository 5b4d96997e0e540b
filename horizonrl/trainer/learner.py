"""The learner: actor (+ optional critic and frozen reference), their forward passes and the update.

- actor: the causal LM being trained (all weights, or LoRA adapters via `peft`); on CPU the
  rollout's `hf` backend samples from this very module, so updated weights are used at once.
- reference: a frozen copy of the initial actor for the KL term (and DPO); under LoRA the base
  weights with adapters disabled (no copy); none when `algorithm.kl_coef` is 0 (RL) or for
  SFT / AgentEvol.
- critic: for estimators whose registry entry says `needs_critic` (gae), the same architecture
  with a scalar head per token (`AutoModelForTokenClassification`, `num_labels=1`), initialised
  from the actor's backbone.

Training runs in fp32 master weights with bf16 autocast where supported and gradient
checkpointing; each optimizer step accumulates gradients over the micro-batches of one
mini-batch, weighted so the loss equals the mini-batch loss under the chosen aggregation (the
update's loop lives in `horizonrl.trainer.ppo_update`; this module builds the models and runs
their forward passes).

Which distribution each RL logprob is under (T = `cfg.logprob_temperature`, by default the
rollout's sampling temperature; top-k/top-p never applied):

    rollout_logprobs  pi_behaviour(a|s) = softmax(logits_beh / T)   the rollout backend, as sampled:
                                                                    the weights of the trajectory's
                                                                    `policy_version` (the last update's
                                                                    unless rollout.max_staleness > 0)
    old_logprobs      pi_old(a|s)       = softmax(logits_old / T)   this learner, weights before the
                                                                    update, learner precision (or the
                                                                    rollout's when not recomputed)
    logprobs          pi_theta(a|s)     = softmax(logits / T)       this learner, with grad
    ref_logprobs      pi_ref(a|s)       = softmax(logits_ref / T)   the frozen initial weights

    ratio = pi_theta / pi_old  (exactly 1 on the first pass: same weights, shapes and precision)
    with rollout.max_staleness > 0 each advantage is also weighted by min(pi_old / pi_behaviour,
    algorithm.behaviour_is_cap): decoupled PPO, pi_old being the proximal policy
    KL    = estimate of KL(pi_theta || pi_ref) per sampled token

`score` runs the same micro-batches (rows sorted by length, `trainer.micro_batch_size` each) as
the update's first pass, so the recomputed `old_logprobs` are bitwise what that pass computes.
Non-finite gradients are never applied: the optimizer step is skipped and counted.

Under torchrun (`parallel` a `horizonrl.distributed.parallel.DataParallel`) the models are wrapped
(DDP or FSDP2), every rank scores and trains on its token-balanced share of each mini-batch in
lock-step, the shares' results are summed over ranks, and each rank's loss is scaled so that the
averaged gradient is the one-process gradient of the same batch (the math is in that module).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

from horizonrl.algos.advantages import get_estimator
from horizonrl.algos.losses import (
    PolicyLossParams,
    entropy_from_logits,
    get_policy_loss,
    logprobs_from_logits,
)
from horizonrl.config import Config
from horizonrl.distributed.parallel import SingleProcess
from horizonrl.models import load_model
from horizonrl.trainer.batch import Batch, micro_batches
from horizonrl.trainer.ppo_update import ppo_update
from horizonrl.trainer.workflows import get_workflow

Tensor = torch.Tensor


def _lr_lambda(warmup: int, total: int, kind: str) -> Any:
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if kind == "cosine":
            progress = (step - warmup) / max(1, total - warmup)
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    return factor


def _enable_checkpointing(model: Any) -> None:
    """Activation (gradient) checkpointing, under the name this transformers version uses."""
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x
        model.activation_checkpointing_enable({"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def _wrap_lora(model: Any, lora: Any) -> Any:
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def _build_critic(actor: Any, seed: int) -> Any:
    from transformers import AutoModelForTokenClassification

    config = copy.deepcopy(actor.config)
    config.num_labels = 1
    config.classifier_dropout = 0.0  # transformers' default 0.1 made values (GAE, value clip) random
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        critic = AutoModelForTokenClassification.from_config(config)
    critic.base_model.load_state_dict(actor.base_model.state_dict())
    return critic


class Learner:
    """Holds the models and optimizers; `score` fills old/ref logprobs and values, `update` trains."""

    def __init__(self, cfg: Config, device: torch.device, parallel: SingleProcess | None = None) -> None:
        self.cfg = cfg
        self.parallel = parallel or SingleProcess()
        self.device = device
        self.estimator = get_estimator(cfg.algorithm.estimator)
        self.policy_loss = get_policy_loss(cfg.algorithm.policy_loss)
        a = cfg.algorithm
        self.policy_loss_params = PolicyLossParams(
            clip_low=a.clip_ratio_low, clip_high=a.clip_ratio_high, dual_clip=a.dual_clip, agg=a.loss_agg
        )
        actor, self.tokenizer = load_model(cfg.model.path, seed=cfg.trainer.seed)
        self.critic = (
            _build_critic(actor, cfg.trainer.seed).to(device) if self.estimator.needs_critic else None
        )
        if cfg.model.gradient_checkpointing:
            for model in (actor, self.critic) if self.critic is not None else (actor,):
                _enable_checkpointing(model)
        actor.config.use_cache = False
        self.lora = cfg.model.lora.enabled
        self.reference: Any = None
        if self.lora:
            lora = cfg.model.lora
            with warnings.catch_warnings():  # peft reads transformers' deprecated checkpointing flag
                warnings.filterwarnings(
                    "ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning
                )
                actor = _wrap_lora(actor, lora)
        elif self._needs_reference():
            self.reference = copy.deepcopy(actor).eval().requires_grad_(False).to(device)
        actor = actor.to(device)
        self.sampler = self.parallel.sampling_copy(actor)
        """A whole copy of the weights for the rollout where the actor is sharded (FSDP2), else None."""
        self.actor = self.parallel.wrap(actor)
        if self.critic is not None:
            self.critic = self.parallel.wrap(self.critic)
        if self.reference is not None:
            self.reference = self.parallel.wrap_frozen(self.reference)
        t = cfg.trainer
        params = [p for p in self.actor.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=t.lr, weight_decay=t.weight_decay, eps=t.adam_eps)
        lam = _lr_lambda(t.warmup_steps, t.total_steps, t.lr_schedule)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lam)
        self.critic_optimizer: Any = None
        self.critic_scheduler: Any = None
        if self.critic is not None:
            critic_params = self.critic.parameters()
            self.critic_optimizer = torch.optim.AdamW(critic_params, lr=t.critic_lr, eps=t.adam_eps)
            self.critic_scheduler = torch.optim.lr_scheduler.LambdaLR(self.critic_optimizer, lam)
        self.autocast = cfg.model.bf16 and (device.type == "cpu" or torch.cuda.is_bf16_supported())
        self.logprob_temperature = cfg.logprob_temperature
        """T of every RL logprob and entropy (`softmax(logits / T)`); SFT and DPO use 1."""

    # --- checkpoint plumbing -------------------------------------------------------------
    def models(self) -> dict[str, Any]:
        return {"model": self.actor, **({"critic": self.critic} if self.critic is not None else {})}

    def optimizers(self) -> dict[str, Any]:
        out = {"optimizer": self.optimizer, "lr_scheduler": self.lr_scheduler}
        if self.critic is not None:
            out |= {"critic_optimizer": self.critic_optimizer, "critic_scheduler": self.critic_scheduler}
        return out

    def sampling_model(self) -> Any:
        """The module the rollout samples from (the actor itself in one process, never a wrapper)."""
        return self.sampler if self.sampler is not None else self.parallel.unwrap(self.actor)

    def refresh_sampling_model(self) -> None:
        """Bring `sampling_model()` up to the actor's weights (a collective under FSDP2)."""
        self.parallel.refresh_sampling_copy(self.actor, self.sampler)

    def _micro_batches(self, batch: Batch, rows: list[int]) -> Iterator[tuple[list[int], Batch, bool]]:
        """This rank's micro-batches of `rows` as `(rows, Batch, real)`; `real` is False for a
        lock-step dummy (the shortest row, to be run with weight 0)."""
        size = self.cfg.trainer.micro_batch_size
        if not self.parallel.lockstep:
            for chunk, mb in micro_batches(batch, rows, size):
                yield chunk, mb, True
            return
        lengths = batch.lengths.tolist()
        for chunk in self.parallel.micro_batches(rows, lengths, size):
            if chunk:
                yield chunk, batch.select(chunk), True
            else:
                yield [], batch.select([min(rows, key=lambda r: lengths[r])]), False

    @contextmanager
    def _grad_sync(self, sync: bool) -> Iterator[None]:
        critic = self.parallel.grad_sync(self.critic, sync) if self.critic is not None else nullcontext()
        with self.parallel.grad_sync(self.actor, sync), critic:
            yield

    # --- forward passes ------------------------------------------------------------------
    def _amp(self) -> Any:
        if not self.autocast:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    @contextmanager
    def _reference_weights(self) -> Iterator[Any]:
        if self.lora:
            with self.actor.disable_adapter():
                yield self.actor
        else:
            yield self.reference

    def token_logprobs(
        self, model: Any, mb: Batch, *, entropy: bool, temperature: float = 1.0, entropy_grad: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """Logprob (and entropy) of each token given the ones before it under
        `softmax(logits / temperature)`: `(b, L)`, 0 at position 0. `entropy_grad=False` computes
        the entropy outside the graph (for logging, when no loss term weighs it): no backward over
        the vocabulary for a term whose gradient would be zero.

        Only positions from the shortest prompt on go through the LM head: prompt tokens never
        carry loss, and the head over a ~50k vocabulary is a large share of a small model's work.
        """
        ids = mb.input_ids.to(self.device)
        start = max(int(mb.prompt_lengths.min()) - 1, 0)
        width = ids.shape[1]
        with self._amp():
            out = model(
                input_ids=ids,
                attention_mask=mb.attention_mask.to(self.device),
                use_cache=False,
                logits_to_keep=width - start,
            )
        logits = out.logits[:, :-1]  # (b, L - start - 1, V) predicts tokens start+1 .. L-1
        logprobs = torch.zeros(ids.shape, dtype=torch.float32, device=self.device)
        block = self.cfg.trainer.logprob_block
        logprobs[:, start + 1 :] = logprobs_from_logits(logits, ids[:, start + 1 :], temperature, block)
        ent = None
        if entropy:
            ent = torch.zeros_like(logprobs)
            with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
                ent[:, start + 1 :] = entropy_from_logits(logits, temperature, block)
        return logprobs, ent

    def token_values(self, mb: Batch) -> tuple[Tensor, Tensor]:
        """Critic value of the state before each token, `(b, L)` (value at t read at position t-1),
        and of the state after the last token, `(b,)` (a truncated episode's bootstrap value)."""
        assert self.critic is not None
        with self._amp():
            out = self.critic(
                input_ids=mb.input_ids.to(self.device), attention_mask=mb.attention_mask.to(self.device)
            )
        head = out.logits[..., 0].float()  # (b, L)
        values = torch.zeros(mb.input_ids.shape, dtype=torch.float32, device=self.device)
        values[:, 1:] = head[:, :-1]
        last = (mb.lengths.to(self.device) - 1).clamp(min=0)
        final = head.gather(1, last[:, None]).squeeze(1)
        return values, final

    @torch.no_grad()
    def score(self, batch: Batch) -> Batch:
        """Fill `old_logprobs`, `ref_logprobs` and `values` (before any update) for the whole batch."""
        a = self.cfg.algorithm
        self.parallel.check_same(batch.input_ids, "the rollout batch")
        B, T = batch.input_ids.shape
        temperature = self.logprob_temperature
        old = torch.zeros(B, T) if a.recompute_old_logprobs else batch.rollout_logprobs.clone()
        ref = torch.zeros(B, T) if self._needs_reference() else None
        values = torch.zeros(B, T) if self.critic is not None else None
        final = torch.zeros(B) if self.critic is not None else None
        self.actor.eval()
        if self.critic is not None:
            self.critic.eval()
        for rows, mb, real in self._micro_batches(batch, list(range(B))):
            w = mb.input_ids.shape[1]  # a lock-step dummy (not `real`) is run, its results dropped
            if a.recompute_old_logprobs:
                lp = self.token_logprobs(self.actor, mb, entropy=False, temperature=temperature)[0]
                if real:
                    old[rows, :w] = lp.cpu()
            if ref is not None:
                with self._reference_weights() as reference:
                    lp = self.token_logprobs(reference, mb, entropy=False, temperature=temperature)[0]
                if real:
                    ref[rows, :w] = lp.cpu()
            if values is not None and final is not None:
                v, f = self.token_values(mb)
                if real:
                    values[rows, :w], final[rows] = v.cpu(), f.cpu()
        # each row was scored on exactly one rank (zeros elsewhere): the sums are the results
        reduce = self.parallel.all_reduce_sum
        old = reduce(old) if a.recompute_old_logprobs else old
        ref = None if ref is None else reduce(ref)
        values = None if values is None else reduce(values)
        final = None if final is None else reduce(final)
        mask = batch.loss_mask.float()
        return batch.with_(
            old_logprobs=old * mask,
            ref_logprobs=None if ref is None else ref * mask,
            values=None if values is None else values * mask,
            bootstrap_values=final,
        )

    def _needs_reference(self) -> bool:
        """What the workflow's registry entry says (DPO always, RL when `kl_coef > 0`, SFT never)."""
        return get_workflow(self.cfg.algorithm.name).needs_reference(self.cfg.algorithm.kl_coef)

    # --- the update ----------------------------------------------------------------------
    # --- the update (horizonrl.trainer.ppo_update) ----------------------------------------
    def update(self, batch: Batch, step: int) -> dict[str, float]:
        """PPO epochs over the batch; returns mean statistics (losses, kl, entropy, clip, grad norm)."""
        return ppo_update(self, batch, step)

    def skip_update(self) -> None:
        """A step with nothing to train on: no optimizer step, but the LR schedule advances so
        the learning rate stays a function of the step."""
        self._step_schedulers()

    def _step_schedulers(self) -> None:
        """Advance the LR schedules once per training step, whether or not an optimizer step was
        taken (skipped and non-finite steps count), so the learning rate is a function of the step."""
        with warnings.catch_warnings():  # torch warns when no optimizer step came first
            warnings.filterwarnings("ignore", message=".*lr_scheduler.step.*", category=UserWarning)
            self.lr_scheduler.step()
            if self.critic_scheduler is not None:
                self.critic_scheduler.step()
