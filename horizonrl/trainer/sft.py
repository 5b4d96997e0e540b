"""`horizonrl sft CONFIG` (or `train` with `algorithm.name: sft`): supervised fine-tuning on trajectories.

    horizonrl solve textcraft --split train --out runs/demos/textcraft_train.jsonl
    horizonrl sft configs/sft.yaml data.train_files=[runs/demos/textcraft_train.jsonl]

The loss is the masked next-token NLL on the sampled (assistant) tokens of trajectory JSONL files:
expert demonstrations (`horizonrl solve`), rollout or eval trajectories, any file in that format.

Tokenization: a trajectory that carries token ids (a model rollout) is used exactly as recorded.
One that carries only `messages` (an expert demo) is laid out by the rollout's own token-exact
builder (`horizonrl.agent.chat.TokenConversation`): the prompt as the chat template renders it,
each assistant content encoded on its own and followed by the end-of-turn token (both loss 1, so
the model learns to stop), the template's closing and each observation turn as the builder appends
them during a rollout (loss 0). SFT and RL therefore see the same token streams. An assistant
message with `"weight": 0` (a demo's deliberate mistake, `horizonrl solve --detours`) stays in the
context with loss 0.

One step takes `data.batch_size` trajectories (a seeded order per epoch with a resumable cursor),
runs them in micro-batches of `trainer.micro_batch_size` rows of similar length (length
bucketing: little padding), and takes one optimizer step on the token-mean loss of the batch.
`loss/sft` and friends go to `metrics.jsonl`; checkpoints hold weights, optimizer and the data
cursor, so a resumed run equals the uninterrupted one; a greedy eval on `eval.split` ends the run.

Simplifications: no sequence packing (rows are padded, bucketed by length); conversations longer
than `sft.max_length` tokens are cut at that length.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from horizonrl.agent.chat import ChatFormat, TokenConversation
from horizonrl.config import Config
from horizonrl.rollout.trajectory import Trajectory, mask_spans, read_jsonl
from horizonrl.trainer.batch import Batch, collate, micro_batches
from horizonrl.trainer.data import ItemSampler
from horizonrl.trainer.episodes import Rollout
from horizonrl.trainer.learner import Learner
from horizonrl.trainer.memory import keep_under, release_memory
from horizonrl.trainer.monitor import PhaseTimer
from horizonrl.trainer.run import TrainingRun


def tokenize_trajectory(traj: Trajectory, fmt: ChatFormat, max_length: int | None = None) -> Trajectory:
    """`traj` with token ids, loss mask and turn ends; built from `messages` when it has no ids."""
    if not traj.token_ids:
        messages = traj.messages
        first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
        if first == 0:
            raise ValueError(f"{traj.item_id}: a conversation must open with system/user messages")
        conv = TokenConversation(fmt, messages[:first])
        for message in messages[first:]:
            if message["role"] == "assistant":
                weight = message.get("weight", 1)
                if weight not in (0, 1):
                    raise ValueError(f"{traj.item_id}: a reply's weight is 0 or 1, not {weight!r}")
                ids = fmt.encode(message["content"])
                if fmt.eot_id is not None:
                    ids.append(fmt.eot_id)
                start = len(conv.token_ids)
                conv.add_assistant(ids, [0.0] * len(ids), "stop")
                if not weight:  # in the context, not trained on
                    conv.loss_mask[start : start + len(ids)] = [0] * len(ids)
            else:
                conv.add_observation(message["content"])
        traj = Trajectory.from_dict(
            {
                **traj.to_dict(),
                "token_ids": conv.token_ids,
                "loss_mask": conv.loss_mask,
                "logprobs": conv.logprobs,
                "prompt_length": conv.prompt_length,
                "turn_ends": conv.turn_ends,
            }
        )
    if max_length is not None and len(traj.token_ids) > max_length:
        data = traj.to_dict()
        for key in ("token_ids", "loss_mask", "logprobs"):
            data[key] = data[key][:max_length]
        data["turn_ends"] = [e for e in traj.turn_ends if e < max_length]
        data["prompt_length"] = min(traj.prompt_length, max_length)
        traj = Trajectory.from_dict(data)
    return traj


def load_trajectories(files: Sequence[str | Path]) -> list[Trajectory]:
    """Every trajectory of the JSONL `files`, in order; a missing file is an error that names it."""
    out: list[Trajectory] = []
    for f in files:
        if not Path(f).exists():
            raise FileNotFoundError(
                f"trajectory file {f} not found (make demos: horizonrl solve FAMILY --out {f})"
            )
        out.extend(read_jsonl(f))
    return out


def sft_examples(
    trajectories: Sequence[Trajectory],
    fmt: ChatFormat,
    *,
    success_only: bool = True,
    categories: Sequence[str] = (),
    max_length: int | None = None,
) -> list[Trajectory]:
    """The trajectories SFT trains on: not failed, successful (if asked), of `categories`, tokenized."""
    keep = [
        t
        for t in trajectories
        if not t.failed
        and (t.success or not success_only)
        and (not categories or t.category in categories)
        and (t.token_ids or t.messages)
    ]
    examples = [tokenize_trajectory(t, fmt, max_length) for t in keep]
    return [e for e in examples if sum(e.loss_mask[1:]) > 0]


def reply_lengths(example: Trajectory) -> list[int]:
    """Tokens of each trained reply of a tokenized example (each run of loss-mask 1s: the reply
    with its end-of-turn token, as a sampler would generate it)."""
    return [end - start for start, end in mask_spans(example.loss_mask)]


def sft_step(learner: Learner, batch: Batch) -> dict[str, float]:
    """One optimizer step of token-mean masked NLL over `batch`'s sampled tokens."""
    t = learner.cfg.trainer
    actor = learner.actor
    total = float(batch.loss_mask.sum())
    actor.train()
    learner.optimizer.zero_grad(set_to_none=True)
    loss_sum = 0.0
    for _, mb in micro_batches(batch, list(range(batch.size)), t.micro_batch_size):
        mask = mb.loss_mask.to(learner.device).float()
        if not mask.any():
            continue
        logprobs, _ = learner.token_logprobs(actor, mb, entropy=False)  # (b, L)
        nll = -(logprobs * mask).sum()
        (nll / total).backward()
        loss_sum += float(nll.detach())
    params = [p for p in actor.parameters() if p.requires_grad]
    grad_norm = torch.nn.utils.clip_grad_norm_(params, t.max_grad_norm)
    learner.optimizer.step()
    learner.lr_scheduler.step()
    actor.eval()
    return {
        "loss/sft": loss_sum / max(total, 1.0),
        "grad/norm": float(grad_norm),
        "lr": float(learner.lr_scheduler.get_last_lr()[0]),
        "tokens/sampled": total,
        "tokens/total": float(batch.attention_mask.sum()),
    }


