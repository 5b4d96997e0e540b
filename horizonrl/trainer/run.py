"""What every training workflow shares: run directory, learner, metrics, checkpoints, greedy eval.

`TrainingRun` is the base of `RLTrainer`, `SupervisedRun` (SFT, DPO) and `AgentEvolTrainer`:

- `__init__` seeds torch, builds the `Learner`, writes `<run>/config.yaml`, opens the `Monitor`;
- `resume()` loads the checkpoint `trainer.resume` selects and drops later metric lines;
  subclasses call it at the end of their `__init__`, once their own state exists, and keep that
  state in `trainer_state()` / `load_trainer_state()`;
- `save()` writes checkpoint `step_N` (models, optimizers, `trainer_state()`, tokenizer);
- `evaluate(name)` plays the eval split into `<run>/<name>/` as `horizonrl eval` would (`evaluate_policy`);
  `evaluate(name, validation=True)` (the periodic eval with `data.val_fraction > 0`) plays the
  held-out validation items instead and keeps `checkpoints/best`, the model of the step with the
  highest validation `eval/success` (ties: the earlier step), logged as `eval/best_step` /
  `eval/best_success` and said on the console; `horizonrl eval --model RUN_DIR` evaluates it;
- `repeat_eval(name)` records the eval just made (`last_eval`) under another name, for weights
  that have not changed since (RL's final eval right after the last step's).

Under torchrun (`resources.learner_world_size > 1`) every rank builds a `TrainingRun`: the learner
is data-parallel, the rollout is split over the ranks (`sharded_rollout`), and only rank 0 writes
the run directory (config, metrics, trajectories, reports, console lines); checkpoints are
written by all ranks together (`checkpoint`).
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

import torch

from horizonrl.config import Config, LoggingConfig, to_yaml
from horizonrl.distributed.launch import init_process_group, threads_per_rank, under_torchrun, world
from horizonrl.distributed.parallel import SingleProcess, make_parallel
from horizonrl.eval.report import combine, write_report
from horizonrl.rollout.trajectory import Trajectory, write_jsonl
from horizonrl.trainer.checkpoint import (
    load_checkpoint,
    read_best,
    resolve_resume,
    save_best,
    save_checkpoint,
)
from horizonrl.trainer.engine_rollout import EngineRollout
from horizonrl.trainer.episodes import Episode, Rollout
from horizonrl.trainer.learner import Learner
from horizonrl.trainer.monitor import Monitor
from horizonrl.trainer.sharded_rollout import ShardedRollout


def device_kind(cfg: Config) -> str:
    """`cuda` or `cpu`: `trainer.device`, with `auto` meaning cuda where there is one."""
    if cfg.trainer.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return cfg.trainer.device


def setup_torch(cfg: Config) -> torch.device:
    """Threads, determinism and seeds from `cfg.trainer`; returns the device to train on. Under
    torchrun it joins the process group and takes this rank's GPU (or share of the CPU threads)."""
    t = cfg.trainer
    kind = device_kind(cfg)
    w = world()
    if w.size > 1 and under_torchrun():
        init_process_group(kind)
    torch.set_num_threads(
        threads_per_rank(t.num_threads, w.local_size, kind) if w.size > 1 else t.num_threads
    )
    if t.deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
    random.seed(t.seed)
    torch.manual_seed(t.seed)
    if kind == "cuda" and w.size > 1:
        return torch.device("cuda", w.local_rank)
    return torch.device(kind)


class SilentMonitor(Monitor):
    """The monitor of a rank other than 0: nothing written, nothing printed."""

    def truncate_after(self, step: int) -> None:
        pass

    def log(
        self, step: int, metrics: dict[str, float], histograms: dict[str, list[int]] | None = None
    ) -> None:
        pass


def config_dict(cfg: Config) -> dict[str, Any]:
    """The resolved config as plain JSON-able containers (for the monitor's hyper-parameters)."""
    from omegaconf import OmegaConf

    out = OmegaConf.to_container(OmegaConf.structured(cfg))
    assert isinstance(out, dict)
    result: dict[str, Any] = json.loads(json.dumps({str(k): v for k, v in out.items()}))
    return result


