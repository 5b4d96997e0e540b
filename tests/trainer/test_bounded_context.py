"""Bounded context in the RL loop (tiny model, TextCraft in-process): each context window is one
row, and the learner's logprobs on every row are the ones the rollout sampled with."""

from __future__ import annotations

import json

from horizonrl.rollout.trajectory import read_jsonl
from horizonrl.trainer.rl import RLTrainer
from tests.trainer.test_rl_correctness import _cfg


def test_windows_train_on_the_contexts_the_policy_saw(tmp_path):
    cfg = _cfg(
        tmp_path,
        "model.bf16=false",
        "schedule.rounds=[3]",
        "agent.context.max_turns_kept=1",
        "algorithm.recompute_old_logprobs=false",  # old = the rollout's logprobs: ratio 1 iff same contexts
        "logging.save_token_stats=true",
    )
    metrics = RLTrainer(cfg).fit()
    trajs = read_jsonl(tmp_path / "trajectories" / "step_1.jsonl")
    assert any(t.segments for t in trajs)  # 3 turns with 1 kept: windows of turns 1-2 and 3
    assert metrics["update/skipped"] == 0 and metrics["ratio/first_pass_max_dev"] <= 1e-5
    assert metrics["context/tokens_max"] >= metrics["context/tokens_mean"] > 0
    assert json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])["context/tokens_max"] > 0
    lines = (tmp_path / "trajectories" / "token_stats" / "step_1.jsonl").read_text().splitlines()
    stats = [json.loads(line) for line in lines]
    assert {s.get("window", 0) for s in stats} >= {0, 1}  # one row per context window
