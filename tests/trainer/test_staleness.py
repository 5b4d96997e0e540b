"""`rollout.max_staleness`: decoupled PPO's weights by hand, k = 1 end to end, k = 0 unchanged."""

from __future__ import annotations

import json
import math

import pytest
import torch

from horizonrl.algos.losses import PolicyLossParams, behaviour_weights, ppo_policy_loss
from horizonrl.config import ConfigError, load_config
from horizonrl.rollout.trajectory import read_jsonl
from horizonrl.trainer.producer import RolloutProducer
from horizonrl.trainer.rl import RLTrainer

TIMING = ("time/", "throughput/", "memory/")  # of the machine, not of the run


def test_behaviour_weights_by_hand():
    # pi_old / pi_behaviour: 0.5/0.25 = 2, 0.9/0.1 = 9 -> the cap 5, 0.2/0.4 = 0.5; last off the mask
    old = torch.tensor([[math.log(0.5), math.log(0.9), math.log(0.2), 0.0]])
    beh = torch.tensor([[math.log(0.25), math.log(0.1), math.log(0.4), 0.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    w, stats = behaviour_weights(old, beh, mask, cap=5.0)
    assert torch.allclose(w, torch.tensor([[2.0, 5.0, 0.5, 0.0]]))
    assert float(stats["mean"]) == pytest.approx((2 + 5 + 0.5) / 3)
    assert float(stats["truncated_frac"]) == pytest.approx(1 / 3)
    assert not w.requires_grad


def test_decoupled_ppo_loss_by_hand():
    # token 1: pi_theta 0.75, pi_old 0.5, pi_beh 0.25, A = +1: r = 1.5 -> clipped 1.2, w = 2:
    #          l = 2 * max(-1.5, -1.2) = -2.4
    # token 2: pi_theta 0.3, pi_old 0.6, pi_beh 0.3, A = -1: r = 0.5 -> clipped 0.8, w = 2:
    #          l = 2 * max(0.5, 0.8) = 1.6            token mean: (-2.4 + 1.6) / 2 = -0.4
    logprobs = torch.tensor([[math.log(0.75), math.log(0.3)]], requires_grad=True)
    old = torch.tensor([[math.log(0.5), math.log(0.6)]])
    beh = torch.tensor([[math.log(0.25), math.log(0.3)]])
    advantages = torch.tensor([[1.0, -1.0]])
    mask = torch.ones(1, 2)
    w, _ = behaviour_weights(old, beh, mask, cap=5.0)
    loss, stats = ppo_policy_loss(logprobs, old, advantages * w, mask, PolicyLossParams())
    assert float(loss.detach()) == pytest.approx(-0.4, abs=1e-6)
    assert float(stats["clip_frac"]) == 1.0
    loss.backward()  # both tokens clipped: no gradient through the ratio
    assert torch.equal(logprobs.grad, torch.zeros(1, 2))


def _config(out, *extra):
    return load_config(
        None,
        [
            "model.path=tiny",
            f"trainer.output_dir={out}",
            "trainer.total_steps=3",
            "trainer.lr=1e-3",
            "trainer.save_every=0",
            "data.batch_size=2",
            "rollout.n=2",
            "rollout.max_tokens=4",
            "algorithm.kl_coef=0",  # no reference forward
            "model.gradient_checkpointing=false",
            "schedule.type=fixed",
            "schedule.rounds=[2]",
            "algorithm.entropy_coef=0.01",  # the tiny model never succeeds: gradients from entropy
            "eval.at_end=false",
            "logging.console=false",
            "logging.tensorboard=false",
            *extra,
        ],
    )


def _metrics(path):
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith(TIMING)} for row in rows]


@pytest.mark.timeout(1200)  # ~2 min of CPU; on the shared 2-core machine under load, ~8 min wall
def test_one_step_stale_rollouts_train_and_record_versions(tmp_path):
    trainer = RLTrainer(_config(tmp_path, "rollout.max_staleness=1"))
    before = {k: v.clone() for k, v in trainer.learner.actor.state_dict().items()}
    trainer.fit()
    rows = _metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3]
    # step 0 from version 0; step 1 played during step 0's update (version 0); step 2 from version 1
    assert [r["staleness/max"] for r in rows] == [0.0, 1.0, 1.0]
    for step, row in enumerate(rows):
        assert row["update/skipped"] == 0.0 and math.isfinite(row["loss/objective"])
        assert 0 < row["behaviour_is/mean"] <= 5.0
        played = read_jsonl(tmp_path / "trajectories" / f"step_{step + 1}.jsonl")
        versions = {t.policy_version for t in played}
        assert versions == {max(0, step - 1)}
    after = trainer.learner.actor.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.timeout(1200)
def test_zero_staleness_through_the_background_copy_is_the_synchronous_loop(tmp_path):
    inline = RLTrainer(_config(tmp_path / "a", "trainer.total_steps=1"))
    inline.fit()

    threaded = RLTrainer(_config(tmp_path / "b", "trainer.total_steps=1"))
    learner = threaded.learner

    def background_producer() -> RolloutProducer:
        def plan(step):
            return threaded.schedule.max_turns(step), threaded.plan_episodes(step)

        return RolloutProducer(
            threaded.cfg,
            threaded.rollout(),
            plan,
            learner.sampling_model(),
            learner.tokenizer,
            {},
            background=True,
        )

    threaded.producer = background_producer  # type: ignore[method-assign]
    threaded.fit()

    a, b = _metrics(tmp_path / "a"), _metrics(tmp_path / "b")
    assert "staleness/max" not in a[0]  # k = 0 logs what it logged before
    assert [r.pop("staleness/max") for r in b] == [0.0]
    for r in b:
        r.pop("staleness/mean")
    assert a == b
    for key, value in inline.learner.actor.state_dict().items():
        assert torch.equal(value, threaded.learner.actor.state_dict()[key]), key
    for step in (1,):
        ta = read_jsonl(tmp_path / "a" / "trajectories" / f"step_{step}.jsonl")
        tb = read_jsonl(tmp_path / "b" / "trajectories" / f"step_{step}.jsonl")
        assert [t.token_ids for t in ta] == [t.token_ids for t in tb]
        assert {t.policy_version for t in ta} == {t.policy_version for t in tb} == {step - 1}


def test_staleness_needs_the_hf_backend_and_one_process():
    with pytest.raises(ConfigError, match="max_staleness"):
        load_config(None, ["rollout.max_staleness=1", "resources.learner_world_size=2"])
    with pytest.raises(ConfigError, match="max_staleness"):
        load_config(None, ["rollout.max_staleness=-1"])
