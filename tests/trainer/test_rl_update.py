"""The RL trainer's update phase on hand-built trajectories and the tiny model."""

from __future__ import annotations

import json

import pytest
import torch

from horizonrl.trainer.rl import RLTrainer
from tests.trainer.conftest import scripted_rl_config


def _config(tmp_path, *extra):
    return scripted_rl_config(
        tmp_path, "trainer.lr=1e-3", "trainer.critic_lr=1e-3", "trainer.micro_batch_size=3", *extra
    )


@pytest.mark.parametrize("estimator", ["gae", "grpo", "rloo", "reinforce_pp"])
def test_one_step_per_estimator_changes_parameters(tmp_path, scripted_rollout, estimator):
    cfg = _config(tmp_path, f"algorithm.adv_estimator={estimator}")
    trainer = RLTrainer(cfg, rollout=scripted_rollout)
    before = {k: v.clone() for k, v in trainer.learner.actor.state_dict().items()}
    critic_before = None
    if trainer.learner.critic is not None:
        critic_before = trainer.learner.critic.score.weight.clone()
    metrics = trainer.fit()
    after = trainer.learner.actor.state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "no parameter changed"
    for key in ("loss/policy", "entropy/mean", "grad/norm", "loss/kl", "kl/mean"):
        assert key in metrics and torch.isfinite(torch.tensor(metrics[key])), key
    assert metrics["advantages/abs_mean"] > 0
    if estimator == "gae":
        assert torch.isfinite(torch.tensor(metrics["loss/value"]))
        assert not torch.equal(critic_before, trainer.learner.critic.score.weight)
    else:
        assert trainer.learner.critic is None and "loss/value" not in metrics
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["step"] == 1
    assert (tmp_path / "checkpoints" / "step_1" / "model" / "model.safetensors").exists()
    assert (tmp_path / "trajectories" / "step_1.jsonl").exists()


def test_first_epoch_ratio_is_one_and_kl_starts_at_zero(tmp_path, scripted_rollout):
    cfg = _config(tmp_path, "algorithm.ppo_epochs=1", "trainer.mini_batches=1")
    metrics = RLTrainer(cfg, rollout=scripted_rollout).fit()
    assert metrics["clip/frac"] == 0.0
    assert metrics["kl/mean"] == pytest.approx(0.0, abs=1e-6)
    assert metrics["kl/old_approx"] == pytest.approx(0.0, abs=1e-5)


def test_micro_batching_gives_the_same_update(tmp_path, scripted_rollout):
    runs = []
    for mb in (1, 4):
        cfg = _config(tmp_path / f"mb{mb}", f"trainer.micro_batch_size={mb}", "trainer.deterministic=true")
        trainer = RLTrainer(cfg, rollout=scripted_rollout)
        trainer.fit()
        runs.append(trainer.learner.actor.state_dict())
    for key in runs[0]:
        torch.testing.assert_close(runs[0][key], runs[1][key], rtol=1e-4, atol=1e-6)


class _OneGroupFails:
    """The scripted rollout, but every sample of the groups in `failing` fails (reward 0)."""

    def __init__(self, inner, failing):
        self.inner, self.failing = inner, failing

    def __call__(self, episodes, *, step, greedy=False):
        out = self.inner(episodes, step=step, greedy=greedy)
        groups = sorted({t.group_id for t in out})
        for t in out:
            if groups.index(t.group_id) in self.failing:
                t.success, t.score, t.reward = False, 0.0, 0.0
                t.turn_rewards = [0.0] * len(t.turn_rewards)
        return out


def test_filter_groups_trains_on_informative_groups_only(tmp_path, scripted_rollout):
    both = RLTrainer(
        _config(tmp_path / "a", "algorithm.filter_groups=true"), rollout=_OneGroupFails(scripted_rollout, {0})
    )
    metrics = both.fit()
    assert metrics["groups/informative_frac"] == 0.5 and metrics["update/skipped"] == 0.0
    # the same update as training on the informative group alone: the filtered group adds nothing
    # to the gradient, and token-mean now averages over the informative group's tokens only
    assert metrics["advantages/abs_mean"] > 0
    [row] = [json.loads(line) for line in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert row["success/mean"] == 0.25  # logged over all 4 episodes, trained on 2


def test_no_informative_group_skips_the_optimizer_step(tmp_path, scripted_rollout):
    cfg = _config(tmp_path, "algorithm.filter_groups=true", "algorithm.entropy_coef=0.01")
    trainer = RLTrainer(cfg, rollout=_OneGroupFails(scripted_rollout, {0, 1}))
    before = {k: v.clone() for k, v in trainer.learner.actor.state_dict().items()}
    lr_before = trainer.learner.lr_scheduler.last_epoch
    metrics = trainer.fit()
    assert metrics["update/skipped"] == 1.0 and metrics["groups/informative_frac"] == 0.0
    after = trainer.learner.actor.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before), "weights moved with nothing to learn"
    assert trainer.learner.lr_scheduler.last_epoch == lr_before + 1
    assert (tmp_path / "checkpoints" / "step_1").exists()
