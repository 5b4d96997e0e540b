"""ScalingInter-RL turn schedules."""

from __future__ import annotations

import pytest

from horizonrl.config import ConfigError, ScheduleConfig, load_config
from horizonrl.trainer.schedule import SCHEDULES, AdaptiveSchedule, make_schedule


def test_stepwise_caps_advance_every_k_steps():
    s = make_schedule(ScheduleConfig(type="stepwise", rounds=[2, 4, 6], every=1))
    assert [s.max_turns(step) for step in range(5)] == [2, 4, 6, 6, 6]
    s = make_schedule(ScheduleConfig(type="stepwise", rounds=[10, 20, 30], every=100))
    assert [s.max_turns(step) for step in (0, 99, 100, 199, 200, 10_000)] == [10, 10, 20, 20, 30, 30]
    assert s.group_caps(150, 3) == [20, 20, 20]


def test_fixed_takes_one_cap():
    s = make_schedule(ScheduleConfig(type="fixed", rounds=[15]))
    assert {s.max_turns(step) for step in range(300)} == {15}
    with pytest.raises(ConfigError, match=r"fixed takes one cap"):
        ScheduleConfig(type="fixed", rounds=[5, 10])


def test_reference_alias_keys_select_the_stepwise_schedule():
    cfg = load_config(
        None,
        [
            "algorithm.rounds_ctrl.type=scaling_inter_stepwise",
            "algorithm.rounds_ctrl.rounds=[8,12,15]",
            "algorithm.rounds_ctrl.steps_scaling_inter=80",
        ],
    )
    s = make_schedule(cfg.schedule)
    assert type(s).__name__ == "StepwiseSchedule"
    assert [s.max_turns(step) for step in (0, 79, 80, 160)] == [8, 8, 12, 15]


def test_mixed_gives_a_seeded_fraction_the_next_cap():
    cfg = ScheduleConfig(type="mixed", rounds=[2, 4, 6], every=10, mixed_fraction=0.25)
    s = make_schedule(cfg, seed=3)
    caps = s.group_caps(0, 8)
    assert sorted(caps) == [2] * 6 + [4] * 2
    assert caps == make_schedule(cfg, seed=3).group_caps(0, 8)  # reproducible (resume)
    assert s.max_turns(0) == 2
    assert s.group_caps(25, 4) == [6, 6, 6, 6]  # last stage: nothing further to mix in


def test_adaptive_advances_on_threshold_then_on_plateau_and_resumes():
    cfg = ScheduleConfig(
        type="adaptive", rounds=[2, 4, 6], every=2, window=2, threshold=0.5, plateau_tol=0.05
    )
    s = make_schedule(cfg)
    assert isinstance(s, AdaptiveSchedule)
    s.update(0, 0.6)
    assert s.max_turns(1) == 2  # fewer than `every` steps in the stage
    s.update(1, 0.6)
    assert s.max_turns(2) == 4  # moving rate 0.6 >= 0.5
    for step, rate in zip(range(2, 5), (0.1, 0.3, 0.1), strict=True):
        s.update(step, rate)
        assert s.max_turns(step + 1) == 4
    state = s.state_dict()
    s.update(5, 0.3)  # windows (0.1, 0.3) vs (0.3, 0.1): equal means -> plateau
    assert s.max_turns(6) == 6
    resumed = make_schedule(cfg)
    resumed.load_state_dict(state)
    assert resumed.max_turns(5) == 4
    resumed.update(5, 0.3)
    assert resumed.max_turns(6) == 6 and resumed.state_dict() == s.state_dict()


def test_checkpointed_rounds_must_match():
    s = make_schedule(ScheduleConfig(type="stepwise", rounds=[2, 4], every=1))
    with pytest.raises(ValueError, match="differ"):
        s.load_state_dict({"type": "stepwise", "rounds": [3, 5]})


def test_registry_covers_every_config_type():
    from horizonrl.config import SCHEDULE_TYPES

    assert set(SCHEDULES) == set(SCHEDULE_TYPES)
