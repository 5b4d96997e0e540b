"""Entry points of the training subcommands (`horizonrl train|sft|dpo|agentevol CONFIG [k=v ...]`).

`horizonrl train` runs the workflow `algorithm.name` names: an RL algorithm (ppo, grpo, rloo,
reinforce_pp), sft, dpo or agentevol. `horizonrl sft|dpo|agentevol CONFIG` are the same as
`train` with `algorithm.name` set to that workflow.

An RL config with `sft.warmup_steps > 0` runs the warm-started recipe (`warm_started_rl`):
SFT on `data.train_files` into `<output_dir>/sft` (evaluating the initial model first when
`sft.eval_before`), RL from the SFT weights into `<output_dir>/rl`, each ending with a greedy eval,
then a table of the evals; each phase resumes on its own, so rerunning continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from horizonrl.config import Config, ConfigError, load_config
from horizonrl.trainer.workflows import RunAborted, get_workflow


def _load(args: argparse.Namespace, command: str, name: str | None = None) -> Config:
    overrides = list(args.overrides)
    if name is not None:
        overrides.append(f"algorithm.name={name}")
    try:
        return load_config(args.config, overrides)
    except (ConfigError, FileNotFoundError) as exc:
        raise SystemExit(f"horizonrl {command}: {exc}") from None


def train_main(args: argparse.Namespace) -> int:
    """`horizonrl train CONFIG [dotted.key=value ...]`: the workflow `algorithm.name` names."""
    return run(_load(args, "train"))


def sft_main(args: argparse.Namespace) -> int:
    return run(_load(args, "sft", "sft"))


def dpo_main(args: argparse.Namespace) -> int:
    return run(_load(args, "dpo", "dpo"))


def agentevol_main(args: argparse.Namespace) -> int:
    return run(_load(args, "agentevol", "agentevol"))


def run(cfg: Config) -> int:
    """Run the workflow of `cfg` (env servers started when `env.launch`), then say where it went."""
    from horizonrl.trainer.families import resolve_config_families
    from horizonrl.trainer.servers import env_servers

    cfg = resolve_config_families(cfg)
    name = cfg.algorithm.name
    workflow = get_workflow(name)
    warm_start = workflow.warm_start and cfg.sft.warmup_steps > 0
    if workflow.needs_train_files and not cfg.data.train_files:
        raise SystemExit(f"horizonrl {name}: set data.train_files=[FILE.jsonl, ...] (trajectory files)")
    reads_trajectories = workflow.reads_trajectories or warm_start
    if reads_trajectories:  # missing trajectory files: expert demos, or a SystemExit saying how
        from horizonrl.trainer.demos import ensure_demos

        ensure_demos(cfg)
    jsonl = [f for f in cfg.data.train_files if str(f).endswith(".jsonl")]
    if jsonl and not reads_trajectories:
        raise SystemExit(
            f"horizonrl train: data.train_files {jsonl} look like trajectory files, which only SFT "
            "reads (set sft.warmup_steps > 0 for a warm start); plain RL reads Data-ID JSON item "
            "files, or set data.train_files=[] to use the families' splits"
        )
    try:
        with env_servers(cfg) as urls:
            if warm_start:
                warm_started_rl(cfg, urls)
            else:
                workflow.trainer_class()(cfg, env_urls=urls).fit()
    except RunAborted as exc:
        raise SystemExit(f"horizonrl {name}: stopped at {cfg.trainer.output_dir}: {exc}") from None
    print(f"horizonrl: run written to {cfg.trainer.output_dir}", flush=True)
    return 0


def warm_started_rl(cfg: Config, env_urls: dict[str, str]) -> None:
    """SFT (`sft.warmup_steps` steps on `data.train_files`), then RL from its weights, then the table."""
    from horizonrl.trainer.rl import RLTrainer
    from horizonrl.trainer.sft import SFTTrainer

    if not cfg.data.train_files:
        raise SystemExit("horizonrl train: sft.warmup_steps needs data.train_files (expert demo JSONL)")
    if cfg.model.lora.enabled:
        raise SystemExit(
            "horizonrl train: the SFT warm start trains all weights; set model.lora.enabled=false"
        )
    out = Path(cfg.trainer.output_dir)
    t = cfg.trainer
    sft_cfg = replace(
        cfg,
        algorithm=replace(cfg.algorithm, name="sft"),
        trainer=replace(
            t,
            output_dir=str(out / "sft"),
            total_steps=cfg.sft.warmup_steps,
            lr=cfg.sft.lr or t.lr,
            save_every=0,
        ),
    )
    print(f"horizonrl: phase 1/2: SFT, {cfg.sft.warmup_steps} steps -> {out / 'sft'}", flush=True)
    sft = SFTTrainer(sft_cfg, env_urls=env_urls)
    sft.fit()
    model_dir = sft.final_model_dir()
    del sft
    rl_cfg = replace(
        cfg,
        model=replace(cfg.model, path=str(model_dir)),
        data=replace(cfg.data, train_files=[]),
        sft=replace(cfg.sft, warmup_steps=0),
        trainer=replace(t, output_dir=str(out / "rl")),
    )
    print(f"horizonrl: phase 2/2: {cfg.algorithm.name} from {model_dir} -> {out / 'rl'}", flush=True)
    RLTrainer(rl_cfg, env_urls=env_urls).fit()
    table = summary_table(
        [
            ("zero-shot", out / "sft" / "eval" / "initial" / "report.json"),
            (f"after SFT ({cfg.sft.warmup_steps} steps)", out / "sft" / "eval" / "final" / "report.json"),
            (
                f"after SFT + {cfg.algorithm.name} ({t.total_steps} steps)",
                out / "rl" / "eval" / "final" / "report.json",
            ),
        ]
    )
    (out / "summary.md").write_text(table + "\n")
    print(table, flush=True)


def summary_table(rows: list[tuple[str, Path]]) -> str:
    """A Markdown table of eval reports (`report.json` of a run's greedy eval), one row each."""
    reports = [(label, json.loads(p.read_text())) for label, p in rows if p.exists()]
    if not reports:
        return "(no eval reports)"
    cats = list(dict.fromkeys(c for _, r in reports for c, v in r["by_category"].items() if v["n_items"]))
    lines = [
        "| model | success | " + " | ".join(cats) + " | items |",
        "|---|---|" + "---|" * len(cats) + "---|",
    ]
    for label, r in reports:
        by = [f"{r['by_category'].get(c, {}).get('success_rate', 0.0):.1%}" for c in cats]
        lines.append(f"| {label} | {r['success_rate']:.1%} | " + " | ".join(by) + f" | {r['n_items']} |")
    return "\n".join(lines)
