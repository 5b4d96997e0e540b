"""The learning protocol: every arm from one SFT checkpoint, several seeds, intervals and curves.

    python benchmarks/protocol.py --sft-model DIR --arms sft,sft-equal,grpo --seeds 0,1,2 \\
        --steps 4 --eval-limit 24 --out runs/protocol [dotted.key=value ...]
    python benchmarks/protocol.py --list-arms
    python benchmarks/protocol.py --out runs/protocol --report-only        # tables + plots again

Every arm starts from the same SFT checkpoint: `--sft-model DIR`, or one the protocol trains
first (`--sft-steps` SFT steps of the base config on the expert demos of every family in
`--families`, into `<out>/sft_base`). Each arm is a named list of config overrides on top of the
base config (`--config`, default the quickstart's) and the protocol's own settings (`base_overrides`);
the arms are the `ARMS` table below:

- `sft`: the SFT checkpoint as it is (evaluated once: a greedy eval of one fixed checkpoint does not
  depend on a training seed, so its spread over seeds is 0 by construction and its interval is over
  items only);
- `sft-equal`: the equal-compute baseline, SFT continued from the checkpoint on the same demos for
  as long as the `--budget-arm` (default `grpo`) RL phase of the same seed trained (the sum of its
  `time/step`: rollout, scoring and update; `sft.max_seconds`), so that arm must run first; also
  at a quarter of the SFT lr (`sft-equal-low-lr`: a long SFT continued at its own lr can lose items);
- RL arms: GRPO (also at a quarter of its lr, and that with twice the items or the samples per
  step, or with DAPO's dynamic sampling: further batches until 4 groups are informative, or with
  the eval's fixed cap of 5 turns instead of the base schedule's 3, 4, 5, or both; at the
  protocol's lr with that cap, also sampling at temperature 1.0 instead of 0.8); GRPO +
  turn-level credit (GiGPO; also with advantages only mean-centred), + the invalid-action penalty;
  and the turn-cap arms on a horizon-demanding subset (TextCraft depth 2-3 for training):
  fixed-short, fixed-long, stepwise (also with the reward shaped by sub-goal progress,
  `algorithm.reward=shaped`, and that with mean-centred advantages) and adaptive caps over `--caps`
  (default 3,6,10). Arms whose feature is not in this checkout stop the protocol
  before anything runs, naming the arm and the config error.

Every arm ends with the same greedy eval (`eval:` of the base config, with `--eval-limit` items per
family; None = all: the 70 depth 1-2 TextCraft test items, the 20 BabyAI GoTo/Pickup ones). Per arm
and family the report gives the mean success over seeds, its spread (min-max and std over seeds), a
two-way bootstrap 95% interval (items and seeds resampled, `protocol_stats`), per-category means,
and the difference to the equal-compute baseline with its paired interval. Written to
`<out>/protocol.md` and `<out>/protocol.json`, and the learning curves to `<out>/curves.png`
(`--results NAME` also copies them to `benchmarks/results/NAME.{md,json,png}`).

Layout and resuming: each arm x seed is a training run in `<out>/<arm>/seed_<s>/` (the `sft` arm in
`<out>/sft/`) with a `result.json` once its eval is done; a rerun skips every arm x seed that has
one, so the protocol can run in pieces (`--arms`, `--seeds`) and on another machine (copy `<out>`).
`--rl-seconds S` time-boxes the RL arms (`trainer.max_seconds`: each stops at `--steps` or once its
steps took S seconds; sft-equal still gets the seconds they took). An interrupted arm x seed
starts over (only the final checkpoint is saved, `trainer.save_every=0`); its optimizer state is
deleted once its result is written (`--keep-optimizer` keeps it).
With `--results NAME` the results are also archived in `benchmarks/results/NAME.runs.json`
(committed; `protocol_report`): a rerun under that NAME, on a fresh checkout with no run folders,
skips the archived arm x seeds, takes sft-equal's budget from them, and reports them with the new
ones. Each result records the SHA-256 of the starting checkpoint (`start_sha256`); an archive from
another checkpoint stops the protocol before anything runs. Each also records the `machine` its
seconds were measured on, and sft-equal refuses a budget measured on another machine; a finished
sft-equal is reused only under the `--budget-arm` it was timed against.
`horizonrl view <out>` shows the runs; the run list's "Compare selected runs" overlays any of
them (`#/compare?runs=grpo~seed_0,sft-equal~seed_0`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without install

from benchmarks import protocol_report  # noqa: E402
from benchmarks.protocol_report import (  # noqa: E402
    DEFAULT_BUDGET_ARM,
    archive_path,
    budget_arm_of,
    load_archive,
    load_results,
    run_key,
    write_report,
)
from benchmarks.protocol_scoreboard import write_scoreboard  # noqa: E402
from horizonrl.cli import json_object  # noqa: E402
from horizonrl.config import Config, ConfigError, load_config  # noqa: E402
from horizonrl.trainer.memory import release_memory  # noqa: E402

FAMILY_CATEGORIES = {"textcraft": ["depth 1", "depth 2"], "babyai": ["GoTo", "Pickup"]}
"""The protocol's train and eval categories per family (the issue's eval sets)."""
HORIZON = ("data.families=[textcraft]", "data.categories=[depth 2, depth 3]")
"""The cap arms train on the horizon-demanding TextCraft subset; their eval is everyone's."""
STEPWISE = (*HORIZON, "schedule.type=stepwise", "schedule.rounds=[{caps}]", "schedule.every={stage}")
"""The stepwise cap arms' settings (`{caps}` and `{stage}` filled by `arm_overrides`)."""
SHAPED_CENTRED = (*STEPWISE, "algorithm.reward=shaped", "algorithm.grpo_norm_by_std=false")
"""Stepwise caps, the reward shaped by sub-goal progress, advantages not divided by the std."""
BASE_SCHEDULE = ("schedule.type=stepwise", "schedule.rounds=[3,4,5]", "schedule.every=2")
"""The RL arms' turn caps unless an arm sets its own: the quickstart's schedule when the protocol's
runs were made (caps 3, 3, 4, 4, 5, 5 over 6 steps), pinned so that they stay comparable when the
quickstart's own schedule changes (session 8 cut it to 4 steps, caps [3, 4])."""
BASE_LR = "trainer.lr=2.0e-5"
"""The RL arms' lr unless an arm sets its own: the quickstart's when the protocol's runs were made,
pinned when the quickstart moved to the `grpo-low-lr` arm's 5e-6 (session 11)."""
PINNED = dict(o.split("=", 1) for o in (BASE_LR,))
"""Settings pinned after runs were archived: a result whose overrides lack one was made while the
base config had that value, so `run_settings` reads it as set."""
DEMO_LIMIT = {"babyai": 400}
"""Expert demos per family when the protocol makes them (the first N train items; BabyAI's first
400 hold 10 seeds of every level, 160 of them GoTo/Pickup). TextCraft: the whole train split."""


