"""Entry points of the training subcommands (`horizonrl train|sft|dpo|agentevol CONFIG [k=v ...]`).

`horizonrl train` runs the workflow `algorithm.name` names: an RL algorithm (ppo, grpo, rloo,
reinforce_pp), sft, dpo or agentevol. `horizonrl sft|dpo|agentevol CONFIG` are the same as
`train` with `algorithm.name` set to that workflow.

An RL config with `sft.warmup_steps > 0` runs the warm-started recipe (`warm_started_rl`):
SFT on `data.train_files` into `<output_dir>/sft` (evaluating the initial model first when
`sft.eval_before`), RL from the SFT weights into `<output_dir>/rl`, each ending with a greedy eval,
then a table of the evals; each phase resumes on its own, so rerunning continues where it stopped.
The RL phase takes over the rollout engine the SFT phase's eval built (`TrainingRun.adopt_engine`):
one vLLM start for both phases.

`horizonrl train CONFIG --dry-run` prints the placement `resources:` implies and starts nothing.
With `resources.learner_world_size > 1` on one node, `horizonrl train` relaunches itself under
`torchrun --standalone --nproc_per_node N` (`horizonrl.distributed.launch`); a warm-started
recipe runs its SFT phase in this one process first (it is short, and SFT's loop is not
data-parallel), then the RL phase under torchrun. Under torchrun, rank 0 starts the env servers
(or Ray replicas) and tells the other ranks their URLs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from horizonrl.config import Config, ConfigError, load_config
from horizonrl.distributed.launch import relaunch_command, under_torchrun, world
from horizonrl.trainer.workflows import RunAborted, get_workflow

if TYPE_CHECKING:
    from horizonrl.trainer.engine_rollout import EngineRollout


def _load(args: argparse.Namespace, command: str, name: str | None = None) -> Config:
    overrides = list(args.overrides)
    if name is not None:
        overrides.append(f"algorithm.name={name}")
    try:
        return load_config(args.config, overrides)
    except (ConfigError, FileNotFoundError) as exc:
        raise SystemExit(f"horizonrl {command}: {exc}") from None


def train_main(args: argparse.Namespace) -> int:
    """`horizonrl train CONFIG [dotted.key=value ...] [--dry-run]`: the workflow `algorithm.name` names."""
    cfg = _load(args, "train")
    if getattr(args, "dry_run", False):
        from horizonrl.distributed.placement import format_placement

        print(format_placement(cfg, " ".join([args.config, *args.overrides])))
        return 0
    if cfg.resources.learner_world_size > 1 and not under_torchrun():
        return relaunch(args, cfg)
    return run(cfg)


def relaunch(args: argparse.Namespace, cfg: Config) -> int:
    """Run `horizonrl train` under torchrun on this node (after an in-process SFT warm start)."""
    r = cfg.resources
    if r.nodes > 1:
        from horizonrl.distributed.placement import commands

        raise SystemExit(
            f"horizonrl train: resources.nodes={r.nodes}: start the learner on every node yourself:\n  "
            + commands(cfg, args.config)[0]
        )
    overrides = list(args.overrides)
    warm_start = get_workflow(cfg.algorithm.name).warm_start and cfg.sft.warmup_steps > 0
    if warm_start:
        one = replace(cfg, resources=replace(r, learner_world_size=1))
        _check_inputs(one)
        with _run_servers(one) as urls:
            model_dir, engine = sft_phase(one, urls)
            if engine is not None:  # the RL phase runs in other processes
                engine.close()
        overrides += [f"{key}={value}" for key, value in rl_phase_overrides(cfg, model_dir).items()]
    cmd = relaunch_command(args.config, overrides, r.nproc_per_node)
    print(f"horizonrl train: {r.learner_world_size} learner processes: {' '.join(cmd[1:])}", flush=True)
    code = subprocess.call(cmd)
    if code != 0:
        raise SystemExit(f"horizonrl train: torchrun exited with code {code} ({cfg.trainer.output_dir})")
    if warm_start:
        write_summary(cfg)
    return 0


def sft_main(args: argparse.Namespace) -> int:
    return run(_load(args, "sft", "sft"))


def dpo_main(args: argparse.Namespace) -> int:
    return run(_load(args, "dpo", "dpo"))


def agentevol_main(args: argparse.Namespace) -> int:
    return run(_load(args, "agentevol", "agentevol"))


def _check_inputs(cfg: Config) -> None:
    """Trajectory files where the workflow reads them (expert demos made when missing)."""
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


@contextmanager
def _run_servers(cfg: Config) -> Iterator[dict[str, str]]:
    """The run's env servers; under torchrun rank 0 starts them and the other ranks get the URLs."""
    from horizonrl.trainer.servers import env_servers as local_servers

    env_servers = local_servers
    if cfg.resources.ray is not None:
        from horizonrl.distributed.ray_envs import ray_env_servers

        env_servers = ray_env_servers
    w = world()
    if w.size == 1:
        with env_servers(cfg) as urls:
            yield urls
        return
    import torch.distributed as dist

    from horizonrl.distributed.launch import init_process_group
    from horizonrl.trainer.run import device_kind

    init_process_group(device_kind(cfg))
    if w.is_main:
        with env_servers(cfg) as urls:
            dist.broadcast_object_list([urls], src=0)
            yield urls
            dist.barrier()  # the others are done with the servers
        return
    box: list[dict[str, str] | None] = [None]
    dist.broadcast_object_list(box, src=0)
    assert box[0] is not None
    yield box[0]
    dist.barrier()


