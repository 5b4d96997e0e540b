"""Learner tokens/s in one process vs two torchrun ranks (DDP, FSDP2) on this machine.

    python benchmarks/distributed_learner.py --out benchmarks/results/distributed.md

Setup: SmolLM2-135M-Instruct (`model.path=default`), fp32, activation checkpointing, GRPO loss
with entropy (no KL: no reference forward). One fixed batch of `--rows` rows, `--max-length`/6 ..
`--max-length` tokens (a 6x spread, as multi-turn batches have), every non-prompt token sampled,
micro-batches of 2 rows. Each run does one warm-up update, then `--repeats` timed `score` +
`update` passes; tokens/s = padded tokens trained (attention mask) per second of update. One
process gets `--threads` torch threads, each of two ranks half of them, so both use the same
cores. Every configuration runs in its own torchrun (1 or 2 processes) on gloo.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(strategy: str, repeats: int, threads: int, out: Path, device: str, bf16: bool) -> None:
    import torch

    from horizonrl.config import load_config
    from horizonrl.trainer.batch import Batch
    from horizonrl.trainer.run import TrainingRun

    cfg = load_config(
        None,
        [
            "model.path=default",
            f"model.bf16={str(bf16).lower()}",
            f"trainer.device={device}",
            "algorithm.kl_coef=0",
            f"resources.strategy={strategy}",
            f"resources.learner_world_size={os.environ.get('WORLD_SIZE', '1')}",
            f"trainer.num_threads={threads}",
            "trainer.micro_batch_size=2",
            f"trainer.output_dir={out.parent / ('run_' + strategy)}",
            "logging.tensorboard=false",
            "logging.console=false",
        ],
    )
    run = TrainingRun(cfg)
    g = torch.Generator().manual_seed(0)
    rows, prompt = int(os.environ["BENCH_ROWS"]), 32
    lengths = torch.linspace(int(os.environ["BENCH_MAX"]) // 6, int(os.environ["BENCH_MAX"]), rows).long()
    width = int(lengths.max())
    ids = torch.randint(100, 40000, (rows, width), generator=g)
    attention = (torch.arange(width)[None] < lengths[:, None]).long()
    loss_mask = attention.clone()
    loss_mask[:, :prompt] = 0
    batch = Batch(
        input_ids=ids * attention,
        attention_mask=attention,
        loss_mask=loss_mask,
        rollout_logprobs=torch.zeros(rows, width),
        group_ids=torch.arange(rows) // 4,
        prompt_lengths=torch.full((rows,), prompt),
    )
    advantages = torch.randn(rows, 1, generator=g).expand(rows, width) * loss_mask
    learner = run.learner
    timings = []
    for k in range(repeats + 1):
        scored = learner.score(batch).with_(
            advantages=advantages.contiguous(), returns=advantages.contiguous()
        )
        run.parallel.barrier()
        start = time.perf_counter()
        learner.update(scored, k)
        run.parallel.barrier()
        if k:
            timings.append(time.perf_counter() - start)
    if run.is_main:
        tokens = int(attention.sum())
        peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None
        best = tokens / min(timings)
        out.write_text(
            json.dumps({"tokens": tokens, "seconds": timings, "tokens_per_s": best, "peak_gib": peak})
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=768, help="longest row; the shortest is 1/6 of it")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (then only the 1-process run)")
    parser.add_argument("--bf16", action="store_true", help="model.bf16=true")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.repeats, args.threads, Path(args.result), args.device, args.bf16)
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
    env |= {"BENCH_ROWS": str(args.rows), "BENCH_MAX": str(args.max_length)}
    results = {}
    runs = [("1 process", 1, "ddp"), ("2 ranks, DDP", 2, "ddp"), ("2 ranks, FSDP2", 2, "fsdp")]
    for name, nproc, strategy in runs[:1] if args.device == "cuda" else runs:
        result = Path(f"/tmp/horizonrl_bench_dist_{nproc}_{strategy}.json")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
        cmd += [__file__, "--worker", strategy, "--result", str(result), "--repeats", str(args.repeats)]
        cmd += ["--device", args.device, *(["--bf16"] if args.bf16 else [])]
        subprocess.run([*cmd, "--threads", str(args.threads)], check=True, env=env, cwd=ROOT)
        results[name] = json.loads(result.read_text())
        print(name, results[name], flush=True)
    base = results["1 process"]["tokens_per_s"]
    lines = [
        "| learner | tokens/s | ratio to 1 process | update seconds |",
        "|---|---|---|---|",
        *(
            f"| {name} | {r['tokens_per_s']:.0f} | {r['tokens_per_s'] / base:.2f} | "
            + ", ".join(f"{s:.1f}" for s in r["seconds"])
            + " |"
            for name, r in results.items()
        ),
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(
            "# Learner: one process vs two torchrun ranks\n\n"
            f"`python benchmarks/distributed_learner.py --rows {args.rows} --max-length {args.max_length} "
            f"--repeats {args.repeats} --out {args.out}` ({results['1 process']['tokens']} tokens per "
            "update, SmolLM2-135M fp32, 2 threads in all)\n\n" + text + "\n"
        )


if __name__ == "__main__":
    main()
