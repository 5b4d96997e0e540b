"""`horizonrl dpo CONFIG` (or `train` with `algorithm.name: dpo`): DPO on pairs of trajectories.

    horizonrl dpo configs/dpo.yaml data.train_files=[runs/grpo/trajectories/step_1.jsonl]

Pairs (chosen, rejected) are two trajectories of the same item. They are built from trajectory
files (rollouts, evals, expert demos): per item, `dpo.pairs: success` pairs a successful with a
failed trajectory, `score` a higher-scored with a lower-scored one, at most
`dpo.max_pairs_per_item` pairs per item. A file whose lines are `{"chosen": {...}, "rejected":
{...}}` (two trajectory records) gives its pairs as they are. Trajectories with only messages are
tokenized by the rollout's token-exact builder (see `horizonrl.trainer.sft`).

Loss (Rafailov et al., 2023, "Direct Preference Optimization", arXiv:2305.18290), with the
sequence logprob log pi(y|x) summed over the assistant (loss-mask) tokens only, and pi_ref the
frozen initial model (with LoRA: the base weights, adapters off):

    r_w = beta * (log pi(y_w|x) - log pi_ref(y_w|x)),   r_l likewise for the rejected trajectory
    loss = -(1 - eps) * log sigmoid(r_w - r_l) - eps * log sigmoid(r_l - r_w)

`rewards/margin` (mean r_w - r_l) and `rewards/accuracy` (share of pairs with r_w > r_l) are logged
with `loss/dpo` to `metrics.jsonl` every step. Checkpoints and resume as for SFT.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from horizonrl.agent.chat import ChatFormat
from horizonrl.config import Config, DPOConfig
from horizonrl.rollout.trajectory import Trajectory
from horizonrl.trainer.batch import Batch, collate
from horizonrl.trainer.data import ItemSampler
from horizonrl.trainer.sft import SupervisedRun, tokenize_trajectory

Tensor = torch.Tensor
Pair = tuple[Trajectory, Trajectory]


def dpo_loss(
    policy_chosen: Tensor,
    policy_rejected: Tensor,
    ref_chosen: Tensor,
    ref_rejected: Tensor,
    *,
    beta: float,
    label_smoothing: float = 0.0,
) -> tuple[Tensor, Tensor, Tensor]:
    """Per-pair DPO loss and implicit rewards; all inputs are sequence logprobs `(P,)`.

    Returns `(loss (P,), chosen_rewards (P,), rejected_rewards (P,))`; rewards are detached.
    """
    chosen = beta * (policy_chosen - ref_chosen)
    rejected = beta * (policy_rejected - ref_rejected)
    logits = chosen - rejected
    loss = -(1 - label_smoothing) * F.logsigmoid(logits) - label_smoothing * F.logsigmoid(-logits)
    return loss, chosen.detach(), rejected.detach()


def build_pairs(trajectories: Sequence[Trajectory], cfg: DPOConfig) -> list[Pair]:
    """Pairs of one item each, per `cfg.pairs` (see module docstring), items in first-seen order."""
    by_item: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        if not t.failed and (t.token_ids or t.messages):
            by_item[t.item_id].append(t)
    pairs: list[Pair] = []
    for group in by_item.values():
        if cfg.pairs == "success":
            better = [t for t in group if t.success]
            worse = [t for t in group if not t.success]
            candidates = [(c, r) for c in better for r in worse]
        else:
            ranked = sorted(group, key=lambda t: -t.score)
            candidates = [(a, b) for i, a in enumerate(ranked) for b in ranked[i + 1 :] if a.score > b.score]
        # spread over distinct trajectories first: (c0, r0), (c1, r1), ... before reusing one
        candidates.sort(key=lambda p: (max(group.index(p[0]), group.index(p[1])), group.index(p[0])))
        pairs.extend(candidates[: cfg.max_pairs_per_item])
    return pairs


def read_pairs(files: Sequence[str | Path], cfg: DPOConfig) -> list[Pair]:
    """Pairs from files: `{"chosen", "rejected"}` lines as given, trajectory lines via `build_pairs`."""
    pairs: list[Pair] = []
    for f in files:
        if not Path(f).exists():
            raise FileNotFoundError(f"trajectory file {f} not found")
        loose: list[Trajectory] = []
        for line in Path(f).read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            if "chosen" in row and "rejected" in row:
                pairs.append((Trajectory.from_dict(row["chosen"]), Trajectory.from_dict(row["rejected"])))
            else:
                loose.append(Trajectory.from_dict(row))
        pairs.extend(build_pairs(loose, cfg))
    return pairs


def sequence_logprobs(logprobs: Tensor, batch: Batch) -> Tensor:
    """Sum of per-token logprobs over each row's loss-mask tokens: `(B, T) -> (B,)`."""
    return (logprobs * batch.loss_mask.to(logprobs.device)).sum(dim=-1)