def evaluate_policy(
    cfg: Config, rollout: Rollout, out: Path, step: int, *, write: bool = True, validation: bool = False
) -> dict[str, Any]:
    """Play the `cfg.eval` items; writes `out/report.json`, `out/report.md`, `out/trajectories.jsonl`.
    With `validation`, the held-out training items of `data.val_fraction` instead of `eval.split`
    (with `eval.categories` and `eval.limit` per family; the report's split is `val`).

    The rules and the report are `horizonrl eval`'s: each family's eval turn cap unless
    `eval.max_turns` is given, every item reset with `eval.seed`, the engine built from `cfg.eval`
    (`engine_rollout.engine_config`), the report `eval_summary` per family combined; plus `step`.
    So `horizonrl eval --model <checkpoint>/model` with the same settings gives the same report.
    With `write=False` (ranks other than 0) the report is built but no file is written.
    """
    from horizonrl.envs.core import parse_item_id
    from horizonrl.envs.registry import get_family
    from horizonrl.eval.metrics import eval_summary
    from horizonrl.trainer.data import load_items, validation_items

    e = cfg.eval
    families = e.families or cfg.data.families
    split = "val" if validation else e.split
    if validation:
        items = _validation_subset(cfg, validation_items(cfg.data))
    else:
        items = load_items(families, e.split, categories=e.categories, limit=e.limit)
    episodes = [
        Episode(item, group_id=g, sample_index=k, seed=e.seed, max_turns=e.turn_cap(parse_item_id(item)[0]))
        for g, item in enumerate(items)
        for k in range(e.n)
    ]
    start = time.perf_counter()
    trajectories = rollout(episodes, step=step, greedy=True)
    wall = time.perf_counter() - start
    if write:
        write_jsonl(out / "trajectories.jsonl", trajectories)
    by_family: dict[str, list[Trajectory]] = {parse_item_id(i)[0]: [] for i in items}
    for traj in trajectories:
        by_family[parse_item_id(traj.item_id)[0]].append(traj)
    blocks = {f: eval_summary(trajs, get_family(f).categories) for f, trajs in by_family.items() if trajs}
    settings = {k: v for k, v in config_dict(cfg)["eval"].items() if k not in ("every", "at_end")}
    settings["strategy"] = cfg.agent.strategy
    report = combine(blocks, model=cfg.model.path, split=split, k=e.n, settings=settings)
    tokens = sum(sum(t.loss_mask) for t in trajectories)
    report["step"] = step
    report["timing"] = {
        "wall_s": round(wall, 1),
        "sampled_tokens": tokens,
        "tokens_per_s": round(tokens / max(wall, 1e-9), 1),
    }
    if write:
        write_report(report, out)
    return report


def _validation_subset(cfg: Config, items: list[str]) -> list[str]:
    """The validation items the eval plays: `eval.categories` kept, the first `eval.limit` per family."""
    from horizonrl.envs.core import parse_item_id
    from horizonrl.envs.registry import family_of

    e, kept, per_family = cfg.eval, [], dict[str, int]()
    for item in items:
        family = parse_item_id(item)[0]
        if e.categories and family_of(item).category_of(item) not in e.categories:
            continue
        if e.limit is not None and per_family.get(family, 0) >= e.limit:
            continue
        per_family[family] = per_family.get(family, 0) + 1
        kept.append(item)
    if not kept:
        raise ValueError(
            f"no validation items: data.val_fraction={cfg.data.val_fraction} held out none of categories "
            f"{e.categories} (eval.categories)"
        )
    return kept


