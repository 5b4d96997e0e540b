"""Curriculum, token-budget schedule and best checkpoint end to end: `RLTrainer` on the real
engine, the tiny model and in-process TextCraft envs (2-3 steps each)."""

from __future__ import annotations

import json

from horizonrl.config import load_config
from horizonrl.envs.registry import family_of
from horizonrl.rollout.trajectory import read_jsonl
from horizonrl.trainer.data import validation_items
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


def _turn_lengths(traj):
    """Sampled tokens of each assistant turn (runs of loss_mask 1)."""
    runs, n = [], 0
    for m in [*traj.loss_mask, 0]:
        if m:
            n += 1
        elif n:
            runs, n = [*runs, n], 0
    return runs


def test_token_schedule_caps_each_turn_and_can_raise_rollout_max_tokens(tmp_path):
    tokens = "rollout.max_tokens_schedule={type: stepwise, rounds: [2, 6], every: 1}"
    cfg = _config(tmp_path, tokens, "trainer.total_steps=2", "trainer.save_every=0")
    RLTrainer(cfg).fit()
    lengths = [
        [n for t in read_jsonl(tmp_path / "trajectories" / f"step_{s}.jsonl") for n in _turn_lengths(t)]
        for s in (1, 2)
    ]
    assert max(lengths[0]) == 2
    assert max(lengths[1]) == 6  # above rollout.max_tokens=4: the schedule replaces it
    assert [m["schedule/max_tokens"] for m in _metrics(tmp_path)] == [2.0, 6.0]


def test_best_checkpoint_on_validation_items_and_horizonrl_eval_of_the_run(tmp_path, capsys):
    from horizonrl.cli import main

    run = tmp_path / "run"
    evals = ["eval.every=1", "eval.limit=2", "eval.max_turns=2", "eval.max_tokens=3"]
    cfg = _config(run, "data.val_fraction=0.1", *evals, "trainer.total_steps=2", "trainer.save_every=0")
    trainer = RLTrainer(cfg)
    trainer.fit()
    report = json.loads((run / "eval" / "step_2" / "report.json").read_text())
    assert report["split"] == "val" and report["n_items"] == 2
    played = {t.item_id for t in read_jsonl(run / "eval" / "step_2" / "trajectories.jsonl")}
    trained = {t.item_id for s in (1, 2) for t in read_jsonl(run / "trajectories" / f"step_{s}.jsonl")}
    assert played <= set(validation_items(cfg.data)) and not played & trained
    assert not set(validation_items(cfg.data)) & set(trainer.sampler.items)  # never drawn
    best = json.loads((run / "checkpoints" / "best" / "best.json").read_text())
    successes = [m["eval/success"] for m in _metrics(run) if "eval/success" in m]
    expected = 1 if successes[0] >= successes[1] else 2  # ties: the earlier step
    assert best["step"] == expected
    assert [m["eval/best_step"] for m in _metrics(run) if "eval/best_step" in m] == [1, expected]
    assert (run / "checkpoints" / "best" / "model" / "model.safetensors").exists()

    out = tmp_path / "eval"
    flags = ["eval", "--model", str(run), "--env", "textcraft", "--out", str(out), "--limit", "1"]
    assert main([*flags, "max_turns=1", "max_tokens=2", "progress=false"]) == 0
    assert f"the best checkpoint, step {expected}" in capsys.readouterr().err
    assert json.loads((out / "report.json").read_text())["model"] == str(
        run / "checkpoints" / "best" / "model"
    )
