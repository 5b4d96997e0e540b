"""Learner throughput and learning curves.

    python benchmarks/learning.py throughput [--model default] [--rows 8] [--length 640]
    python benchmarks/learning.py recipe [--out runs/bench_learning] [--skip-run]
    python benchmarks/learning.py schedules --sft-model DIR [--steps 6] [--stepwise 3,4,5] [--every 2]
    python benchmarks/learning.py control --sft-model DIR [--out runs/control_flipped]

`throughput`: the trainer's update phase (PPO loss, entropy, KL, micro-batching, gradient
clipping, optimizer step) in trained tokens/s, against a plain forward+backward (causal-LM
loss, same model, same micro-batches, same bf16 autocast and checkpointing) of the same batch.
The score phase (old / reference logprobs, no grad) is reported separately.

`recipe`: the default model on TextCraft test items of depth 1-2 (the quickstart's eval items):
greedy success zero-shot, after SFT on expert demos, after SFT + GRPO (stepwise turn schedule) —
one `horizonrl train configs/quickstart.yaml` — and after AgentEvol (`horizonrl agentevol
configs/agentevol.yaml`), each with its command and wall time, as a Markdown table (also written
to `<out>/learning.md`). `--skip-run` only tabulates runs already in `<out>`.

`schedules`: ScalingInter-RL against fixed caps. From one SFT checkpoint (`--sft-model`, e.g. the
recipe's `<out>/quickstart/sft/checkpoints/step_N/model`), the quickstart's GRPO for the same
number of steps with the turn cap fixed at the stepwise schedule's first cap (fixed-short), at its
last cap (fixed-long), and stepwise; each ends with the same greedy eval. `--stepwise-run DIR`
reuses a finished stepwise run (the recipe's `<out>/quickstart/rl`) instead of training it again.

The multi-seed comparison of arms with intervals and the equal-compute SFT baseline is
`benchmarks/protocol.py` (docs/training.md, "Measuring learning").

`control`: the quickstart's GRPO phase from `--sft-model` with every GRPO advantage sign-flipped
(same items, caps, seeds). If the real run's gain comes from the reward signal, this one loses.
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
from typing import Any

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
            for _, mb in micro_batches(batch, list(range(batch.size)), cfg.trainer.micro_batch_size):
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


def _step_rows(run: Path) -> list[dict[str, float]]:
    """The training-step lines of `run/metrics.jsonl` (those with `time/step`; eval lines have none)."""
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [r for r in rows if "time/step" in r]


def _phase_seconds(rows: list[dict[str, float]]) -> float:
    """Seconds of the training steps in `rows`."""
    return float(sum(r.get("time/step") or 0.0 for r in rows))


def _run(cmd: list[str]) -> float:
    import subprocess

    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - start


def recipe(args: argparse.Namespace) -> str:
    from horizonrl.trainer.main import summary_table

    out = Path(args.out)
    demos = out / "demos.jsonl"
    qs, ae = out / "quickstart", out / "agentevol"
    qs_cmd = [
        "horizonrl",
        "train",
        "configs/quickstart.yaml",
        f"data.train_files=[{demos}]",
        f"trainer.output_dir={qs}",
        *args.overrides,
    ]
    ae_cmd = [
        "horizonrl",
        "agentevol",
        "configs/agentevol.yaml",
        f"data.train_files=[{demos}]",
        f"trainer.output_dir={ae}",
        *args.overrides,
    ]
    walls: dict[str, float] = (
        json.loads((out / "walls.json").read_text()) if (out / "walls.json").exists() else {}
    )
    if not args.skip_run:
        out.mkdir(parents=True, exist_ok=True)
        if not demos.exists():
            _run(["horizonrl", "solve", "textcraft", "--split", "train", "--out", str(demos)])
        load = os.getloadavg()[0]
        walls["quickstart"] = _run(qs_cmd)
        walls["agentevol"] = _run(ae_cmd)
        walls["load_before"] = load
        walls["load_after"] = os.getloadavg()[0]
        (out / "walls.json").write_text(json.dumps(walls))
    iters = (
        sorted((ae / "eval").glob("iter_*"), key=lambda p: int(p.name.split("_")[1])) if ae.exists() else []
    )
    table = summary_table(
        [
            ("zero-shot", qs / "sft/eval/initial/report.json"),
            ("after SFT", qs / "sft/eval/final/report.json"),
            ("after SFT + GRPO (stepwise)", qs / "rl/eval/final/report.json"),
            *[(f"after AgentEvol ({p.name.replace('_', ' ')})", p / "report.json") for p in iters],
        ]
    )
    lines = [
        table,
        "",
        f"- quickstart (zero-shot eval, SFT, eval, GRPO, eval): `{' '.join(qs_cmd)}` — "
        f"{walls.get('quickstart', 0):.0f} s wall; SFT steps {_phase_seconds(_step_rows(qs / 'sft')):.0f} s, "
        f"GRPO steps {_phase_seconds(_step_rows(qs / 'rl')):.0f} s",
        f"- AgentEvol: `{' '.join(ae_cmd)}` — {walls.get('agentevol', 0):.0f} s wall; "
        f"SFT steps {_phase_seconds(_step_rows(ae)):.0f} s",
        f"- load average (1 min) before / after: {walls.get('load_before', float('nan')):.1f} / "
        f"{walls.get('load_after', float('nan')):.1f} on {os.cpu_count()} cores",
    ]
    text = "\n".join(lines)
    if out.exists():
        (out / "learning.md").write_text(text + "\n")
    print(text)
    return text


def schedules(args: argparse.Namespace) -> str:
    caps = [int(c) for c in args.stepwise.split(",")]
    out = Path(args.out)
    variants = {
        "fixed-short": (f"fixed [{caps[0]}]", ["schedule.type=fixed", f"schedule.rounds=[{caps[0]}]"]),
        "fixed-long": (f"fixed [{caps[-1]}]", ["schedule.type=fixed", f"schedule.rounds=[{caps[-1]}]"]),
        "stepwise": (
            f"stepwise {caps} every {args.every}",
            ["schedule.type=stepwise", f"schedule.rounds=[{args.stepwise}]", f"schedule.every={args.every}"],
        ),
    }
    base = [
        "horizonrl",
        "train",
        "configs/quickstart.yaml",
        "sft.warmup_steps=0",
        "data.train_files=[]",
        f"model.path={args.sft_model}",
        f"trainer.total_steps={args.steps}",
        *args.overrides,
    ]
    runs = {name: out / name for name in variants}
    if args.stepwise_run:
        runs["stepwise"] = Path(args.stepwise_run)
    walls: dict[str, float] = (
        json.loads((out / "walls.json").read_text()) if (out / "walls.json").exists() else {}
    )
    commands: dict[str, str] = {}
    for name, (_, extra) in variants.items():
        cmd = [*base, *extra, f"trainer.output_dir={runs[name]}"]
        commands[name] = " ".join(cmd)
        if args.skip_run or (name == "stepwise" and args.stepwise_run):
            continue
        out.mkdir(parents=True, exist_ok=True)
        walls[name] = _run(cmd)
        (out / "walls.json").write_text(json.dumps(walls))
    lines = [
        "| turn caps | eval success | train success (mean over steps) | informative groups | "
        "turns / episode | sampled tokens | GRPO steps s | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, (label, _) in variants.items():
        rows = _step_rows(runs[name])
        report = runs[name] / "eval" / "final" / "report.json"
        if not rows or not report.exists():
            lines.append(f"| {label} | (not run) | | | | | | |")
            continue
        success = json.loads(report.read_text())["success_rate"]

        def mean(key: str, rows: list[dict[str, float]] = rows) -> float:
            values = [r[key] for r in rows if r.get(key) is not None]
            return sum(values) / max(1, len(values))

        lines.append(
            f"| {label} | {success:.1%} | {mean('success/mean'):.1%} | "
            f"{mean('groups/informative_frac'):.0%} | {mean('turns/mean'):.2f} | "
            f"{sum(r['sampled_tokens/total'] for r in rows):.0f} | {_phase_seconds(rows):.0f} | "
            f"{walls.get(name, float('nan')):.0f} |"
        )
    lines += ["", *[f"- {name}: `{cmd}`" for name, cmd in commands.items()]]
    if args.stepwise_run:
        lines.append(f"- stepwise: the finished run in `{args.stepwise_run}`")
    text = "\n".join(lines)
    if out.exists():
        (out / "schedules.md").write_text(text + "\n")
    print(text)
    return text


def control(args: argparse.Namespace) -> int:
    import horizonrl.algos.advantages as advantages
    from horizonrl.cli import main as cli

    real = advantages.ESTIMATORS["grpo"]

    def flipped(*inputs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        adv, returns = real(*inputs)
        return -adv, returns

    advantages.ESTIMATORS["grpo"] = advantages.Estimator(flipped, group_relative=True)
    return cli(
        [
            "train",
            "configs/quickstart.yaml",
            "sft.warmup_steps=0",
            "data.train_files=[]",
            f"model.path={args.sft_model}",
            f"trainer.output_dir={args.out}",
            *args.overrides,
        ]
    )


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
    p = sub.add_parser("recipe")
    p.add_argument("--out", default="runs/bench_learning")
    p.add_argument("--skip-run", action="store_true", help="only tabulate the runs already in --out")
    p.add_argument("overrides", nargs="*", default=[], help="dotted overrides for both runs")
    p = sub.add_parser("schedules")
    p.add_argument("--sft-model", required=True, help="the SFT checkpoint every variant starts from")
    p.add_argument("--out", default="runs/bench_schedules")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--stepwise", default="3,4,5", help="the stepwise caps; fixed-short/long use its ends")
    p.add_argument("--every", type=int, default=2)
    p.add_argument("--stepwise-run", default=None, help="reuse this finished stepwise run")
    p.add_argument("--skip-run", action="store_true", help="only tabulate the runs already in --out")
    p.add_argument("overrides", nargs="*", default=[], help="dotted overrides for every variant")
    p = sub.add_parser("control")
    p.add_argument("--sft-model", required=True)
    p.add_argument("--out", default="runs/control_flipped")
    p.add_argument("overrides", nargs="*", default=[], help="dotted overrides")
    args = parser.parse_args(argv)
    if args.cmd == "control":
        return control(args)
    if args.cmd == "schedules":
        schedules(args)
    elif args.cmd == "throughput":
        throughput(args)
    elif args.cmd == "recipe":
        recipe(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
