"""The RL trainer's update phase on hand-built trajectories and the tiny model."""

from __future__ import annotations

import json

import pytest
import torch

from horizonrl.config import ConfigError
from horizonrl.trainer.episodes import Episode
from horizonrl.trainer.rewards import select_for_update
from horizonrl.trainer.rl import EXTRA_BATCH_STRIDE, RLTrainer
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


def test_logprobs_in_blocks_give_the_same_update_bit_for_bit(tmp_path, scripted_rollout):
    runs = []
    for block in (0, 2):  # the whole micro-batch at once, and blocks of 2 positions
        cfg = _config(tmp_path / f"b{block}", f"trainer.logprob_block={block}", "trainer.deterministic=true")
        trainer = RLTrainer(cfg, rollout=scripted_rollout)
        trainer.fit()
        runs.append(trainer.learner.actor.state_dict())
    assert all(torch.equal(runs[0][key], runs[1][key]) for key in runs[0])
    with pytest.raises(ConfigError, match="trainer.logprob_block must be >= 0"):
        _config(tmp_path / "bad", "trainer.logprob_block=-1")


def test_an_unweighed_entropy_stays_outside_the_graph_and_the_update_is_unchanged(
    tmp_path, scripted_rollout, monkeypatch
):
    """With `entropy_coef: 0` (the quickstart's) the entropy is still logged but computed without
    a graph, so the backward skips a softmax over the vocabulary whose gradient is zero; the update
    is bit for bit the one that builds the graph. With a non-zero coefficient it is trained on."""
    import horizonrl.trainer.learner as learner_module

    grad_enabled: list[bool] = []
    original = learner_module.entropy_from_logits

    def spy(*args, **kwargs):
        grad_enabled.append(torch.is_grad_enabled())
        return original(*args, **kwargs)

    monkeypatch.setattr(learner_module, "entropy_from_logits", spy)

    def fit(coef: float, name: str) -> dict[str, torch.Tensor]:
        grad_enabled.clear()
        extra = (f"algorithm.entropy_coef={coef}", "trainer.deterministic=true")
        trainer = RLTrainer(_config(tmp_path / name, *extra), rollout=scripted_rollout)
        assert trainer.fit()["entropy/mean"] > 0
        return trainer.learner.actor.state_dict()

    unweighed = fit(0.0, "unweighed")
    assert grad_enabled and not any(grad_enabled)
    weighed = fit(0.01, "weighed")
    assert grad_enabled and all(grad_enabled)
    token_logprobs = learner_module.Learner.token_logprobs  # the graph built as before this change
    monkeypatch.setattr(
        learner_module.Learner,
        "token_logprobs",
        lambda self, *a, **k: token_logprobs(self, *a, **{**k, "entropy_grad": True}),
    )
    with_graph = fit(0.0, "with_graph")
    assert grad_enabled and all(grad_enabled)
    assert all(torch.equal(unweighed[k], with_graph[k]) for k in unweighed)
    assert not all(torch.equal(unweighed[k], weighed[k]) for k in unweighed)


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


class _FailsUntilBatch:
    """The scripted rollout, but every sample fails in the step's dynamic-sampling batches before
    `first_informative` (batch b's group ids start at b * EXTRA_BATCH_STRIDE); records each call's
    group ids and seeds."""

    def __init__(self, inner, first_informative):
        self.inner, self.first_informative = inner, first_informative
        self.calls = []

    def __call__(self, episodes, *, step, greedy=False):
        self.calls.append([(e.group_id, e.seed, e.item_id) for e in episodes])
        out = self.inner(episodes, step=step, greedy=greedy)
        for t in out:
            if t.group_id // EXTRA_BATCH_STRIDE < self.first_informative:
                t.success, t.score, t.reward = False, 0.0, 0.0
                t.turn_rewards = [0.0] * len(t.turn_rewards)
        return out