class SupervisedRun(TrainingRun):
    """What SFT and DPO share on top of `TrainingRun`: a sampler over examples and the step loop."""

    kind = "sft"
    sampler: ItemSampler | None = None
    """The step batches' cursor (SFT examples, DPO pairs), saved with every checkpoint."""

    def __init__(
        self, cfg: Config, *, rollout: Rollout | None = None, env_urls: dict[str, str] | None = None
    ) -> None:
        super().__init__(cfg, rollout=rollout, env_urls=env_urls)
        self.fmt = ChatFormat(self.learner.tokenizer)

    def trainer_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"seconds": self.trained_seconds}
        if self.sampler is not None:
            state["data"] = self.sampler.state_dict()
        return state

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        if self.sampler is not None:
            self.sampler.load_state_dict(state["data"])
        self.trained_seconds = float(state.get("seconds", 0.0))

    def time_budget(self) -> float | None:
        """The smaller of `sft.max_seconds` and `trainer.max_seconds` (None: steps only)."""
        budgets = [b for b in (self.cfg.sft.max_seconds, self.cfg.trainer.max_seconds) if b is not None]
        return min(budgets) if budgets else None

    # --- the loop ------------------------------------------------------------------------
    def fit(self) -> dict[str, float]:
        """Eval the initial model (`sft.eval_before`), `train_step()` up to `trainer.total_steps`
        (checkpoints every `trainer.save_every` and at the end) or until the steps used up
        `time_budget()`, then the final greedy eval."""
        cfg = self.cfg
        metrics: dict[str, float] = {}
        total = cfg.trainer.total_steps
        trained = self.step < total
        if self.step == 0 and cfg.sft.eval_before:
            metrics |= self.evaluate("eval/initial")
        budget = self.time_budget()
        until = f"step {total} or {budget:g} s of steps, whichever comes first" if budget else f"step {total}"
        self.say(f"{self.describe()}, from step {self.step} to {until}")
        while self.step < total and not self.out_of_time():
            timer = PhaseTimer()
            with timer("step"):
                metrics = self.train_step()
                # the next step reuses what this one freed: trim only when the held heap crept too high
                metrics |= keep_under(cfg.trainer.release_memory_above)
            self.step += 1
            seconds = timer.seconds["step"]
            self.trained_seconds += seconds
            metrics["time/step"] = seconds
            if "tokens/total" in metrics:
                metrics["throughput/tokens_per_s"] = metrics["tokens/total"] / max(seconds, 1e-9)
            self.monitor.log(self.step, metrics)
            if budget:  # the header names the step cap; the seconds are what ends such a run
                used = f"{self.trained_seconds:.0f}/{budget:g} s used"
                where, took = f"step {self.step}", f"{seconds:.1f} s, {used}"
            else:
                where, took = f"step {self.step}/{total}", f"{seconds:.1f} s"
            if "memory/rss_gb" in metrics:
                took += f" | {metrics['memory/rss_gb']:.1f} GB"
            if "memory/released_gb" in metrics:
                took += f" ({metrics['memory/released_gb']:.1f} GB handed back)"
            self.say(f"{where} | {self.step_line(metrics)} | {took}")
            if self.due(cfg.trainer.save_every) or self.step == total:
                self.save()
        self.say_out_of_time()
        release_memory()  # the steps are over: the eval's engine (or the next phase) gets the room
        if not (self.run_dir / "checkpoints" / f"step_{self.step}").exists():
            self.save()  # e.g. resumed from a checkpoint of another run: final_model_dir() must exist
        if cfg.eval.at_end and (trained or not (self.run_dir / "eval/final/report.json").exists()):
            metrics |= self.evaluate("eval/final")
        self.monitor.close()
        return metrics

    def describe(self) -> str:
        """What one step trains on, for the console."""
        raise NotImplementedError

    def train_step(self) -> dict[str, float]:
        """Draw the next batch and take one optimizer step; returns its metrics."""
        raise NotImplementedError

    def step_line(self, metrics: dict[str, float]) -> str:
        """The method's part of the per-step console line."""
        raise NotImplementedError


