"""Host memory of an SFT run, step by step: never trimmed, as shipped, and trimmed after every step.

    horizonrl solve textcraft --split train --out runs/demos/textcraft_train.jsonl
    python benchmarks/sft_memory.py --steps 12 --demos runs/demos/textcraft_train.jsonl

Runs `--steps` SFT steps of the default model (the protocol's settings: bf16, no gradient
checkpointing, batch 8) once per mode, each in a fresh process, with `trainer.release_memory_above`
(the share of the machine's memory above which a step hands its freed heap back:
`horizonrl.trainer.memory.keep_under`) at 1 (`never`), at `--share` (`shipped`; the config's
default unless given) and at 0 (`every`: gc, then glibc's `malloc_trim`, after every step, as the
RL loop does before its next rollout). Per step it reads `metrics.jsonl`: the resident memory
after the step (`memory/rss_gb`), the process's peak so far (`memory/peak_rss_gb`), what a trim
handed back (`memory/released_gb`) and the step's seconds. Prints a Markdown table; `--json`
writes the figures. What it answers: how much of a step's freed memory stays in the process, and
what handing it back costs in step time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("never", "shipped", "every")


def child(args: argparse.Namespace) -> None:
    """One run in this process (`--child MODE`)."""
    sys.path.insert(0, str(ROOT))
    from horizonrl.config import load_config
    from horizonrl.trainer.main import run

    share = {"never": "1.0", "every": "0.0"}.get(args.child, args.share)
    cfg = load_config(
        args.config,
        [
            "algorithm.name=sft",
            f"data.train_files=[{args.demos}]",
            "trainer.lr=1.0e-4",
            "data.families=[textcraft]",
            "data.categories=[depth 1, depth 2]",
            f"trainer.total_steps={args.steps}",
            "trainer.save_every=0",
            "eval.at_end=false",
            "logging.tensorboard=false",
            f"model.path={args.model}",
            "model.bf16=true",
            "model.gradient_checkpointing=false",
            f"trainer.output_dir={args.out}",
            *([f"trainer.release_memory_above={share}"] if share is not None else []),
        ],
    )
    run(cfg)


def measure(args: argparse.Namespace, mode: str, out: Path) -> list[dict[str, float]]:
    cmd = [sys.executable, __file__, "--child", mode, "--out", str(out)]
    cmd += ["--steps", str(args.steps), "--demos", args.demos, "--model", args.model, "--config", args.config]
    cmd += ["--share", args.share] if args.share is not None else []
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    print(f"[sft_memory] {mode}: {args.steps} steps -> {out}", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=env, cwd=ROOT)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line]
    return [r for r in rows if "time/step" in r]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--demos", default="runs/demos/textcraft_train.jsonl", help="horizonrl solve's JSONL")
    p.add_argument("--model", default="default")
    p.add_argument("--config", default="configs/quickstart.yaml")
    p.add_argument("--share", default=None, help="shipped mode's trainer.release_memory_above")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    p.add_argument("--child", choices=MODES, default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args)
        return 0
    if not Path(args.demos).exists():
        p.error(f"{args.demos} not found: horizonrl solve textcraft --split train --out {args.demos}")
    args.demos = str(Path(args.demos).resolve())
    with tempfile.TemporaryDirectory(prefix="sft_memory_") as tmp:
        results = {mode: measure(args, mode, Path(tmp) / mode) for mode in MODES}
    lines = [
        "| step | "
        + " | ".join(f"{m}: RSS after (GB) | {m}: peak (GB) | {m}: handed back | {m}: s" for m in MODES)
        + " |",
        "|---|" + "---|---|---|---|" * len(MODES),
    ]
    for i in range(args.steps):
        cells = []
        for mode in MODES:
            r = results[mode][i] if i < len(results[mode]) else {}
            cells += [
                f"{r.get('memory/rss_gb', float('nan')):.2f}",
                f"{r.get('memory/peak_rss_gb', float('nan')):.2f}",
                f"{r['memory/released_gb']:.2f}" if "memory/released_gb" in r else "",
                f"{r.get('time/step', float('nan')):.1f}",
            ]
        lines.append(f"| {i + 1} | " + " | ".join(cells) + " |")
    for mode in MODES:
        secs = [r["time/step"] for r in results[mode]]
        lines.append(f"\n{mode}: mean step {sum(secs) / max(1, len(secs)):.1f} s over {len(secs)} steps")
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({"steps": args.steps, "runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
