"""`logging.save_token_stats`: what the update saw per sampled token, saved beside the step's trajectories."""

from __future__ import annotations

import json

import pytest

from horizonrl.trainer.rl import RLTrainer
from tests.trainer.conftest import scripted_rl_config


def _config(tmp_path, *extra):
    return scripted_rl_config(tmp_path, "trainer.micro_batch_size=4", "algorithm.adv_estimator=grpo", *extra)


def test_saved_stats_line_up_with_the_saved_trajectories(tmp_path, scripted_rollout):
    RLTrainer(_config(tmp_path, "logging.save_token_stats=true"), rollout=scripted_rollout).fit()
    trajectories = [
        json.loads(x) for x in (tmp_path / "trajectories" / "step_1.jsonl").read_text().splitlines()
    ]
    rows = (tmp_path / "trajectories" / "token_stats" / "step_1.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in rows]
    assert [r["index"] for r in rows] == list(range(len(trajectories)))  # every one was in the update
    for row in rows:
        traj = trajectories[row["index"]]
        assert (row["item_id"], row["sample_index"]) == (traj["item_id"], traj["sample_index"])
        sampled = [p for p, m in enumerate(traj["loss_mask"]) if m]
        assert [p for a, b in row["spans"] for p in range(a, b)] == sampled
        for name in ("advantages", "old_logprobs", "ref_logprobs", "kl", "token_rewards"):
            assert len(row[name]) == len(sampled), name
        assert "values" not in row  # no critic under GRPO
        # GRPO: one advantage per trajectory, above the group mean when it succeeded
        assert len(set(row["advantages"])) == 1
        assert (row["advantages"][0] > 0) == traj["success"]
        assert sum(row["token_rewards"]) == pytest.approx(float(traj["success"]))
        assert row["kl"] == pytest.approx([0.0] * len(sampled), abs=1e-5)  # pi_old is pi_ref at step 1
        assert all(lp < 0 for lp in row["old_logprobs"])


def test_off_by_default(tmp_path, scripted_rollout):
    RLTrainer(_config(tmp_path), rollout=scripted_rollout).fit()
    assert (tmp_path / "trajectories" / "step_1.jsonl").exists()
    assert not (tmp_path / "trajectories" / "token_stats").exists()
