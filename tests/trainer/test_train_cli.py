"""`horizonrl train` end to end with the real rollout engine, TextCraft envs and the tiny model."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from horizonrl.cli import main
from horizonrl.models import load_model

BASE = [
    "model.path=tiny",
    "data.families=[textcraft]",
    "data.categories=[depth 1]",
    "data.batch_size=1",
    "rollout.n=2",
    "rollout.max_tokens=8",
    "rollout.max_response_length=512",
    "trainer.lr=1e-3",
    "trainer.critic_lr=1e-3",
    "eval.at_end=false",
    "logging.console=false",
    "sft.warmup_steps=0",  # the quickstart config warm-starts with SFT on demo files;
    "data.train_files=[]",  # these tests exercise plain RL on the split's items
    # The random tiny model never solves an item, so every advantage is 0 and the entropy bonus is
    # what moves the weights here (non-zero advantages per estimator are tested in tests/algos).
    "algorithm.entropy_coef=0.01",
    "algorithm.filter_groups=false",  # (the quickstart drops all-equal groups; here all are equal)
]


def _rows(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _trajectories(run, step):
    return [
        json.loads(line) for line in (run / "trajectories" / f"step_{step}.jsonl").read_text().splitlines()
    ]


@pytest.mark.parametrize("estimator", ["gae", "grpo", "rloo", "reinforce_pp"])
def test_train_one_step_per_estimator(tmp_path, estimator):
    run = tmp_path / "run"
    args = ["train", "configs/quickstart.yaml", *BASE, f"trainer.output_dir={run}", "trainer.total_steps=1"]
    assert (
        main([*args, f"algorithm.adv_estimator={estimator}", "schedule.rounds=[2]", "schedule.type=fixed"])
        == 0
    )
    [row] = _rows(run)
    for key in ("loss/policy", "entropy/mean", "grad/norm", "reward/mean", "turns/mean"):
        assert row[key] is not None, key  # None would mean NaN/inf
    if estimator == "gae":
        assert row["loss/value"] is not None
    trained = load_file(run / "checkpoints" / "step_1" / "model" / "model.safetensors")
    initial = load_model("tiny")[0].state_dict()
    assert any(not torch.equal(trained[k], initial[k]) for k in trained), "parameters did not change"
    trajs = _trajectories(run, 1)
    assert len(trajs) == 2 and all(t["token_ids"] and t["num_turns"] <= 2 for t in trajs)


def test_stepwise_caps_over_four_steps_and_across_resume(tmp_path):
    run = tmp_path / "run"
    args = [
        "train",
        "configs/quickstart.yaml",
        *BASE,
        f"trainer.output_dir={run}",
        "algorithm.kl_coef=0",
        "schedule.type=stepwise",
        "schedule.rounds=[2,4,6]",
        "schedule.every=1",
        "trainer.save_every=1",
    ]
    assert main([*args, "trainer.total_steps=2"]) == 0
    assert main([*args, "trainer.total_steps=4", "trainer.resume=auto"]) == 0
    rows = _rows(run)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert [r["schedule/max_turns"] for r in rows] == [2, 4, 6, 6]
    for step, cap in zip(range(1, 5), (2, 4, 6, 6), strict=True):
        trajs = _trajectories(run, step)
        assert all(t["max_turns"] == cap and 1 <= t["num_turns"] <= cap for t in trajs)
        assert max(t["num_turns"] for t in trajs) == rows[step - 1]["turns/max"]


def test_bf16_sampling_copy_follows_the_learner(tmp_path):
    """rollout.dtype=bfloat16 samples from a bf16 copy that is refreshed before every rollout."""
    from horizonrl.config import load_config
    from horizonrl.trainer.rl import RLTrainer

    run = tmp_path / "run"
    overrides = [*BASE, f"trainer.output_dir={run}", "trainer.total_steps=1", "schedule.rounds=[2]"]
    overrides += ["schedule.type=fixed", "rollout.dtype=bfloat16", "model.bf16=false"]
    overrides += ["eval.at_end=true", "eval.limit=1", "eval.max_turns=1", "eval.max_tokens=8"]
    trainer = RLTrainer(load_config("configs/quickstart.yaml", overrides))
    metrics = trainer.fit()
    assert metrics["loss/policy"] == metrics["loss/policy"]  # finite, not NaN
    rollout = trainer.rollout()
    actor = trainer.learner.actor
    sampler = rollout.sampler.sampler_model
    assert sampler is not actor
    assert all(p.dtype == torch.bfloat16 for p in sampler.parameters())
    assert all(p.dtype == torch.float32 for p in actor.parameters())
    # the final eval ran after the update, so the copy holds the updated weights (in bf16)
    initial = load_model("tiny")[0]
    moved = 0
    pairs = zip(actor.named_parameters(), sampler.parameters(), initial.parameters(), strict=True)
    for (name, p), q, p0 in pairs:
        assert torch.equal(q, p.detach().to(torch.bfloat16)), name
        moved += not torch.equal(p.detach().to(torch.bfloat16), p0.to(torch.bfloat16))
    assert moved > 0
    lines = (run / "eval/final/trajectories.jsonl").read_text().splitlines()
    assert [json.loads(line)["num_turns"] for line in lines] == [1]


def test_mixed_family_batch_trains_on_both_families(tmp_path):
    """One step whose batch holds a TextCraft and a BabyAI item (played by the real envs)."""
    run = tmp_path / "run"
    args = ["train", "configs/quickstart.yaml", *BASE, f"trainer.output_dir={run}", "trainer.total_steps=1"]
    args += ["data.families=[textcraft, babyai]", "data.categories=[]", "data.max_items=1"]
    args += ["data.batch_size=2", "schedule.type=fixed", "schedule.rounds=[2]"]
    assert main(args) == 0
    trajs = _trajectories(run, 1)
    assert sorted(t["item_id"].split("_")[0] for t in trajs) == ["babyai", "babyai", "textcraft", "textcraft"]
    assert all(t["token_ids"] and 1 <= t["num_turns"] <= 2 and not t["failed"] for t in trajs)
    babyai = next(t for t in trajs if t["item_id"].startswith("babyai"))
    first_user = next(m["content"] for m in babyai["messages"] if m["role"] == "user")
    assert "Your goal" in first_user and "crafting" not in first_user  # BabyAI's prompt, not TextCraft's
    [row] = _rows(run)
    assert row["loss/policy"] is not None and row["turns/max"] <= 2