def run(cfg: Config) -> int:
    """Run the workflow of `cfg` (env servers started when `env.launch`), then say where it went."""
    from horizonrl.trainer.families import resolve_config_families

    cfg = resolve_config_families(cfg)
    name = cfg.algorithm.name
    workflow = get_workflow(name)
    warm_start = workflow.warm_start and cfg.sft.warmup_steps > 0
    if world().size > 1 and (warm_start or not workflow.data_parallel):
        raise SystemExit(
            f"horizonrl {name}: {'the SFT warm start' if warm_start else name} runs in one process; under "
            "torchrun only RL trains data-parallel (`horizonrl train` runs a warm start's SFT phase "
            "first, then relaunches the RL phase under torchrun)"
        )
    _check_inputs(cfg)
    try:
        with _run_servers(cfg) as urls:
            if warm_start:
                warm_started_rl(cfg, urls)
            else:
                fit_and_close(workflow.trainer_class()(cfg, env_urls=urls))
    except RunAborted as exc:
        raise SystemExit(f"horizonrl {name}: stopped at {cfg.trainer.output_dir}: {exc}") from None
    if world().is_main:
        print(f"horizonrl: run written to {cfg.trainer.output_dir}", flush=True)
    return 0


def fit_and_close(trainer: Any) -> None:
    """`trainer.fit()`, then free what a `TrainingRun` built (its vLLM engine, Ray workers) even when
    the run stops early; a registered workflow's own class with only `fit` is just fitted."""
    from horizonrl.trainer.run import TrainingRun

    try:
        trainer.fit()
    finally:
        if isinstance(trainer, TrainingRun):
            trainer.close()


def warm_started_rl(cfg: Config, env_urls: dict[str, str]) -> None:
    """SFT (`sft.warmup_steps` steps on `data.train_files`), then RL from its weights, then the table."""
    from horizonrl.trainer.rl import RLTrainer

    model_dir, engine = sft_phase(cfg, env_urls)
    adopted = False
    try:
        rl_cfg = load_config_with(cfg, rl_phase_overrides(cfg, model_dir))
        print(
            f"horizonrl: phase 2/2: {cfg.algorithm.name} from {model_dir} -> {rl_cfg.trainer.output_dir}",
            flush=True,
        )
        with RLTrainer(rl_cfg, env_urls=env_urls) as trainer:
            if engine is not None:  # the SFT phase's eval engine (e.g. vLLM): no second start
                trainer.adopt_engine(engine)
                adopted = True
            trainer.fit()
    finally:
        if engine is not None and not adopted:
            engine.close()
    write_summary(cfg)


def load_config_with(cfg: Config, overrides: dict[str, str]) -> Config:
    """`cfg` with the RL phase's settings (the same values `rl_phase_overrides` passes to torchrun)."""
    return replace(
        cfg,
        model=replace(cfg.model, path=overrides["model.path"]),
        data=replace(cfg.data, train_files=[]),
        sft=replace(cfg.sft, warmup_steps=0),
        trainer=replace(cfg.trainer, output_dir=overrides["trainer.output_dir"]),
    )


def rl_phase_overrides(cfg: Config, model_dir: Path) -> dict[str, str]:
    """The RL phase of a warm start: from the SFT weights, into `<output_dir>/rl`."""
    return {
        "model.path": str(model_dir),
        "data.train_files": "[]",
        "sft.warmup_steps": "0",
        "trainer.output_dir": str(Path(cfg.trainer.output_dir) / "rl"),
    }


def sft_phase(cfg: Config, env_urls: dict[str, str]) -> tuple[Path, EngineRollout | None]:
    """Phase 1 of a warm start: SFT into `<output_dir>/sft`; returns its final model folder and the
    rollout engine its evals built (None when they did not run), for the RL phase to take over."""
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
            max_seconds=None,  # the RL phase's budget; this phase has sft.warmup_steps (and sft.max_seconds)
            lr=cfg.sft.lr or t.lr,
            save_every=0,
        ),
    )
    print(f"horizonrl: phase 1/2: SFT, {cfg.sft.warmup_steps} steps -> {out / 'sft'}", flush=True)
    with SFTTrainer(sft_cfg, env_urls=env_urls) as sft:
        sft.fit()
        engine = sft.release_engine()
    model_dir: Path = sft.final_model_dir()
    return model_dir, engine


def write_summary(cfg: Config) -> None:
    """`<output_dir>/summary.md`: the warm start's evals (zero-shot, after SFT, after SFT + RL)."""
    out = Path(cfg.trainer.output_dir)
    rl_report = out / "rl" / "eval" / "final" / "report.json"
    steps = cfg.trainer.total_steps  # fewer when trainer.max_seconds ended the RL phase first
    if rl_report.exists():
        steps = json.loads(rl_report.read_text()).get("step", steps)
    table = summary_table(
        [
            ("zero-shot", out / "sft" / "eval" / "initial" / "report.json"),
            (f"after SFT ({cfg.sft.warmup_steps} steps)", out / "sft" / "eval" / "final" / "report.json"),
            (f"after SFT + {cfg.algorithm.name} ({steps} steps)", rl_report),
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
