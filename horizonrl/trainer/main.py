"""Entry points of the training subcommands (`horizonrl train|sft|dpo|agentevol CONFIG [k=v ...]`)."""

from __future__ import annotations

import argparse

from horizonrl.config import ConfigError, load_config

RL_ALGORITHMS = ("ppo", "grpo", "rloo", "reinforce_pp")


def train_main(args: argparse.Namespace) -> int:
    """`horizonrl train CONFIG [dotted.key=value ...]`: the workflow `algorithm.name` names."""
    try:
        cfg = load_config(args.config, args.overrides)
    except (ConfigError, FileNotFoundError) as exc:
        raise SystemExit(f"horizonrl train: {exc}") from None
    if cfg.algorithm.name not in RL_ALGORITHMS:
        return {"sft": sft_main, "dpo": dpo_main, "agentevol": agentevol_main}[cfg.algorithm.name](args)
    from horizonrl.trainer.rl import RLTrainer
    from horizonrl.trainer.servers import env_servers

    with env_servers(cfg) as urls:
        trainer = RLTrainer(cfg, env_urls=urls)
        trainer.fit()
    print(f"horizonrl: run written to {cfg.trainer.output_dir}", flush=True)
    return 0


def _not_yet(name: str) -> int:
    raise SystemExit(f"horizonrl {name}: not implemented yet (planned: SFT / DPO / AgentEvol trainers)")


def sft_main(args: argparse.Namespace) -> int:
    return _not_yet("sft")


def dpo_main(args: argparse.Namespace) -> int:
    return _not_yet("dpo")


def agentevol_main(args: argparse.Namespace) -> int:
    return _not_yet("agentevol")
