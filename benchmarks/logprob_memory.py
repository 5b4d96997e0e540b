"""Peak host memory of the learner's logprobs and entropy with their gradient: whole tensor vs
blocks of positions.

    python benchmarks/logprob_memory.py --rows 4 --positions 1000 --vocab 49152

For one micro-batch of random bf16 logits `(rows, positions + 1, vocab)` (SmolLM2's vocabulary by
default), each in a fresh process: `plain` is `log_softmax(logits[:, :-1].float() / T)` gathered at
the labels and the entropy of the same softmax, as autograd runs them on the whole tensor;
`blocks` is `horizonrl.algos.losses.logprobs_from_logits` and `entropy_from_logits` (`--block`
positions at a time, forward and backward). Both then backpropagate what the RL update does: a
weighted sum of the logprobs minus `--entropy-coef` times the entropy's; with 0 the entropy is
computed outside the graph, for logging, as the learner does (`--entropy-graph`: inside it).
Prints each one's peak RSS above what the process held before (ru_maxrss), its seconds for
forward and backward, and whether the two give the same logprobs, entropy and gradients, bit
for bit.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def child(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    import torch
    import torch.nn.functional as F

    from horizonrl.algos.losses import entropy_from_logits, logprobs_from_logits

    torch.manual_seed(0)
    logits = (torch.randn(args.rows, args.positions + 1, args.vocab) * 3).to(torch.bfloat16)
    labels = torch.randint(0, args.vocab, (args.rows, args.positions))
    weights = torch.randn(args.rows, args.positions)
    leaf = logits.clone().requires_grad_(True)
    before, start = peak_gb(), time.perf_counter()
    x = leaf[:, :-1]
    if args.child == "plain":
        logp = F.log_softmax(x.float() / args.temperature, dim=-1)
        lp = logp.gather(-1, labels[..., None])[..., 0]
        with torch.set_grad_enabled(args.entropy_coef != 0 or args.entropy_graph):
            logp = F.log_softmax(x.float() / args.temperature, dim=-1)  # as entropy_from_logits runs it
            ent = -(logp.exp() * logp).sum(dim=-1)
        del logp
    else:
        lp = logprobs_from_logits(x, labels, args.temperature, block=args.block)
        with torch.set_grad_enabled(args.entropy_coef != 0 or args.entropy_graph):
            ent = entropy_from_logits(x, args.temperature, block=args.block)
    ((lp * weights).sum() - args.entropy_coef * (ent * weights).sum()).backward()
    seconds, extra = time.perf_counter() - start, peak_gb() - before
    got = {"logprobs": lp.detach(), "entropy": ent.detach(), "grad": leaf.grad}
    torch.save({**got, "extra_gb": extra, "s": seconds}, args.out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--positions", type=int, default=1000)
    p.add_argument("--vocab", type=int, default=49152)
    p.add_argument("--temperature", type=float, default=0.9)
    p.add_argument("--block", type=int, default=256, help="positions per block (trainer.logprob_block)")
    p.add_argument(
        "--entropy-coef", type=float, default=0.001, help="algorithm.entropy_coef; 0: the entropy only logged"
    )
    p.add_argument(
        "--entropy-graph", action="store_true", help="with coef 0, build the entropy's graph (as before)"
    )
    p.add_argument("--child", choices=("plain", "blocks"), default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args)
        return 0
    import torch

    got = {}
    with tempfile.TemporaryDirectory(prefix="logprob_memory_") as tmp:
        for mode in ("plain", "blocks"):
            out = Path(tmp) / f"{mode}.pt"
            cmd = [sys.executable, __file__, "--child", mode, "--out", str(out)]
            cmd += ["--rows", str(args.rows), "--positions", str(args.positions), "--vocab", str(args.vocab)]
            cmd += ["--temperature", str(args.temperature), "--block", str(args.block)]
            cmd += ["--entropy-coef", str(args.entropy_coef)] + ["--entropy-graph"] * args.entropy_graph
            subprocess.run(cmd, check=True, cwd=ROOT)
            got[mode] = torch.load(out)
    same = {k: torch.equal(got["plain"][k], got["blocks"][k]) for k in ("logprobs", "entropy", "grad")}
    shape = f"{args.rows} x {args.positions} x {args.vocab}"
    graph = "trained on" if args.entropy_coef or args.entropy_graph else "logged only, no graph"
    what = f", entropy coef {args.entropy_coef:g} ({graph})"
    head = f"logits ({shape}, bf16), T = {args.temperature:g}{what}"
    print(f"| {head} | peak above the inputs (GB) | forward + backward (s) |")
    print("|---|---|---|")
    for mode in ("plain", "blocks"):
        print(f"| {mode} | {got[mode]['extra_gb']:.2f} | {got[mode]['s']:.2f} |")
    print("\nthe same bit for bit: " + ", ".join(f"{k} {v}" for k, v in same.items()))
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
