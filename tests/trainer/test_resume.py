"""Checkpoint/resume reproduces the uninterrupted run; the turn schedule survives a resume."""

from __future__ import annotations

import json

import torch

from horizonrl.config import load_config
from horizonrl.trainer.checkpoint import list_checkpoints
from horizonrl.trainer.rl import RLTrainer

TIMING = ("time/", "throughput/", "memory/")  # of the machine, not of the run


def _config(out, steps, *extra):
    return load_config(
        None,
        [
            "model.path=tiny",
            f"trainer.output_dir={out}",
            f"trainer.total_steps={steps}",
            "trainer.lr=1e-3",
            "trainer.save_every=1",
            "trainer.keep_last=0",
            "data.batch_size=2",
            "rollout.n=2",
            "schedule.type=stepwise",
            "schedule.rounds=[2,4,6]",
            "schedule.every=1",
            "eval.at_end=false",
            "logging.console=false",
            *extra,
        ],
    )


def _metrics(path):
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith(TIMING)} for row in rows]


def test_two_steps_resume_two_steps_equals_four_steps(tmp_path, scripted_rollout):
    straight = RLTrainer(_config(tmp_path / "a", 4), rollout=scripted_rollout)
    straight.fit()

    RLTrainer(_config(tmp_path / "b", 2), rollout=scripted_rollout).fit()
    resumed = RLTrainer(_config(tmp_path / "b", 4, "trainer.resume=auto"), rollout=scripted_rollout)
    assert resumed.step == 2
    resumed.fit()

    a, b = _metrics(tmp_path / "a"), _metrics(tmp_path / "b")
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    assert a == b
    for key, value in straight.learner.actor.state_dict().items():
        assert torch.equal(value, resumed.learner.actor.state_dict()[key]), key
    assert [s for s, _ in list_checkpoints(tmp_path / "b")] == [1, 2, 3, 4]
    # the schedule's caps across the resume: 2, 4, 6, 6 (no off-by-one)
    assert [r["schedule/max_turns"] for r in b] == [2, 4, 6, 6]
    assert max(max(caps) for caps in scripted_rollout.calls) == 6


def test_resume_never_starts_over(tmp_path, scripted_rollout):
    RLTrainer(_config(tmp_path, 1), rollout=scripted_rollout).fit()
    again = RLTrainer(_config(tmp_path, 1, "trainer.resume=never"), rollout=scripted_rollout)
    assert again.step == 0
