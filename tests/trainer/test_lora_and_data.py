"""LoRA training (reference = adapters disabled), checkpoint housekeeping, the item sampler."""

from __future__ import annotations

import pytest
import torch

from horizonrl.config import load_config
from horizonrl.trainer.checkpoint import list_checkpoints, resolve_resume
from horizonrl.trainer.data import ItemSampler, load_items
from horizonrl.trainer.rl import RLTrainer


def test_lora_step_trains_only_adapters_and_resumes(tmp_path, scripted_rollout):
    overrides = [
        "model.path=tiny",
        "model.lora.enabled=true",
        "model.lora.r=4",
        f"trainer.output_dir={tmp_path}",
        "trainer.total_steps=1",
        "trainer.lr=1e-2",
        "data.batch_size=2",
        "rollout.n=2",
        "eval.at_end=false",
        "logging.console=false",
        "logging.tensorboard=false",
    ]
    trainer = RLTrainer(load_config(None, overrides), rollout=scripted_rollout)
    assert trainer.learner.reference is None  # the base weights serve as reference
    before = {k: v.clone() for k, v in trainer.learner.actor.state_dict().items()}
    metrics = trainer.fit()
    after = trainer.learner.actor.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all("lora_" in k for k in changed)
    assert metrics["kl/mean"] == pytest.approx(0.0, abs=1e-6)  # adapters start as identity
    saved = tmp_path / "checkpoints" / "step_1" / "model"
    assert (saved / "adapter_config.json").exists()

    resumed = RLTrainer(load_config(None, [*overrides, "trainer.total_steps=2"]), rollout=scripted_rollout)
    assert resumed.step == 1
    for key in changed:
        assert torch.equal(resumed.learner.actor.state_dict()[key], after[key])


def test_keep_last_prunes_and_auto_picks_latest(tmp_path, scripted_rollout):
    cfg = load_config(
        None,
        [
            "model.path=tiny",
            f"trainer.output_dir={tmp_path}",
            "trainer.total_steps=3",
            "trainer.save_every=1",
            "trainer.keep_last=2",
            "algorithm.kl_coef=0",
            "data.batch_size=1",
            "rollout.n=2",
            "eval.at_end=false",
            "logging.console=false",
            "logging.tensorboard=false",
        ],
    )
    RLTrainer(cfg, rollout=scripted_rollout).fit()
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2, 3]
    assert resolve_resume("auto", tmp_path) == tmp_path / "checkpoints" / "step_3"
    (tmp_path / "checkpoints" / "step_9.tmp").mkdir()  # an interrupted save is never picked
    assert resolve_resume("auto", tmp_path) == tmp_path / "checkpoints" / "step_3"
    with pytest.raises(FileNotFoundError):
        resolve_resume(str(tmp_path / "nowhere"), tmp_path)


def test_sampler_is_seeded_epochwise_and_resumable():
    items = [f"textcraft_{i}" for i in range(5)]
    a = ItemSampler(items, seed=1)
    first = a.next_batch(3) + a.next_batch(3) + a.next_batch(4)
    assert sorted(first[:5]) == sorted(items) and sorted(first[5:]) == sorted(items)  # whole epochs
    b = ItemSampler(items, seed=1)
    b.next_batch(3)
    state = b.state_dict()
    c = ItemSampler(items, seed=1)
    c.load_state_dict(state)
    assert c.next_batch(7) == first[3:]
    assert ItemSampler(items, seed=2).next_batch(5) != first[:5]
    with pytest.raises(ValueError, match="items"):
        ItemSampler(items[:4], seed=1).load_state_dict(state)


def test_load_items_filters_categories_and_mixes_families():
    items = load_items(["textcraft", "babyai"], "test", categories=["depth 1", "GoTo"], limit=3)
    assert len(items) == 6
    assert items[:3] == [i for i in items if i.startswith("textcraft_")]
    with pytest.raises(ValueError, match="no training items"):
        load_items(["textcraft"], "test", categories=["depth 99"])