@dataclass(frozen=True)
class Arm:
    name: str
    kind: str
    """`eval` (the checkpoint as is), `sft` (continued SFT, equal compute) or `rl`."""
    overrides: tuple[str, ...]
    label: str
    needs: str = ""
    """The feature the arm needs, named when its config does not load."""


ARMS = {
    a.name: a
    for a in [
        Arm("sft", "eval", (), "SFT only"),
        Arm("sft-equal", "sft", (), "SFT continued, equal compute"),
        Arm(
            "sft-equal-low-lr",
            "sft",
            ("sft.lr=2.5e-5",),
            "SFT continued, equal compute, at a quarter of the SFT lr (2.5e-5)",
        ),
        Arm("grpo", "rl", (), "GRPO (base schedule)"),
        Arm(
            "grpo-turn",
            "rl",
            ("algorithm.adv_estimator=gigpo",),
            "GRPO + turn-level credit (GiGPO)",
            "algorithm.adv_estimator=gigpo (turn-level credit, issue 18)",
        ),
        Arm(
            "grpo-turn-centred",
            "rl",
            ("algorithm.adv_estimator=gigpo", "algorithm.grpo_norm_by_std=false"),
            "GiGPO, advantages mean-centred (not divided by the std)",
            "algorithm.adv_estimator=gigpo (turn-level credit, issue 18)",
        ),
        Arm("grpo-low-lr", "rl", ("trainer.lr=5.0e-6",), "GRPO at a quarter of the lr (5e-6)"),
        Arm(
            "grpo-low-lr-wide",
            "rl",
            ("trainer.lr=5.0e-6", "data.batch_size=8"),
            "GRPO at lr 5e-6, 8 items per step (twice the groups and compute)",
        ),
        Arm(
            "grpo-low-lr-n8",
            "rl",
            ("trainer.lr=5.0e-6", "rollout.n=8"),
            "GRPO at lr 5e-6, 8 samples per item (groups of 8: more groups with reward variance)",
        ),
        Arm(
            "grpo-low-lr-cap5",
            "rl",
            ("trainer.lr=5.0e-6", "schedule.type=fixed", "schedule.rounds=[5]"),
            "GRPO at lr 5e-6, a fixed cap of 5 turns (the eval's: depth-2 items fit from step 1)",
        ),
        Arm(
            "grpo-cap5",
            "rl",
            ("schedule.type=fixed", "schedule.rounds=[5]"),
            "GRPO at the protocol's lr 2e-5, the eval's fixed cap of 5 (from a long SFT, 5e-6 only held it)",
        ),
        Arm(
            "grpo-cap5-t1",
            "rl",
            ("schedule.type=fixed", "schedule.rounds=[5]", "rollout.temperature=1.0"),
            "GRPO at lr 2e-5, fixed cap 5, rollouts at temperature 1.0 (the long-SFT policy samples"
            " 0.002-0.06 nats a token at 0.8)",
        ),
        Arm(
            "grpo-cap5-t12",
            "rl",
            ("schedule.type=fixed", "schedule.rounds=[5]", "rollout.temperature=1.2"),
            "GRPO at lr 2e-5, fixed cap 5, rollouts at temperature 1.2 (the worked base's depth-2 groups"
            " differ 19% / 34% / 47% of the time at 0.8 / 1.0 / 1.2)",
        ),
        Arm(
            "grpo-cap10-t12",
            "rl",
            ("schedule.type=fixed", "schedule.rounds=[10]", "rollout.temperature=1.2"),
            "GRPO at lr 2e-5, fixed cap 10, rollouts at temperature 1.2 (room to recover from a rejected"
            " move: the expert itself needs all of the eval's 5 turns on 15 of the 70 test items, 6 on one)",
        ),
        Arm(
            "grpo-low-lr-n8-cap5",
            "rl",
            ("trainer.lr=5.0e-6", "rollout.n=8", "schedule.type=fixed", "schedule.rounds=[5]"),
            "GRPO at lr 5e-6, groups of 8, the eval's fixed cap of 5 (twice the samples of grpo-low-lr-cap5)",
        ),
        Arm(
            "grpo-low-lr-cap5-penalty",
            "rl",
            (
                "trainer.lr=5.0e-6",
                "schedule.type=fixed",
                "schedule.rounds=[5]",
                "algorithm.invalid_action_penalty=0.1",
            ),
            "GRPO at lr 5e-6, the eval's fixed cap of 5, invalid-action penalty 0.1"
            " (a group of failures still differs)",
            "algorithm.invalid_action_penalty (issue 18)",
        ),
        Arm(
            "grpo-dynamic",
            "rl",
            (
                "trainer.lr=5.0e-6",
                "algorithm.dynamic_sampling_groups=4",
                "algorithm.dynamic_sampling_max_batches=4",
            ),
            "GRPO at lr 5e-6, dynamic sampling (up to 4 batches a step until 4 groups are informative)",
            "algorithm.dynamic_sampling_groups (DAPO's dynamic sampling)",
        ),
        Arm(
            "grpo-dynamic-cap5",
            "rl",
            (
                "trainer.lr=5.0e-6",
                "algorithm.dynamic_sampling_groups=4",
                "algorithm.dynamic_sampling_max_batches=4",
                "schedule.type=fixed",
                "schedule.rounds=[5]",
            ),
            "GRPO at lr 5e-6, dynamic sampling, the eval's fixed cap of 5 (signal each step, no short caps)",
            "algorithm.dynamic_sampling_groups (DAPO's dynamic sampling)",
        ),
        Arm(
            "grpo-turn-centred-eps",
            "rl",
            ("algorithm.adv_estimator=gigpo", "algorithm.grpo_norm_by_std=false", "trainer.adam_eps=1.0e-5"),
            "GiGPO mean-centred, AdamW eps 1e-5 (faint gradients take small steps)",
            "trainer.adam_eps",
        ),
        Arm(
            "grpo-eps",
            "rl",
            ("trainer.adam_eps=1.0e-5",),
            "GRPO, AdamW eps 1e-5 (faint gradients take small steps)",
            "trainer.adam_eps",
        ),
        Arm(
            "grpo-penalty",
            "rl",
            ("algorithm.invalid_action_penalty=0.1",),
            "GRPO + invalid-action penalty 0.1",
            "algorithm.invalid_action_penalty (issue 18)",
        ),
        Arm("cap-short", "rl", (*HORIZON, "schedule.type=fixed", "schedule.rounds=[{short}]"), "fixed-short"),
        Arm("cap-long", "rl", (*HORIZON, "schedule.type=fixed", "schedule.rounds=[{long}]"), "fixed-long"),
        Arm(
            "cap-long-ctx",
            "rl",
            (*HORIZON, "schedule.type=fixed", "schedule.rounds=[{long}]", "agent.context.max_turns_kept=4"),
            "fixed-long, context: last 4 turns",
            "agent.context.max_turns_kept (bounded context, issue 18)",
        ),
        Arm(
            "cap-long-t12",
            "rl",
            (*HORIZON, "schedule.type=fixed", "schedule.rounds=[{long}]", "rollout.temperature=1.2"),
            "fixed-long, rollouts at temperature 1.2 (from a base that saw depth-3 demos)",
        ),
        Arm("cap-stepwise", "rl", STEPWISE, "stepwise caps"),
        Arm(
            "cap-stepwise-t12",
            "rl",
            (*STEPWISE, "rollout.temperature=1.2"),
            "stepwise caps, rollouts at temperature 1.2",
        ),
        Arm(
            "cap-stepwise-shaped",
            "rl",
            (*STEPWISE, "algorithm.reward=shaped"),
            "stepwise caps, reward shaped by sub-goal progress",
        ),
        Arm(
            "cap-stepwise-shaped-centred",
            "rl",
            SHAPED_CENTRED,
            "stepwise caps, shaped reward, advantages mean-centred (not divided by the std)",
        ),
        Arm(
            "cap-stepwise-shaped-centred-eps",
            "rl",
            (*SHAPED_CENTRED, "trainer.adam_eps=1.0e-5"),
            "stepwise caps, shaped reward, mean-centred, AdamW eps 1e-5",
            "trainer.adam_eps",
        ),
        Arm(
            "cap-adaptive",
            "rl",
            (
                *HORIZON,
                "schedule.type=adaptive",
                "schedule.rounds=[{caps}]",
                "schedule.every={stage}",
                "schedule.window={stage}",
            ),
            "adaptive caps",
        ),
    ]
}


