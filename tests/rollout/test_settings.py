"""One set of rollout defaults: the engine, the training config and both evals agree on them."""

from __future__ import annotations

from dataclasses import fields

import pytest

from horizonrl.config import ConfigError, load_config
from horizonrl.eval.evaluate import EvalSettings
from horizonrl.rollout.engine import EngineConfig
from horizonrl.rollout.settings import RolloutSettings
from horizonrl.trainer.engine_rollout import engine_config

SHARED = [f.name for f in fields(RolloutSettings)]


def _shared(settings: RolloutSettings) -> dict[str, object]:
    return {name: getattr(settings, name) for name in SHARED}


def test_every_rollout_user_has_the_one_set_of_defaults():
    cfg = load_config(None, [])
    defaults = _shared(RolloutSettings())
    assert _shared(EngineConfig()) == _shared(cfg.rollout) == defaults
    greedy = {**defaults, "temperature": 0.0}
    assert _shared(cfg.eval) == _shared(EvalSettings()) == greedy


@pytest.mark.parametrize("family", ["textcraft", "babyai", "sciworld"])
def test_the_in_run_eval_builds_the_engine_horizonrl_eval_builds(family):
    """The same eval settings give the same engine, turn cap included (the family's eval cap, not
    the schedule's), through the trainer's `engine_config` and through `EvalSettings`."""
    cfg = load_config(None, ["schedule.rounds=[2,4,6]", "eval.max_tokens=48", "logging.console=false"])
    cap = cfg.eval.turn_cap(family)
    assert cap == {"textcraft": 30, "babyai": 20, "sciworld": 30}[family]
    in_run = engine_config(cfg, greedy=True, max_turns=cap)
    assert in_run == EvalSettings(max_tokens=48, progress=False).engine_config(family)
    assert load_config(None, ["eval.max_turns=7"]).eval.turn_cap(family) == 7
    assert engine_config(cfg, greedy=False, max_turns=2).temperature == cfg.rollout.temperature == 1.0


def test_bad_settings_name_their_key():
    with pytest.raises(ConfigError, match=r"rollout.max_tokens must be >= 1, got 0"):
        load_config(None, ["rollout.max_tokens=0"])
    with pytest.raises(ConfigError, match=r"eval.top_p must be in \(0, 1\]"):
        load_config(None, ["eval.top_p=0"])
    with pytest.raises(ValueError, match="max_turns must be >= 1"):
        EngineConfig(max_turns=0)
    with pytest.raises(ValueError, match="n must be >= 1"):
        EvalSettings(n=0)