class DPOTrainer(SupervisedRun):
    kind = "dpo"
    sampler: ItemSampler

    def __init__(
        self, cfg: Config, *, pairs: Sequence[Pair] | None = None, env_urls: dict[str, str] | None = None
    ) -> None:
        super().__init__(cfg, env_urls=env_urls)
        raw = list(pairs) if pairs is not None else read_pairs(cfg.data.train_files, cfg.dpo)
        if cfg.data.categories:
            raw = [p for p in raw if p[0].category in cfg.data.categories]
        if cfg.data.max_items:
            raw = raw[: cfg.data.max_items]
        if not raw:
            raise ValueError(
                f"no DPO pairs in {cfg.data.train_files}: each item needs a better and a worse trajectory "
                f"(dpo.pairs={cfg.dpo.pairs})"
            )
        fmt: ChatFormat = self.fmt
        length = cfg.sft.max_length
        self.pairs = [
            (tokenize_trajectory(c, fmt, length), tokenize_trajectory(r, fmt, length)) for c, r in raw
        ]
        self._ref: dict[int, tuple[float, float]] = {}
        self.sampler = ItemSampler(
            [str(i) for i in range(len(self.pairs))], seed=cfg.trainer.seed, shuffle=cfg.data.shuffle
        )
        self.resume()

    @torch.no_grad()
    def reference_logprobs(self, index: Sequence[int]) -> tuple[Tensor, Tensor]:
        """Sequence logprobs of pairs `index` under the frozen reference (computed once per pair)."""
        todo = [i for i in index if i not in self._ref]
        step = max(1, self.cfg.trainer.micro_batch_size // 2)
        learner = self.learner
        for start in range(0, len(todo), step):
            chunk = todo[start : start + step]
            batch = collate([self.pairs[i][0] for i in chunk] + [self.pairs[i][1] for i in chunk])
            with learner._reference_weights() as reference:
                seq = sequence_logprobs(learner.token_logprobs(reference, batch, entropy=False)[0], batch)
            for k, i in enumerate(chunk):
                self._ref[i] = (float(seq[k]), float(seq[len(chunk) + k]))
        ref = torch.tensor([self._ref[i] for i in index], dtype=torch.float32)
        return ref[:, 0], ref[:, 1]

    def dpo_step(self, index: list[int]) -> dict[str, float]:
        """One optimizer step on the pairs `index` (micro-batches of `micro_batch_size // 2` pairs)."""
        learner, t, d = self.learner, self.cfg.trainer, self.cfg.dpo
        ref_chosen, ref_rejected = self.reference_logprobs(index)
        actor = learner.actor
        actor.train()
        learner.optimizer.zero_grad(set_to_none=True)
        losses, chosen_r, rejected_r = [], [], []
        step = max(1, t.micro_batch_size // 2)
        for start in range(0, len(index), step):
            chunk = index[start : start + step]
            batch = collate([self.pairs[i][0] for i in chunk] + [self.pairs[i][1] for i in chunk])
            seq = sequence_logprobs(learner.token_logprobs(actor, batch, entropy=False)[0], batch)  # (2b,)
            n = len(chunk)
            rows = slice(start, start + n)
            loss, cr, rr = dpo_loss(
                seq[:n],
                seq[n:],
                ref_chosen[rows].to(seq.device),
                ref_rejected[rows].to(seq.device),
                beta=d.beta,
                label_smoothing=d.label_smoothing,
            )
            (loss.sum() / len(index)).backward()
            losses.append(loss.detach().cpu())
            chosen_r.append(cr.cpu())
            rejected_r.append(rr.cpu())
        params = [p for p in actor.parameters() if p.requires_grad]
        grad_norm = torch.nn.utils.clip_grad_norm_(params, t.max_grad_norm)
        learner.optimizer.step()
        learner.lr_scheduler.step()
        actor.eval()
        chosen, rejected = torch.cat(chosen_r), torch.cat(rejected_r)
        return {
            "loss/dpo": float(torch.cat(losses).mean()),
            "rewards/chosen": float(chosen.mean()),
            "rewards/rejected": float(rejected.mean()),
            "rewards/margin": float((chosen - rejected).mean()),
            "rewards/accuracy": float((chosen > rejected).float().mean()),
            "grad/norm": float(grad_norm),
            "lr": float(learner.lr_scheduler.get_last_lr()[0]),
        }

    def describe(self) -> str:
        return f"{len(self.pairs)} pairs, {self.cfg.data.batch_size} per step"

    def train_step(self) -> dict[str, float]:
        return self.dpo_step([int(i) for i in self.sampler.next_batch(self.cfg.data.batch_size)])

    def step_line(self, metrics: dict[str, float]) -> str:
        return (
            f"loss {metrics['loss/dpo']:.4f} | margin {metrics['rewards/margin']:+.4f}"
            f" | acc {metrics['rewards/accuracy']:.2f}"
        )