class TrainingRun:
    """The run-loop pieces every workflow shares (see the module docstring)."""

    kind = "train"
    """The workflow's name in console lines and in its checkpoints' trainer state."""

    def __init__(
        self, cfg: Config, *, rollout: Rollout | None = None, env_urls: dict[str, str] | None = None
    ) -> None:
        self.device = setup_torch(cfg)
        self.parallel: SingleProcess = make_parallel(cfg.resources.strategy, self.device, bf16=cfg.model.bf16)
        self.is_main = self.parallel.world.is_main
        """Rank 0 (or the only process): the one that writes the run directory."""
        if not self.is_main:  # quiet: rank 0 logs for everyone
            quiet = LoggingConfig(tensorboard=False, save_trajectories=False, console=False)
            cfg = replace(cfg, logging=quiet)
        self.cfg = cfg
        self.env_urls = dict(env_urls or {})
        """Family -> env server URL; other families run in-process."""
        self.run_dir = Path(cfg.trainer.output_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.learner = Learner(cfg, self.device, self.parallel)
        self.step = 0
        """Steps completed; checkpoint `step_N` holds the state after N steps."""
        self._rollout = rollout
        self._given_rollout = rollout
        """A rollout given at construction belongs to the caller; one built here is closed by `close`."""
        self.best: dict[str, Any] | None = None
        """The best checkpoint's record (`checkpoints/best/best.json`), read by `resume`."""
        self.last_eval: tuple[str, dict[str, Any]] | None = None
        """The name and report of the last test-split eval this process made (`repeat_eval`)."""
        if self.is_main:
            (self.run_dir / "config.yaml").write_text(to_yaml(cfg))
            self.monitor = Monitor(self.run_dir, cfg.logging, config_dict(cfg))
        else:
            self.monitor = SilentMonitor(self.run_dir, cfg.logging)

    def close(self) -> None:
        """Free the rollout this run built (`rollout()`): the vLLM engine's process, the Ray rollout
        workers, the `hf` backend's caches. `horizonrl train` calls it after `fit()`; as a context
        manager (`with Trainer(cfg) as run: run.fit()`) the run closes on exit. Without it, every run
        of one process (a protocol's arms, a warm start's two phases) kept its engine alive."""
        built = self._rollout.inner if isinstance(self._rollout, ShardedRollout) else self._rollout
        if built is not None and built is not self._given_rollout and isinstance(built, EngineRollout):
            built.close()
        self._rollout = self._given_rollout

    def release_engine(self) -> EngineRollout | None:
        """The rollout engine this run built, handed over to a later run of this process
        (`adopt_engine`), which closes it; None when it built none. A warm start's RL phase takes
        over its SFT phase's engine this way: one vLLM start instead of two (~30 s on a CPU)."""
        built = self._rollout
        if built is self._given_rollout or not isinstance(built, EngineRollout):
            return None
        self._rollout = self._given_rollout
        return built

    def adopt_engine(self, engine: EngineRollout) -> None:
        """Roll out and eval with `engine` (`release_engine` of an earlier run of this process),
        from this run's learner's weights on; this run closes it. The engine must have been built
        for the same `rollout` and `resources` settings."""
        if self._rollout is not None:
            raise RuntimeError("adopt_engine: this run has a rollout already")
        for section in ("rollout", "resources"):
            if getattr(engine.cfg, section) != getattr(self.cfg, section):
                raise ValueError(f"adopt_engine: the engine was built for other `{section}` settings")
        engine.retarget(self.cfg, self.learner.sampling_model(), self.env_urls)
        self._rollout = engine

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the time budget ------------------------------------------------------------------
    trained_seconds: float = 0.0
    """Seconds the training steps took so far (across resumes: subclasses save it in their trainer
    state), for `time_budget`."""

    def time_budget(self) -> float | None:
        """Seconds of training steps the run may take (None: steps only): `trainer.max_seconds`."""
        return self.cfg.trainer.max_seconds

    def out_of_time(self) -> bool:
        """The steps have used up `time_budget()`: one more step, at the mean step time so far, would
        end further past the budget than stopping now ends short of it (the first step always runs).
        Under torchrun rank 0 decides for all: each rank times its own steps, and a rank that stopped
        alone would leave the others waiting in the next step's collectives."""
        budget = self.time_budget()
        if budget is None or self.step == 0:
            return False
        mean_step = self.trained_seconds / self.step
        return bool(self.parallel.broadcast_object(self.trained_seconds + mean_step / 2 >= budget))

    def say_out_of_time(self) -> None:
        """After the loop: name the budget when it, not `trainer.total_steps`, ended the steps."""
        if self.step < self.cfg.trainer.total_steps and self.out_of_time():
            self.say(
                f"the time budget of {self.time_budget():g} s of steps is used up after {self.step} steps"
            )

    # --- state of the subclass, saved with every checkpoint -------------------------------
    def trainer_state(self) -> dict[str, Any]:
        return {}

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        pass

    # --- checkpoints ---------------------------------------------------------------------
    def resume(self) -> None:
        """Continue from the checkpoint `trainer.resume` selects (if any); drop later metric lines."""
        checkpoint = resolve_resume(self.cfg.trainer.resume, self.run_dir)
        if checkpoint is not None:
            state = load_checkpoint(
                checkpoint,
                models=self.learner.models(),
                optimizers=self.learner.optimizers(),
                parallel=self.parallel,
            )
            self.step = int(state["step"])
            self.load_trainer_state(state)
            self.say(f"resumed from {checkpoint} at step {self.step}")
        self.monitor.truncate_after(self.step)
        self.best = read_best(self.run_dir)  # every rank reads it here, before anyone rewrites it
        if self.best is not None and self.best["step"] > self.step:  # from steps to be redone
            self.best = None
            if self.is_main:
                shutil.rmtree(self.run_dir / "checkpoints" / "best")

    def save(self) -> Path:
        return save_checkpoint(
            self.run_dir,
            self.step,
            models=self.learner.models(),
            optimizers=self.learner.optimizers(),
            trainer_state={"kind": self.kind, **self.trainer_state()},
            tokenizer=self.learner.tokenizer,
            keep_last=self.cfg.trainer.keep_last,
            parallel=self.parallel,
            plain_model=self.learner.sampling_model(),
        )

    def final_model_dir(self) -> Path:
        return self.run_dir / "checkpoints" / f"step_{self.step}" / "model"

    # --- rollouts and eval ---------------------------------------------------------------
    def rollout(self) -> Rollout:
        """The rollout given at construction, else the engine over the learner's actor (built once)."""
        if self._rollout is None:
            learner = self.learner
            self._rollout = EngineRollout(
                self.cfg, learner.sampling_model(), learner.tokenizer, self.env_urls
            )
        if self.parallel.lockstep and not isinstance(self._rollout, ShardedRollout):
            self._rollout = ShardedRollout(self._rollout, self.parallel, self.learner.refresh_sampling_model)
        return self._rollout

    def sync_rollout(self) -> dict[str, float]:
        """Give the rollout's backend the learner's current weights (`EngineRollout.sync_weights`);
        the metrics it measured. A rollout given at construction keeps its own weights."""
        rollout = self.rollout()
        return rollout.sync_weights() if isinstance(rollout, EngineRollout) else {}

    def evaluate(self, name: str, *, validation: bool = False) -> dict[str, float]:
        """Eval of `eval.split` (greedy by default) into `<run>/<name>/` (`evaluate_policy`); with
        `validation`, of the held-out validation items, keeping the best checkpoint."""
        split = "val" if validation else self.cfg.eval.split
        self.say(f"eval {name}: {split} split at temperature {self.cfg.eval.temperature:g}")
        report = evaluate_policy(
            self.cfg,
            self.rollout(),
            self.run_dir / name,
            self.step,
            write=self.is_main,
            validation=validation,
        )
        self.last_eval = None if validation else (name, report)
        return self.record_eval(name, report, validation=validation)

    def repeat_eval(self, name: str) -> dict[str, float]:
        """`name` as the eval just made (`last_eval`), without playing the items again: for weights,
        items and settings that have not changed since, it is the same eval. Its report and
        trajectories are written under `<run>/<name>/` too, and its metrics logged again."""
        assert self.last_eval is not None, "repeat_eval follows an evaluate of the test split"
        source, report = self.last_eval
        self.say(f"eval {name}: the weights {source} played; its report, not replayed")
        if self.is_main:
            write_report(report, self.run_dir / name)
            trajectories = "trajectories.jsonl"
            shutil.copyfile(self.run_dir / source / trajectories, self.run_dir / name / trajectories)
        return self.record_eval(name, report)

    def record_eval(self, name: str, report: dict[str, Any], *, validation: bool = False) -> dict[str, float]:
        """An eval report's metrics, logged at this step and said on the console; with `validation`,
        the best checkpoint kept (`keep_best`)."""
        metrics = {"eval/success": report["success_rate"], "eval/score": report["mean_score"]}
        if len(report["families"]) > 1:  # several families: each one's rates too (a chart line each)
            for family, block in report["families"].items():
                metrics[f"eval/success/{family}"] = block["success_rate"]
                metrics[f"eval/score/{family}"] = block["mean_score"]
        shown = ", ".join(f"{f} {b['success_rate']:.3f}" for f, b in report["families"].items())
        wall, n = report["timing"]["wall_s"], report["n_items"]
        self.say(f"eval {name}: success {report['success_rate']:.3f} ({shown}) on {n} items ({wall} s)")
        if validation:
            metrics |= self.keep_best(name, report["success_rate"])
        self.monitor.log(self.step, metrics)
        return metrics

    def keep_best(self, name: str, success: float) -> dict[str, float]:
        """Make this step's model `checkpoints/best` if its validation success beats the best so far
        (strictly: a tie keeps the earlier step; `resume` drops a best of steps it redoes). Returns
        the best's metrics."""
        best = self.best
        if best is None or success > best["success"]:
            best = self.best = {"step": self.step, "success": success, "eval": name}
            save_best(
                self.run_dir,
                best,
                model=self.learner.models()["model"],
                tokenizer=self.learner.tokenizer,
                parallel=self.parallel,
                plain_model=self.learner.sampling_model(),
            )
            self.say(
                f"best checkpoint: step {self.step} (validation success {success:.3f}) -> checkpoints/best"
            )
        else:
            self.say(f"best checkpoint stays step {best['step']} (validation success {best['success']:.3f})")
        return {"eval/best_step": float(best["step"]), "eval/best_success": float(best["success"])}

    # --- helpers -------------------------------------------------------------------------
    def due(self, every: int) -> bool:
        return every > 0 and self.step % every == 0

    def say(self, text: str) -> None:
        if self.cfg.logging.console and self.is_main:
            print(f"horizonrl {self.kind}: {text}", file=sys.stderr, flush=True)
