"""The trainer's rollout on the real engine, tiny model and in-process TextCraft envs."""

from __future__ import annotations

from horizonrl.config import load_config
from horizonrl.models import load_model
from horizonrl.trainer.engine_rollout import EngineRollout
from horizonrl.trainer.episodes import Episode

TINY = [
    "model.path=tiny",
    "rollout.max_tokens=4",
    "rollout.temperature=1.0",
    "logging.console=false",
]


def test_every_group_is_reset_with_its_own_seed():
    cfg = load_config(None, TINY)
    model, tokenizer = load_model("tiny", seed=0)
    rollout = EngineRollout(cfg, model, tokenizer, {})
    episodes = [
        Episode(item, group_id=g, sample_index=k, seed=seed, max_turns=1)
        for g, (item, seed) in enumerate([("textcraft_0", 3), ("textcraft_1", 9)])
        for k in range(2)
    ]
    trajectories = rollout(episodes, step=0)
    assert [t.seed for t in trajectories] == [3, 3, 9, 9]
    assert [t.item_id for t in trajectories] == [e.item_id for e in episodes]