def test_dynamic_sampling_plays_fresh_batches_until_a_group_is_informative(tmp_path, scripted_rollout):
    rollout = _FailsUntilBatch(scripted_rollout, first_informative=2)
    cfg = _config(tmp_path, "algorithm.filter_groups=true", "algorithm.dynamic_sampling_groups=1")
    trainer = RLTrainer(cfg, rollout=rollout)
    before = {k: v.clone() for k, v in trainer.learner.actor.state_dict().items()}
    metrics = trainer.fit()
    assert metrics["rollout/batches"] == 3.0 and metrics["update/skipped"] == 0.0
    after = trainer.learner.actor.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before), (
        "the informative batch was not trained on"
    )
    groups = [g for call in rollout.calls for g, _, _ in call]
    assert len(groups) == 3 * 2 * 2 and len(set(groups)) == 3 * 2  # 3 batches x 2 items x 2 samples
    assert len({s for call in rollout.calls for _, s, _ in call}) == 3 * 2  # a seed per group
    items = [[i for _, _, i in call] for call in rollout.calls]
    assert items[0] != items[1] != items[2]  # fresh items each batch (the data cursor moved on)
    assert trainer.sampler.state_dict()["cursor"] == 3 * 2  # saved with the checkpoint: a resume goes on
    [row] = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert row["groups/informative_frac"] == pytest.approx(2 / 6)
    assert len((tmp_path / "trajectories" / "step_1.jsonl").read_text().splitlines()) == 12


def test_without_dynamic_sampling_the_same_rollout_skips_the_update(tmp_path, scripted_rollout):
    rollout = _FailsUntilBatch(scripted_rollout, first_informative=2)
    metrics = RLTrainer(_config(tmp_path, "algorithm.filter_groups=true"), rollout=rollout).fit()
    assert metrics["update/skipped"] == 1.0 and len(rollout.calls) == 1 and "rollout/batches" not in metrics


def test_dynamic_sampling_stops_at_its_batch_limit(tmp_path, scripted_rollout):
    rollout = _FailsUntilBatch(scripted_rollout, first_informative=99)
    cfg = _config(
        tmp_path,
        "algorithm.filter_groups=true",
        "algorithm.dynamic_sampling_groups=2",
        "algorithm.dynamic_sampling_max_batches=3",
    )
    metrics = RLTrainer(cfg, rollout=rollout).fit()
    assert len(rollout.calls) == 3 and metrics["rollout/batches"] == 3.0 and metrics["update/skipped"] == 1.0


def test_dynamic_sampling_trains_on_the_first_k_informative_groups(tmp_path, scripted_rollout):
    cfg = _config(tmp_path, "algorithm.filter_groups=true", "algorithm.dynamic_sampling_groups=1")
    episodes = [
        Episode(f"textcraft_{g}", group_id=g, sample_index=k, seed=g, max_turns=3)
        for g in (7, 3)
        for k in (0, 1)
    ]
    trajectories = scripted_rollout(episodes, step=0)  # both groups informative (even samples succeed)
    kept, stats = select_for_update(trajectories, cfg)
    assert [t.group_id for t in kept] == [7, 7] and stats["groups/informative_frac"] == 1.0
    all_kept, _ = select_for_update(trajectories, _config(tmp_path, "algorithm.filter_groups=true"))
    assert [t.group_id for t in all_kept] == [7, 7, 3, 3]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (("algorithm.dynamic_sampling_groups=2",), "set algorithm.filter_groups=true"),
        (("algorithm.filter_groups=true", "algorithm.dynamic_sampling_groups=-1"), "must be >= 0"),
        (("algorithm.filter_groups=true", "algorithm.dynamic_sampling_max_batches=0"), ">= 1"),
        (
            (
                "algorithm.filter_groups=true",
                "algorithm.dynamic_sampling_groups=2",
                "rollout.max_staleness=1",
            ),
            "does not run with rollout.max_staleness > 0",
        ),
    ],
)
def test_dynamic_sampling_settings_are_checked(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, *overrides)
