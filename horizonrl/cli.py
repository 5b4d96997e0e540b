"""The `horizonrl` command. Each subcommand parses its arguments here and hands off to one
function in the module that owns the workflow, imported only when that subcommand runs.

    horizonrl [--plugin MODULE ...] COMMAND ...
    horizonrl envs [--json]
    horizonrl check-env FAMILY [--server URL] [--items N]
    horizonrl new-env NAME [--dir D]
    horizonrl serve FAMILY [--host H] [--port P]
    horizonrl solve FAMILY --split S [--limit N] [--server URL] [--out FILE] [--max-turns T] [--detours P]
                    [--expert-kwargs JSON]
    horizonrl eval --model M --env FAMILY --split S [--limit N] [--max-turns T] --out DIR
    horizonrl train CONFIG [dotted.key=value ...] [--dry-run]
    horizonrl sft|dpo|agentevol CONFIG [dotted.key=value ...]
    horizonrl view RUN_DIR
    horizonrl index build --corpus FILE --out DIR [--kind bm25|dense]
    horizonrl data make-search --seed S --out DIR
    horizonrl web-sites [--host H] [--port-base P]

Wherever a FAMILY is taken (serve, solve, eval --env, check-env) it may be a family name (built-in
or an installed plugin's), a `module:SPEC` reference, or an external family's JSON/YAML file
(`horizonrl.server.external`); `--plugin MODULE` imports a module that registers families first.
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


def json_object(text: str) -> dict[str, Any]:
    """An argparse type: a JSON object (`--env-kwargs`, `--expert-kwargs`)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r}")
    return value


def cmd_envs(args: argparse.Namespace) -> int:
    from horizonrl.envs.registry import PluginError, family_names, family_source, get_family

    rows: list[dict[str, Any]] = []
    for name in family_names():
        row: dict[str, Any] = {"family": name, "splits": {}, "categories": []}
        try:
            spec = get_family(name)
            row["splits"] = {split: len(ids) for split, ids in spec.splits().items()}
            row["categories"] = list(spec.categories)
        except (PluginError, ValueError, OSError) as exc:  # a broken plugin: one line, the rest still listed
            row["error"] = str(exc)
            print(f"horizonrl envs: {exc}", file=sys.stderr)
        row["source"] = family_source(name)
        rows.append(row)
    if args.json:
        print(json.dumps(rows))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="horizonrl environment families")
    for col in ("family", "splits", "categories", "source"):
        table.add_column(col)
    for row in rows:
        splits = ", ".join(f"{k}: {v}" for k, v in row["splits"].items()) or "BROKEN (see above)"
        table.add_row(row["family"], splits, ", ".join(row["categories"]), row["source"])
    Console().print(table)
    return 0


def _resolve_families(args: argparse.Namespace) -> None:
    """Load `--plugin` modules, then turn every FAMILY argument into the family's registered name."""
    from horizonrl.envs.registry import load_plugins

    load_plugins(args.plugin)
    if not (getattr(args, "family", None) or getattr(args, "env", None)):
        return
    from horizonrl.server.external import resolve_family

    try:
        if getattr(args, "family", None):
            args.family = resolve_family(args.family).name
        if getattr(args, "env", None):
            args.env = ",".join(resolve_family(f.strip()).name for f in args.env.split(",") if f.strip())
    except (KeyError, ValueError) as exc:  # unknown family, bad family file: one line
        raise SystemExit(f"horizonrl {args.command}: {exc.args[0] if exc.args else exc}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="horizonrl", description="Multi-turn RL for LLM agents.")
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module that registers families",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("envs", help="list environment families with split sizes, categories and sources")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser("check-env", help="run the conformance checker on a family, locally or over HTTP")
    p.add_argument("family", help="family name, module:SPEC, or an external family's JSON/YAML file")
    p.add_argument("--server", default=None, help="check the family's server at this URL")
    p.add_argument("--items", type=int, default=3, help="test items to check (default 3)")
    p.add_argument("--protocol", choices=("v1", "agentgym"), default=None, help="the server's routes (v1)")
    p.set_defaults(func=_handler("horizonrl.server.conformance:check_env_main"))

    p = sub.add_parser("new-env", help="scaffold a pip-installable package with a new environment family")
    p.add_argument("name", help="family name (a Python identifier, e.g. guess)")
    p.add_argument("--dir", default=None, help="where to create the package (default: ./horizonrl-NAME)")
    p.add_argument("--no-expert", action="store_true", help="leave out the scripted expert")
    p.set_defaults(func=_handler("horizonrl.envs.scaffold:new_env_main"))

    p = sub.add_parser("serve", help="serve one environment family over HTTP")
    p.add_argument("family")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=None, help="default: the family's port")
    p.add_argument("--max-sessions", type=int, default=None, help="cap on live sessions (429 past it)")
    p.add_argument("--idle-ttl", type=float, default=None, help="seconds before an idle session is closed")
    p.add_argument("--log-level", default="warning")
    p.add_argument(
        "--env-kwargs", type=json_object, default={}, help="JSON object passed to the family's env factory"
    )
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
    p.add_argument(
        "--detours",
        type=float,
        default=0.0,
        help="chance per turn of a wrong action first, then the expert's recovery (SFT weight 0 on it)",
    )
    p.add_argument(
        "--expert-kwargs",
        type=json_object,
        default={},
        help='JSON object passed to the family\'s expert factory (TextCraft: {"worked": true})',
    )
    p.set_defaults(func=_handler("horizonrl.eval.solve:solve_main"))

    p = sub.add_parser("eval", help="evaluate a model on environment families")
    p.add_argument("config", nargs="?", default=None, help="optional YAML eval config")
    p.add_argument("--model", default=None)
    p.add_argument("--backend", default=None, help="hf (default), vllm or openai")
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
        ("agentevol", "horizonrl.trainer.main:agentevol_main", "AgentEvol: imitate, explore, keep, learn"),
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

    p = sub.add_parser("web-sites", help="serve the web family's five sites in the foreground")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument(
        "--port-base",
        type=int,
        default=7770,
        help="site i gets port P+i (shopping, shopping_admin, reddit, gitlab, map); 0 = free ports",
    )
    p.set_defaults(func=_handler("horizonrl.envs.web.sites.runner:web_sites_main"))
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
    from horizonrl.envs.registry import PluginError

    try:
        if args.command not in ("envs", "new-env"):
            _resolve_families(args)
        else:
            from horizonrl.envs.registry import load_plugins

            load_plugins(args.plugin)
        return int(args.func(args) or 0)
    except PluginError as exc:
        print(f"horizonrl: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except EnvError as exc:  # a backend that cannot start (e.g. no Java): its message says what to do
        print(f"horizonrl: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