class SFTTrainer(SupervisedRun):
    """SFT on `examples` (tokenized trajectories) or on the files of `data.train_files`."""

    kind = "sft"
    sampler: ItemSampler

    def __init__(
        self,
        cfg: Config,
        *,
        examples: Sequence[Trajectory] | None = None,
        env_urls: dict[str, str] | None = None,
    ) -> None:
        super().__init__(cfg, env_urls=env_urls)
        if examples is None:
            s = cfg.sft
            raw = load_trajectories(cfg.data.train_files)
            examples = sft_examples(
                raw,
                self.fmt,
                success_only=s.success_only,
                categories=cfg.data.categories,
                max_length=s.max_length,
            )
            if cfg.data.max_items:
                examples = examples[: cfg.data.max_items]
        if not examples:
            raise ValueError(
                f"no SFT examples in {cfg.data.train_files} (success_only={cfg.sft.success_only})"
            )
        self.examples = list(examples)
        self.say_long_replies()
        self.batch_size = cfg.sft.batch_size or cfg.data.batch_size
        self.sampler = ItemSampler(
            [str(i) for i in range(len(self.examples))], seed=cfg.trainer.seed, shuffle=cfg.data.shuffle
        )
        self.resume()

    def say_long_replies(self) -> None:
        """Name the demo replies longer than what the rollouts and evals of this config sample
        (`rollout.max_tokens`, `eval.max_tokens`): the model learns them whole, and sampling then
        cuts them off before their action (worked-thought demos reach 68 tokens; at 48 a base
        scored 64.3% on the 70 protocol items, at 80 70.0%:
        benchmarks/results/learning_protocol_sessions.md, session 32)."""
        lengths = [n for e in self.examples for n in reply_lengths(e)]
        cfg = self.cfg
        budgets = {"rollout.max_tokens": cfg.rollout.max_tokens, "eval.max_tokens": cfg.eval.max_tokens}
        short = {k: v for k, v in budgets.items() if lengths and max(lengths) > v}
        if short:
            cut = sum(n > min(short.values()) for n in lengths)
            keys = " and ".join(f"{k}={v}" for k, v in short.items())
            self.say(
                f"{cut} of {len(lengths)} demo replies are longer than {keys} (the longest: {max(lengths)}"
                f" tokens); sampling cuts such replies off: set them to at least {max(lengths)}"
            )

    def describe(self) -> str:
        return f"{len(self.examples)} examples, {self.batch_size} per step"

    def train_step(self) -> dict[str, float]:
        rows = [self.examples[int(i)] for i in self.sampler.next_batch(self.batch_size)]
        return sft_step(self.learner, collate(rows))

    def step_line(self, metrics: dict[str, float]) -> str:
        return (
            f"loss {metrics['loss/sft']:.4f} | gnorm {metrics['grad/norm']:.2f}"
            f" | {metrics['tokens/total']:.0f} tok"
        )
