"""Curriculum, token-budget schedule and best checkpoint end to end: `RLTrainer` on the real
engine, the tiny model and in-process TextCraft envs (2-3 steps each)."""

from __future__ import annotations

import json

from horizonrl.config import load_config
from horizonrl.envs.registry import family_of
from horizonrl.rollout.trajectory import read_jsonl
from horizonrl.trainer.rl import RLTrainer


def _config(out, *overrides):
    return load_config(
        None,
        [
            "model.path=tiny",
            "model.bf16=false",
            f"trainer.output_dir={out}",
            "data.families=[textcraft]",
            "data.batch_size=2",
            "rollout.n=2",
            "rollout.max_tokens=4",
            "schedule.type=fixed",
            "schedule.rounds=[2]",
            "eval.at_end=false",
            "logging.tensorboard=false",
            "logging.console=false",
            *overrides,
        ],
    )


def _metrics(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_curriculum_run_trains_on_each_stage_in_turn(tmp_path):
    stages = "data.curriculum.stages=[{categories: [depth 1]}, {categories: [depth 3]}]"
    cfg = _config(
        tmp_path, stages, "data.curriculum.every=1", "trainer.total_steps=2", "trainer.save_every=0"
    )
    RLTrainer(cfg).fit()
    depths = [
        {
            family_of(t.item_id).category_of(t.item_id)
            for t in read_jsonl(tmp_path / "trajectories" / f"step_{s}.jsonl")
        }
        for s in (1, 2)
    ]
    assert depths == [{"depth 1"}, {"depth 3"}]
    assert [m["curriculum/stage"] for m in _metrics(tmp_path)] == [1.0, 2.0]
    state = json.loads((tmp_path / "checkpoints" / "step_2" / "trainer_state.json").read_text())
    assert [s["cursor"] for s in state["data"]["stages"]] == [2, 2]
