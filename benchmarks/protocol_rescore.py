"""Score a protocol run's final checkpoints again under other eval settings, with the same tables.

    python benchmarks/protocol_rescore.py runs/protocol_x --out runs/protocol_x_cap10 eval.max_turns=10
    python benchmarks/protocol_rescore.py runs/protocol_x --out runs/protocol_x_cap10 --arms sft,grpo \
        --results learning_protocol_x_cap10 eval.max_turns=10

A protocol run (`benchmarks/protocol.py --out RUN`) scores every arm x seed once, with the base
config's greedy eval. This asks what the same checkpoints do under another eval, e.g. another
turn cap, without training anything again: each arm x seed's final checkpoint (the `sft` arm: the
start checkpoint) gets the protocol's own eval (its `sft` arm, in a subprocess, into
`OUT/evals/<arm>_seed_<s>/` or `OUT/evals/sft/`, reused when done with the same settings) with
the protocol's settings and overrides as `RUN/commands.txt` records them and the `KEY=VALUE`s
given here on top.
Each rescored run is written as `OUT/<arm>/seed_<s>/result.json`: the original result with the
new eval's items, its intermediate evals dropped from the curve (they were made under the old
settings) and the new one at its last step, and `rescored` (the source, the checkpoint, the
overrides, the success before). Then the protocol's report: `OUT/protocol.{md,json}` and
`OUT/curves.png` (`--results NAME` archives them as `benchmarks/results/NAME.*` and rewrites the
scoreboard, as `protocol.py --results` does). Training time, budgets and sampled tokens are the
original runs'.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without install

from benchmarks import protocol, protocol_report  # noqa: E402
from benchmarks.protocol_report import load_results  # noqa: E402
from benchmarks.protocol_scoreboard import write_scoreboard  # noqa: E402
from horizonrl.models import run_checkpoints  # noqa: E402


def original_args(run: Path) -> argparse.Namespace:
    """The protocol invocation that made `run` (the last line of its `commands.txt`); every line
    must agree on the settings a rescore repeats (config, families, eval limit, overrides)."""
    path = run / "commands.txt"
    if not path.exists():
        raise SystemExit(f"protocol_rescore: {path} is missing: is {run} a protocol.py --out folder?")
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    parsed = [protocol.parse_args(shlex.split(line)[2:]) for line in lines]
    kept = {(a.config, tuple(a.families), a.eval_limit, tuple(a.overrides)) for a in parsed}
    if len(kept) > 1:
        raise SystemExit(f"protocol_rescore: the commands in {path} differ in config, families or overrides")
    return parsed[-1]


def checkpoint_of(run: Path, result: dict[str, Any]) -> str:
    """The weights an arm x seed ended with: the last `checkpoints/step_*/model` of its folder (the
    `sft` eval arm: the start checkpoint, its `model.path`)."""
    if result["seed"] is None:
        return [o.split("=", 1)[1] for o in result["overrides"] if o.startswith("model.path=")][-1]
    found = run_checkpoints(run)
    if not found:
        raise SystemExit(f"protocol_rescore: {run} has no final checkpoint (rescoring needs the run folders)")
    return str(found[-1][1] / "model")


def rescored_metrics(rows: list[dict[str, Any]], success: float) -> list[dict[str, Any]]:
    """`rows` less their eval figures (made under the old settings), and the new eval's success at the
    last step."""
    kept = [{k: v for k, v in row.items() if not k.startswith("eval/")} for row in rows]
    kept = [row for row in kept if set(row) - {"step"}]
    last = max((int(row["step"]) for row in rows), default=0)
    return [*kept, {"step": last, "eval/success": success}]


def rescore_run(
    run: Path, evals: Path, made: argparse.Namespace, result: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    """One arm x seed (`result`, its folder `run`): the protocol's eval of its final checkpoint into
    `evals` under the run's settings (`made`) and the new overrides; the rescored result."""
    seed = result["seed"]
    ckpt = checkpoint_of(run, result)
    argv = ["--config", made.config, "--families", ",".join(made.families), "--sft-model", ckpt]
    argv += ["--arms", "sft", "--seeds", "1", "--out", str(evals)]
    argv += ["--eval-limit", str(made.eval_limit)] if made.eval_limit else []
    print(f"[rescore] {result['arm']} seed {seed}: {ckpt}", file=sys.stderr, flush=True)
    cmd = [sys.executable, str(Path(protocol.__file__)), *argv, *made.overrides, *args.overrides]
    if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode:
        raise SystemExit(
            f"protocol_rescore: the eval of {result['arm']} seed {seed} failed: {shlex.join(cmd)}"
        )
    new = json.loads((evals / "sft" / "result.json").read_text())
    success = sum(new["items"].values()) / len(new["items"])
    return {
        **result,
        "items": new["items"],
        "categories": new["categories"],
        "metrics": rescored_metrics(result.get("metrics", []), success),
        "wall_s": new["wall_s"],
        "load_avg": new["load_avg"],
        "rescored": {
            "from": str(run),
            "checkpoint": ckpt,
            "overrides": args.overrides,
            "success_before": sum(result["items"].values()) / len(result["items"]),
            "machine": new.get("machine"),
        },
    }


def rescore(args: argparse.Namespace) -> dict[str, Any]:
    src, out = Path(args.run), Path(args.out)
    made = original_args(src)
    found = load_results(src, list(protocol.ARMS))
    arms = args.arms or list(found)
    missing = [a for a in arms if a not in found]
    if missing:
        raise SystemExit(f"protocol_rescore: no results of {missing} under {src}; it has {', '.join(found)}")
    out.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/protocol_rescore.py " + " ".join(shlex.quote(a) for a in args.argv)
    with (out / "commands.txt").open("a") as f:
        f.write(command + "\n")
    for arm in arms:
        for result in found[arm]:
            where = Path(arm) if result["seed"] is None else Path(arm) / f"seed_{result['seed']}"
            evals = out / "evals" / "_".join(where.parts)  # sft, grpo_seed_0, ...
            rescored = rescore_run(src / where, evals, made, result, args)
            (out / where).mkdir(parents=True, exist_ok=True)
            (out / where / "result.json").write_text(json.dumps(rescored))
    title = f"{args.title or made.title}, rescored with {' '.join(args.overrides)}"
    report_args = argparse.Namespace(results=args.results, title=title)
    return protocol.write_report(out, report_args, list(protocol.ARMS))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a benchmarks/protocol.py --out folder")
    p.add_argument("--out", required=True, help="where the rescored runs and their report go")
    p.add_argument("--arms", default="", help="the arms to rescore (default: every arm with results)")
    p.add_argument("--results", default=None, help="also archive the report as benchmarks/results/NAME.*")
    p.add_argument("--title", default=None, help="the report's title (default: the run's)")
    p.add_argument("overrides", nargs="+", help="the eval's dotted overrides, e.g. eval.max_turns=10")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.arms = [a for a in args.arms.split(",") if a]
    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        p.error(f"overrides are KEY=VALUE: {bad}")
    if Path(args.out).resolve() == Path(args.run).resolve():
        p.error("--out must be another folder than the run")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rescore(args)
    if args.results:  # an archive changed: so does the page of all of them
        write_scoreboard(protocol_report.RESULTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
