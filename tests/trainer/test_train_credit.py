"""`horizonrl train` end to end with turn-level credit and shaped rewards: the real engine, TextCraft
envs and the tiny model (the quickstart config with the plain-RL base of test_train_cli)."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

from horizonrl.cli import main
from horizonrl.models import load_model
from tests.trainer.test_train_cli import BASE


def _train(run, *overrides):
    args = ["train", "configs/quickstart.yaml", *BASE, f"trainer.output_dir={run}", "trainer.total_steps=1"]
    assert main([*args, "schedule.type=fixed", "schedule.rounds=[3]", *overrides]) == 0
    [row] = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    trajs = [json.loads(line) for line in (run / "trajectories" / "step_1.jsonl").read_text().splitlines()]
    return row, trajs


def test_gigpo_with_the_invalid_penalty_trains_on_turn_level_signal(tmp_path):
    """The random tiny model never writes a valid action, so every episode scores the same and GRPO
    has nothing; but all its turns start from the empty inventory, and the penalty's returns-to-go
    differ by turn, so gigpo's step groups give non-zero advantages (and filter_groups keeps them)."""
    row, trajs = _train(
        tmp_path / "run",
        "algorithm.adv_estimator=gigpo",
        "algorithm.invalid_action_penalty=0.1",
        "algorithm.filter_groups=true",
    )
    assert row["turns/invalid_frac"] == 1.0 and row["adv/step_groups_frac"] == 1.0
    assert row["groups/informative_frac"] == 1.0 and row["update/skipped"] == 0.0
    assert row["advantages/abs_mean"] > 0.1
    for t in trajs:
        assert t["turn_states"] == [""] * t["num_turns"] and t["turn_invalid"] == [True] * t["num_turns"]
    trained = load_file(tmp_path / "run" / "checkpoints" / "step_1" / "model" / "model.safetensors")
    initial = load_model("tiny")[0].state_dict()
    assert any(not torch.equal(trained[k], initial[k]) for k in trained), "parameters did not change"


def test_shaped_rewards_with_the_penalty_sit_on_each_turns_last_token(tmp_path):
    """The random model reaches no sub-goal (progress 0) and never acts validly, so what the update
    sees per trajectory is -0.2 on each turn's last sampled token and nothing anywhere else."""
    run = tmp_path / "run"
    row, trajs = _train(
        run,
        "algorithm.reward=shaped",
        "algorithm.shaped_weight=0.3",
        "algorithm.invalid_action_penalty=0.2",
        "logging.save_token_stats=true",
    )
    assert row["progress/mean"] == 0.0 and row["turns/invalid_frac"] == 1.0
    assert all(len(t["turn_progress"]) == t["num_turns"] for t in trajs)
    for line in (run / "trajectories" / "token_stats" / "step_1.jsonl").read_text().splitlines():
        stats = json.loads(line)
        placed = [r for r in stats["token_rewards"] if r != 0]
        assert placed == [-0.2] * trajs[stats["index"]]["num_turns"]
