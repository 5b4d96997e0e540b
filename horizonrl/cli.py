"""The `horizonrl` command. Each subcommand parses its arguments here and hands off to one
function in the module that owns the workflow, imported only when that subcommand runs.

    horizonrl envs [--json]
    horizonrl serve FAMILY [--host H] [--port P]
    horizonrl solve FAMILY --split S [--limit N] [--server URL] [--out FILE] [--max-turns T]
    horizonrl eval --model M --env FAMILY --split S [--limit N] [--max-turns T] --out DIR
    horizonrl train CONFIG [dotted.key=value ...] [--dry-run]
    horizonrl sft|dpo|agentevol CONFIG [dotted.key=value ...]
    horizonrl view RUN_DIR
    horizonrl index build --corpus FILE --out DIR [--kind bm25|dense]
    horizonrl data make-search --seed S --out DIR
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any


def _handler(target: str) -> Callable[[argparse.Namespace], int | None]:
    """Resolve `"module:function"` lazily, so `horizonrl envs` never imports torch."""

    def run(args: argparse.Namespace) -> int | None:
        module, _, name = target.partition(":")
        fn: Callable[[argparse.Namespace], int | None] = getattr(importlib.import_module(module), name)
        return fn(args)

    return run


def cmd_envs(args: argparse.Namespace) -> int:
    from horizonrl.envs.registry import family_names, get_family

    rows: list[dict[str, Any]] = []
    for name in family_names():
        spec = get_family(name)
        rows.append(
            {
                "family": name,
                "splits": {split: len(ids) for split, ids in spec.splits().items()},
                "categories": list(spec.categories),
            }
        )
    if args.json:
        print(json.dumps(rows))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="horizonrl environment families")
    for col in ("family", "splits", "categories"):
        table.add_column(col)
    for row in rows:
        splits = ", ".join(f"{k}: {v}" for k, v in row["splits"].items())
        table.add_row(row["family"], splits, ", ".join(row["categories"]))
    Console().print(table)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="horizonrl", description="Multi-turn RL for LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("envs", help="list environment families with split sizes and categories")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser("serve", help="serve one environment family over HTTP")
    p.add_argument("family")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=None, help="default: the family's port")
    p.add_argument("--max-sessions", type=int, default=None, help="cap on live sessions (429 past it)")
    p.add_argument("--idle-ttl", type=float, default=None, help="seconds before an idle session is closed")
    p.add_argument("--log-level", default="warning")
    p.add_argument("--env-kwargs", default="{}", help="JSON object passed to the family's env factory")
    p.set_defaults(func=_handler("horizonrl.server.app:serve_main"))

    p = sub.add_parser("solve", help="play items with the family's scripted expert")
    p.add_argument("family")
    p.add_argument("--split", default="test")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--server", default=None, help="env server URL; local envs when omitted")
    p.add_argument("--out", default=None, help="write trajectories as JSONL here")
    p.add_argument("--max-turns", type=int, default=None, help="turn cap (default: none, play to the end)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1, help="items played concurrently")
    p.set_defaults(func=_handler("horizonrl.eval.solve:solve_main"))

    p = sub.add_parser("eval", help="evaluate a model on environment families")
    p.add_argument("config", nargs="?", default=None, help="optional YAML eval config")
    p.add_argument("--model", default=None)
    p.add_argument("--backend", default=None, help="hf (default) or openai")
    p.add_argument("--env", default=None, help="family, or comma-separated families")
    p.add_argument("--split", default=None)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--max-turns", type=int, default=None)
    p.add_argument("--n", type=int, default=None, help="samples per item (pass@k / avg@k)")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--server", default=None, help="env server URL (one family)")
    p.add_argument(
        "--dtype", default=None, choices=("float32", "bfloat16"), help="hf weights (bfloat16: ~1.7x on CPU)"
    )
    p.add_argument("--out", default=None)
    p.add_argument("overrides", nargs="*", default=[], help="dotted.key=value overrides")
    p.set_defaults(func=_handler("horizonrl.eval.evaluate:eval_main"))

    for name, target, what in (
        ("train", "horizonrl.trainer.main:train_main", "train with the algorithm in CONFIG"),
        ("sft", "horizonrl.trainer.main:sft_main", "supervised fine-tuning on trajectory files"),
        ("dpo", "horizonrl.trainer.main:dpo_main", "DPO on pairs of trajectories"),
        ("agentevol", "horizonrl.trainer.main:agentevol_main", "AgentEvol: explore, keep, SFT"),
    ):
        p = sub.add_parser(name, help=what)
        p.add_argument("config", help="YAML config file")
        p.add_argument("overrides", nargs="*", default=[], help="dotted.key=value overrides")
        if name == "train":
            p.add_argument(
                "--dry-run",
                action="store_true",
                help="print the placement `resources:` implies; start nothing",
            )
        p.set_defaults(func=_handler(target))

    p = sub.add_parser("view", help="browse runs and replay trajectories in a web viewer")
    p.add_argument("run_dir")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.set_defaults(func=_handler("horizonrl.viewer.app:view_main"))

    p = sub.add_parser("index", help="retrieval indexes for the search family")
    isub = p.add_subparsers(dest="index_command", required=True)
    b = isub.add_parser("build", help="build a retrieval index from a corpus JSONL")
    b.add_argument("--corpus", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--kind", choices=("bm25", "dense"), default="bm25")
    b.add_argument("--model", default=None, help="sentence-transformers model path (dense)")
    b.set_defaults(func=_handler("horizonrl.envs.search.cli:index_build_main"))

    p = sub.add_parser("data", help="generate data sets")
    dsub = p.add_subparsers(dest="data_command", required=True)
    d = dsub.add_parser("make-search", help="generate a synthetic multi-hop search world")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--out", required=True)
    d.add_argument("--entities", type=int, default=None)
    d.set_defaults(func=_handler("horizonrl.envs.search.cli:make_search_main"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Torch threads spin-wait by default and slow down 10x when another process shares the cores.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and hasattr(args, "overrides") and all("=" in x and not x.startswith("-") for x in extra):
        args.overrides = [*args.overrides, *extra]  # overrides after an option (`CONFIG --dry-run k=v`)
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from horizonrl.envs.core import EnvError

    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except EnvError as exc:  # a backend that cannot start (e.g. no Java): its message says what to do
        print(f"horizonrl: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
