"""Learner throughput and learning curves.

    python benchmarks/learning.py throughput [--model default] [--rows 8] [--length 640]
    python benchmarks/learning.py curve [--minutes 15] [--steps 8] [overrides ...]

`throughput`: the trainer's update phase (PPO loss, entropy, KL, micro-batching, gradient
clipping, optimizer step) in trained tokens/s, against a plain forward+backward (causal-LM
loss, same model, same micro-batches, same bf16 autocast and checkpointing) of the same batch.
The score phase (old / reference logprobs, no grad) is reported separately.

`curve`: trains the default model on TextCraft depth 1-2 with GRPO and the stepwise schedule,
evaluating greedy test success before and after; then the same number of steps with a
fixed-short cap, a fixed-long cap and the stepwise schedule (needs the rollout engine).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without install

import torch  # noqa: E402

from horizonrl.config import load_config  # noqa: E402
from horizonrl.rollout.trajectory import Trajectory  # noqa: E402
from horizonrl.trainer.batch import collate, micro_batches  # noqa: E402
from horizonrl.trainer.rl import RLTrainer  # noqa: E402


def synthetic_trajectories(
    rows: int, length: int, prompt: int, vocab: int, seed: int = 0
) -> list[Trajectory]:
    """Rollout-shaped rows: a prompt, then alternating sampled (mask 1) and observation chunks."""
    rng = random.Random(seed)
    out = []
    for i in range(rows):
        ids = [rng.randrange(100, vocab) for _ in range(length)]
        mask = [0] * prompt + [(1 if (t // 48) % 2 == 0 else 0) for t in range(length - prompt)]
        logprobs = [-1.0 if m else None for m in mask]
        ends = [t for t in range(length - 1) if mask[t] and not mask[t + 1]]
        out.append(
            Trajectory(
                item_id=f"textcraft_{i}",
                category="depth 1",
                success=i % 2 == 0,
                reward=float(i % 2 == 0),
                token_ids=ids,
                loss_mask=mask,
                logprobs=logprobs,
                prompt_length=prompt,
                turn_ends=ends,
                group_id=i // 4,
                sample_index=i % 4,
            )
        )
    return out


def throughput(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(
            None,
            [
                f"model.path={args.model}",
                f"trainer.output_dir={tmp}",
                f"trainer.micro_batch_size={args.micro}",
                "trainer.num_threads=2",
                f"algorithm.kl_coef={args.kl}",
                "logging.tensorboard=false",
                "logging.console=false",
                "eval.at_end=false",
            ],
        )
        trainer = RLTrainer(cfg, rollout=lambda *a, **k: [])
        learner = trainer.learner
        trajs = synthetic_trajectories(args.rows, args.length, args.prompt, len(learner.tokenizer))
        batch = collate(trajs)
        tokens = int(batch.attention_mask.sum())

        def plain_step() -> None:
            model = learner.actor
            model.train()
            learner.optimizer.zero_grad(set_to_none=True)
            for mb in micro_batches(batch, list(range(batch.size)), cfg.trainer.micro_batch_size):
                with learner._amp():
                    out = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False)
                logits = out.logits[:, :-1].float()
                loss = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), mb.input_ids[:, 1:].reshape(-1), reduction="none"
                )
                (loss * mb.attention_mask[:, 1:].reshape(-1)).sum().div(tokens).backward()
            model.eval()

        results: dict[str, list[float]] = {"plain": [], "update": [], "score": []}
        for rep in range(args.repeats + 1):  # first repeat warms up
            start = time.perf_counter()
            plain_step()
            plain = time.perf_counter() - start
            start = time.perf_counter()
            scored = learner.score(batch)
            score = time.perf_counter() - start
            scored, _ = trainer.advantages(scored, trajs)
            assert scored is not None
            start = time.perf_counter()
            learner.update(scored, rep)
            update = time.perf_counter() - start
            if rep:
                results["plain"].append(plain)
                results["update"].append(update)
                results["score"].append(score)
        best = {k: min(v) for k, v in results.items()}
        report = {
            "model": args.model,
            "rows": args.rows,
            "length": args.length,
            "tokens": tokens,
            "plain_fwd_bwd_tokens_per_s": tokens / best["plain"],
            "update_tokens_per_s": tokens / best["update"],
            "update_vs_plain": best["plain"] / best["update"],
            "score_tokens_per_s": tokens / best["score"],
            "step_tokens_per_s": tokens / (best["update"] + best["score"]),
        }
        print(json.dumps(report, indent=1))
        return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("throughput")
    p.add_argument("--model", default="default")
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--length", type=int, default=640)
    p.add_argument("--prompt", type=int, default=400)
    p.add_argument("--micro", type=int, default=4)
    p.add_argument("--kl", type=float, default=0.001)
    p.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    if args.cmd == "throughput":
        throughput(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