def arm_overrides(arm: Arm, caps: list[int], steps: int) -> list[str]:
    """The arm's overrides with its placeholders filled: `{caps}`, `{short}`, `{long}`, and
    `{stage}` (steps per stage of a stepwise/adaptive schedule: a third of the steps, at least 1)."""
    fill = {
        "caps": ",".join(map(str, caps)),
        "short": str(caps[0]),
        "long": str(caps[-1]),
        "stage": str(max(1, steps // len(caps))),
    }
    return [o.format(**fill) for o in arm.overrides]


def base_overrides(args: argparse.Namespace, sft_model: str) -> list[str]:
    """The protocol's settings shared by every arm (the user's dotted overrides come last)."""
    fams = args.families
    cats = [c for f in fams for c in FAMILY_CATEGORIES.get(f, [])]
    return [
        f"model.path={sft_model}",
        "sft.warmup_steps=0",
        "sft.eval_before=false",
        "data.train_files=[]",
        f"data.families=[{', '.join(fams)}]",
        f"data.categories=[{', '.join(cats)}]",
        f"eval.families=[{', '.join(fams)}]",
        f"eval.categories=[{', '.join(cats)}]",
        f"eval.limit={args.eval_limit if args.eval_limit else 'null'}",
        "eval.at_end=true",
        f"eval.every={args.eval_every}",
        f"trainer.total_steps={args.steps}",
        *BASE_SCHEDULE,
        BASE_LR,
        "trainer.save_every=0",
        "logging.tensorboard=false",
        *args.overrides,
    ]


def demo_files(args: argparse.Namespace) -> list[str]:
    """Expert demos of each family (`<demos>/<family>_train.jsonl`), made when missing (with
    `--detours`: a wrong action and its rejection before some expert moves; with `--expert-kwargs`:
    the expert's variant); an existing file made otherwise stops the run (`check_demos`)."""
    from horizonrl.envs.registry import get_family
    from horizonrl.eval.solve import solve_split

    out = []
    for family in args.families:
        path = Path(args.demos) / f"{family}_train.jsonl"
        if path.exists():
            check_demos(path, args)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            print(f"[protocol] expert demos -> {path}", file=sys.stderr, flush=True)
            spec, limit = get_family(family), DEMO_LIMIT.get(family)
            solve_split(
                spec, "train", limit=limit, out=path, detours=args.detours, expert_kwargs=args.expert_kwargs
            )
        out.append(str(path))
    return out


def check_demos(path: Path, args: argparse.Namespace) -> None:
    """Stop the run when the demos at `path` were made otherwise than asked: detours where none
    were asked for, or none where they were; another expert variant (`meta["expert_kwargs"]`)."""
    from horizonrl.eval.solve import other_expert_variants
    from horizonrl.rollout.trajectory import iter_jsonl

    trajs = list(iter_jsonl(path))
    retry = "name another --demos folder (the protocol makes its demos there)"
    if bool(args.detours) != any(t.meta.get("detours") for t in trajs):
        held = "no detours" if args.detours else "detours"
        raise SystemExit(f"protocol: {path} holds {held} but --detours is {args.detours}; {retry}")
    if held_kwargs := other_expert_variants(trajs, args.expert_kwargs):
        raise SystemExit(
            f"protocol: {path} was written by the expert with kwargs {held_kwargs} "
            f"but --expert-kwargs is {json.dumps(args.expert_kwargs)}; {retry}"
        )


def sft_run_overrides(cfg: Config, demos: list[str]) -> list[str]:
    """An SFT run with the base config's SFT settings (lr, batch) on `demos`."""
    s = cfg.sft
    return [
        "algorithm.name=sft",
        f"data.train_files=[{', '.join(demos)}]",
        f"trainer.lr={s.lr or cfg.trainer.lr}",
    ]


def load(config: str, overrides: list[str], arm: str, needs: str = "") -> Config:
    try:
        return load_config(config, overrides)
    except (ConfigError, ValueError) as exc:
        hint = f"; it needs {needs}, which this checkout lacks" if needs else ""
        raise SystemExit(f"protocol: arm {arm!r} does not load{hint}: {exc}") from None


def run_training(cfg: Config) -> float:
    """Run the workflow of `cfg` in this process (`horizonrl train`); its wall seconds."""
    from horizonrl.trainer.main import run

    start = time.perf_counter()
    run(cfg)
    release_memory()  # the next arm runs in this process: hand back what this one freed
    return time.perf_counter() - start


def metric_rows(run: Path) -> list[dict[str, Any]]:
    path = run / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []


def step_seconds(run: Path) -> float:
    """Seconds of a run's training steps (the sum of `time/step`: what `sft.max_seconds` counts)."""
    return float(sum(r.get("time/step") or 0.0 for r in metric_rows(run)))


def eval_outcomes(run: Path) -> tuple[dict[str, float], dict[str, str]]:
    """Item id -> success (0/1) and item id -> category of a run's final eval."""
    from horizonrl.rollout.trajectory import read_jsonl

    trajs = read_jsonl(run / "eval" / "final" / "trajectories.jsonl")
    return {t.item_id: float(t.success) for t in trajs}, {t.item_id: t.category for t in trajs}


def record(run: Path, arm: Arm, seed: int | None, overrides: list[str], wall: float, extra: dict) -> dict:
    """Write `run/result.json`: the eval outcomes, step time, sampled tokens, curve and command."""
    items, cats = eval_outcomes(run)
    rows = metric_rows(run)
    result = {
        "arm": arm.name,
        "label": arm.label,
        "kind": arm.kind,
        "seed": seed,
        "items": items,
        "categories": cats,
        "step_seconds": step_seconds(run),
        "steps": sum(1 for r in rows if "time/step" in r),
        "sampled_tokens": sum(r.get("sampled_tokens/total", 0.0) for r in rows),
        "metrics": rows,
        "wall_s": round(wall, 1),
        "load_avg": round(os.getloadavg()[0], 2),
        "overrides": overrides,
        **extra,
    }
    (run / "result.json").write_text(json.dumps(result))
    return result


def drop_optimizer(run: Path) -> None:
    for path in (run / "checkpoints").glob("step_*/optimizer.pt"):
        path.unlink()


def train_sft_base(args: argparse.Namespace, demos: list[str]) -> str:
    """`<out>/sft_base`: `--sft-steps` SFT steps from the base model; its final model folder."""
    run = Path(args.out) / "sft_base"
    fams, cats = args.families, [c for f in args.families for c in FAMILY_CATEGORIES.get(f, [])]
    base = load_config(args.config, [])
    overrides = [
        *sft_run_overrides(base, demos),
        f"data.families=[{', '.join(fams)}]",
        f"data.categories=[{', '.join(cats)}]",
        f"trainer.total_steps={args.sft_steps}",
        "trainer.save_every=0",
        "eval.at_end=false",
        "logging.tensorboard=false",
        *args.overrides,
        f"trainer.output_dir={run}",
    ]
    model = run / "checkpoints" / f"step_{args.sft_steps}" / "model"
    if not model.exists():
        run_training(load(args.config, overrides, "sft_base"))
        drop_optimizer(run)
    return str(model)


def start_fingerprint(model: str) -> str:
    """SHA-256 of a checkpoint folder's files (names and bytes), or of the model name when it is
    not a folder (`tiny`, `default`): what every result records as `start_sha256`."""
    digest = hashlib.sha256()
    root = Path(model)
    if not root.is_dir():
        digest.update(f"name:{model}".encode())
        return digest.hexdigest()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


def machine() -> str:
    """What a run's seconds were measured on: the GPU, else the CPU model, its cores and widest
    vector ISA (equal compute is wall time, so a budget from another machine is not equal)."""
    try:
        import torch

        if torch.cuda.is_available():
            return f"GPU {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    model, flags = "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:  # not Linux
        pass
    isa = next((f for f in ("avx512f", "avx2", "neon") if f in flags), "")
    return f"{model} x{os.cpu_count()}{f' {isa}' if isa else ''}"


def budget_of(ref: dict[str, Any], arm: str, seed: int | None, here: str) -> float:
    """sft-equal's budget: the step seconds of the budget arm's result `ref` of the same seed,
    refused when `ref` was measured on another machine than `here`."""
    there = ref.get("machine")
    if there and there != here:
        raise SystemExit(
            f"protocol: {arm} seed {seed}'s budget ({ref['arm']} seed {seed}, {ref['step_seconds']:.0f} s) "
            f"was measured on {there}; this is {here}: run {ref['arm']} seed {seed} here first "
            "(another --out and --results NAME)"
        )
    return float(ref["step_seconds"])


PLACE_KEYS = ("model.path", "trainer.output_dir", "sft.max_seconds")
"""Overrides that say where a run is (the start checkpoint is compared by its SHA-256 instead)
or what the protocol derives (sft-equal's budget): not settings to compare when reusing a run."""


def run_settings(overrides: list[str]) -> dict[str, str]:
    """The settings a run was made with, as compared when its result is reused: the effective value
    of each override key (the last one wins), less `PLACE_KEYS`, demo files by file name; a
    `PINNED` key the overrides lack has its pinned value."""
    settings = dict(PINNED)
    for o in overrides:
        key, _, value = o.partition("=")
        if key in PLACE_KEYS:
            continue
        if key == "data.train_files":
            names = [Path(v.strip()).name for v in value.strip("[]").split(",") if v.strip()]
            value = f"[{', '.join(names)}]"
        settings[key] = value
    return settings


def check_reuse(result: dict[str, Any], overrides: list[str], where: str) -> None:
    """Stop when a finished result (`where`) was made with other settings than `overrides`: another
    `--steps`, `--caps`, override or arm definition would otherwise be reported as this one."""
    old, new = run_settings(result.get("overrides", [])), run_settings(overrides)
    if old != new:
        keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        diff = [f"{k}: {old.get(k, '(unset)')} -> {new.get(k, '(unset)')}" for k in keys]
        raise SystemExit(
            f"protocol: {where} was made with other settings ({'; '.join(diff)}): "
            "pass another --out and --results NAME for these"
        )


def check_budget_arm(
    result: dict[str, Any],
    budget_arm: str,
    out: Path,
    archive: dict[tuple[str, int | None], dict],
    where: str,
) -> None:
    """Stop when a finished sft-equal result (`where`) got its budget from another arm than
    `--budget-arm` (`budget_arm_of`, over the runs under `out` and in `archive` for a result that
    did not record it): it would be reported as equal compute to an arm it was not timed against."""
    found = {} if result.get("budget_arm") else load_results(out, archive=list(archive.values()))
    got = budget_arm_of(result, found)
    if got != budget_arm:
        raise SystemExit(
            f"protocol: {where} had the budget of {got} (seed {result.get('seed')}, "
            f"{result.get('budget_s', 0):.0f} s), not of --budget-arm {budget_arm}: "
            "pass another --out and --results NAME for these"
        )


def archived_runs(args: argparse.Namespace, start: str) -> dict[tuple[str, int | None], dict[str, Any]]:
    """The arm x seed results archived under `--results NAME` (none without it); stops when the
    archive's runs started from another checkpoint than `start`."""
    runs = load_archive(args.results)[1]
    other = sorted({str(r.get("start_sha256")) for r in runs} - {start})
    if other:
        raise SystemExit(
            f"protocol: {archive_path(args.results)} holds runs that started from another checkpoint "
            f"(sha256 {', '.join(o[:12] for o in other)}; this one is {start[:12]}): "
            "pass another --results NAME"
        )
    return {run_key(r): r for r in runs}


def run_protocol(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "commands.txt").open("a") as f:  # the report names every invocation that ran
        f.write(command_line(args) + "\n")
    needs_demos = args.sft_model is None or any(ARMS[a].kind == "sft" for a in args.arms)
    demos = demo_files(args) if needs_demos else []
    sft_model = args.sft_model or train_sft_base(args, demos)
    start = start_fingerprint(sft_model)
    archive = archived_runs(args, start)
    here = machine()
    base = base_overrides(args, sft_model)
    # seed-major (every arm of seed 0, then of seed 1, ...: a run cut short leaves whole seeds),
    # each arm x seed validated first: a missing feature stops the protocol before any compute
    order = [(ARMS[a], None) for a in args.arms if ARMS[a].kind == "eval"]
    order += [(ARMS[a], s) for s in args.seeds for a in args.arms if ARMS[a].kind != "eval"]
    plans = []
    for arm, seed in order:
        run = out / arm.name if seed is None else out / arm.name / f"seed_{seed}"
        overrides = [
            *base,
            *arm_overrides(arm, args.caps, args.steps),
            f"trainer.seed={seed or 0}",
            f"trainer.output_dir={run}",
        ]
        if arm.kind == "rl" and args.rl_seconds:
            overrides.append(f"trainer.max_seconds={args.rl_seconds:g}")
        if arm.kind == "sft":
            sft = sft_run_overrides(load(args.config, [*base, *arm.overrides], arm.name), demos)
            overrides = [*overrides, *sft, "trainer.total_steps=1000000", "sft.max_seconds=1"]
        load(args.config, overrides, arm.name, arm.needs)
        # a finished run (folder, else archive) is reused, and only when made with these settings
        reused, result, where = "", None, str(run)
        if (run / "result.json").exists():
            result, reused = json.loads((run / "result.json").read_text()), "done"
        elif (arm.name, seed) in archive:
            result, reused = archive[arm.name, seed], f"archived in {archive_path(args.results)}"
            where = f"{arm.name} seed {seed} in {archive_path(args.results)}"
        if result is not None:
            check_reuse(result, overrides, where)
            if arm.kind == "sft":
                check_budget_arm(result, args.budget_arm, out, archive, where)
        plans.append((arm, seed, run, overrides, reused))
    for arm, seed, run, overrides, reused in plans:
        if reused:
            print(f"[protocol] {run}: {reused}, reused", file=sys.stderr, flush=True)
            continue
        extra: dict[str, Any] = {"start_sha256": start, "machine": here}
        if arm.kind == "sft":  # the budget: the step time of the budget arm's run of this seed
            ref = out / args.budget_arm / f"seed_{seed}" / "result.json"
            if ref.exists():
                budget = budget_of(json.loads(ref.read_text()), arm.name, seed, here)
            elif (args.budget_arm, seed) in archive:
                budget = budget_of(archive[args.budget_arm, seed], arm.name, seed, here)
            else:
                raise SystemExit(f"protocol: {arm.name} seed {seed} needs {ref} (run its budget arm first)")
            overrides = [o for o in overrides if not o.startswith("sft.max_seconds=")]
            overrides.append(f"sft.max_seconds={budget:.3f}")
            extra["budget_s"] = budget
            extra["budget_arm"] = args.budget_arm
        print(f"[protocol] {arm.name} seed {seed} -> {run}", file=sys.stderr, flush=True)
        cfg = load(args.config, overrides, arm.name, arm.needs)
        if run.exists():  # an interrupted run starts over (no intermediate checkpoints)
            shutil.rmtree(run)
        wall = evaluate_checkpoint(cfg) if arm.kind == "eval" else run_training(cfg)
        record(run, arm, seed, overrides, wall, extra)
        if not args.keep_optimizer:
            drop_optimizer(run)
    return write_report(out, args, list(ARMS))


def command_line(args: argparse.Namespace) -> str:
    import shlex

    return "python benchmarks/protocol.py " + " ".join(shlex.quote(a) for a in args.argv)


def evaluate_checkpoint(cfg: Config) -> float:
    """The `eval` arm: the run's in-training eval (`TrainingRun.evaluate`) of the starting weights."""
    from horizonrl.trainer.families import resolve_config_families
    from horizonrl.trainer.run import TrainingRun

    start = time.perf_counter()
    with TrainingRun(resolve_config_families(cfg)) as runner:
        runner.evaluate("eval/final")
        runner.monitor.close()
    del runner
    release_memory()
    return time.perf_counter() - start


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/quickstart.yaml", help="the base config of every arm")
    p.add_argument("--sft-model", default=None, help="the SFT checkpoint every arm starts from")
    p.add_argument("--sft-steps", type=int, default=8, help="SFT steps when the protocol trains it")
    p.add_argument("--demos", default="runs/demos", help="folder of <family>_train.jsonl expert demos")
    p.add_argument(
        "--detours", type=float, default=0.0, help="demos made here: `horizonrl solve --detours` (recoveries)"
    )
    p.add_argument(
        "--expert-kwargs",
        type=json_object,
        default={},
        help='demos made here: `horizonrl solve --expert-kwargs` (TextCraft: {"worked": true})',
    )
    p.add_argument("--families", default="textcraft,babyai")
    p.add_argument("--arms", default="sft,grpo,sft-equal")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--steps", type=int, default=6, help="RL steps per arm")
    p.add_argument(
        "--rl-seconds",
        type=float,
        default=None,
        help="also stop each RL run once its steps took this many seconds (trainer.max_seconds)",
    )
    p.add_argument("--caps", default="3,6,10", help="turn caps of the cap arms")
    p.add_argument("--eval-limit", type=int, default=None, help="eval items per family (default: all)")
    p.add_argument("--eval-every", type=int, default=0, help="also eval every N RL steps (curves)")
    p.add_argument(
        "--budget-arm", default=DEFAULT_BUDGET_ARM, help="the RL arm whose step time sft-equal gets"
    )
    p.add_argument("--out", default="runs/protocol")
    p.add_argument("--results", default=None, help="also copy the report to benchmarks/results/NAME.*")
    p.add_argument("--title", default="Learning protocol")
    p.add_argument("--keep-optimizer", action="store_true")
    p.add_argument("--report-only", action="store_true", help="only tabulate and plot what is in --out")
    p.add_argument("--list-arms", action="store_true")
    p.add_argument("overrides", nargs="*", default=[], help="dotted overrides for every arm")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.families = [f for f in args.families.split(",") if f]
    if args.expert_kwargs:
        from horizonrl.envs.registry import get_family
        from horizonrl.eval.solve import build_expert

        for family in args.families:
            try:
                build_expert(get_family(family), args.expert_kwargs)
            except ValueError as exc:
                p.error(str(exc))
    args.arms = [a for a in args.arms.split(",") if a]
    args.seeds = [int(s) for s in args.seeds.split(",") if s]
    args.caps = [int(c) for c in args.caps.split(",") if c]
    unknown = [a for a in args.arms if a not in ARMS]
    if unknown:
        p.error(f"unknown arm(s) {unknown}; the arms: {', '.join(ARMS)}")
    equal = [a for a in args.arms if ARMS[a].kind == "sft"]  # the equal-compute arms
    if equal and args.budget_arm not in args.arms:
        archived = any(r["arm"] == args.budget_arm for r in load_archive(args.results)[1])
        if not (Path(args.out) / args.budget_arm).exists() and not archived:
            p.error(f"{equal[0]} needs the {args.budget_arm} arm's runs (add it to --arms)")
    if equal and args.budget_arm in args.arms:  # the budget arm runs first
        args.arms.remove(args.budget_arm)
        args.arms.insert(args.arms.index(equal[0]), args.budget_arm)
    if not args.seeds or args.steps < 1:
        p.error("--seeds needs at least one seed and --steps must be >= 1")
    if args.rl_seconds is not None and args.rl_seconds <= 0:
        p.error("--rl-seconds must be > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list_arms:
        width = max(map(len, ARMS))
        for arm in ARMS.values():
            extra = " ".join(arm_overrides(arm, args.caps, args.steps))
            print(f"{arm.name:{width}} {arm.kind:5} {arm.label}: {extra}")
        return 0
    if args.report_only:
        write_report(Path(args.out), args, list(ARMS))
    else:
        run_protocol(args)
    if args.results:  # an archive changed: so does the page of all of them
        write_scoreboard(protocol_report.RESULTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
