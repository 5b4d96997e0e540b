"""Per-turn credit in the trainer: reward kinds, the invalid-action penalty, shaped progress, the
turn structure gigpo reads, `filter_groups` with step-level signal, and what the engine records."""

from __future__ import annotations

import pytest
import torch

from horizonrl.config import load_config
from horizonrl.models import load_tokenizer
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.rollout.envpool import LocalEnvPool
from horizonrl.rollout.trajectory import Trajectory, read_jsonl, write_jsonl
from horizonrl.trainer.batch import collate, turn_steps
from horizonrl.trainer.rewards import (
    select_for_update,
    step_returns,
    trajectory_return,
    turn_credits,
    turn_rewards_batch,
    turn_stats,
)
from tests.rollout.helpers import ScriptedBackend


def _cfg(*overrides):
    return load_config(None, list(overrides))


def _traj(
    group=0, success=True, states=("", "a", "b"), invalid=(True, False, False), progress=(0.5, 0.75, 0.0)
):
    """Three turns over tokens [prompt, t0, t0, obs, t1, obs, t2, t2]: ends at 2, 4, 7."""
    n = 8
    mask = [0, 1, 1, 0, 1, 0, 1, 1]
    return Trajectory(
        item_id="textcraft_0",
        category="depth 1",
        success=success,
        reward=float(success),
        num_turns=3,
        turn_rewards=[0.0, 0.0, float(success)],
        turn_states=list(states),
        turn_invalid=list(invalid),
        turn_progress=list(progress),
        token_ids=list(range(100, 100 + n)),
        loss_mask=mask,
        logprobs=[-1.0 if m else None for m in mask],
        prompt_length=1,
        turn_ends=[2, 4, 7],
        group_id=group,
    )


def test_reward_kinds_penalty_and_shaping_by_hand():
    """Progress (0.5, 0.75, 0) is clipped to a sum of 1: (0.5, 0.5, 0); weight 0.5 -> (0.25, 0.25, 0).
    The penalty 0.1 hits the first (invalid) turn; the outcome 1 sits on the last sampled token."""
    t = _traj()
    shaped = _cfg(
        "algorithm.reward=shaped", "algorithm.shaped_weight=0.5", "algorithm.invalid_action_penalty=0.1"
    )
    assert turn_credits(t, shaped) == pytest.approx([0.15, 0.25, 0.0])
    assert trajectory_return(t, shaped) == pytest.approx(1.4)
    batch = collate([t])
    rewards = turn_rewards_batch(batch, [t], shaped)
    torch.testing.assert_close(rewards[0], torch.tensor([0, 0, 0.15, 0, 0.25, 0, 0, 1.0]))
    # outcome: no shaping, the penalty still applies; turn: env turn rewards on their turns
    outcome = _cfg("algorithm.invalid_action_penalty=0.1")
    assert turn_credits(t, outcome) == pytest.approx([-0.1, 0, 0]) and trajectory_return(t, outcome) == 0.9
    turn = _cfg("algorithm.reward=turn")
    torch.testing.assert_close(
        turn_rewards_batch(batch, [t], turn)[0], torch.tensor([0, 0, 0, 0, 0, 0, 0, 1.0])
    )
    # a failed trajectory scored zero gets nothing, penalty included
    t.failed = True
    assert trajectory_return(t, shaped) == 0.0 and turn_credits(t, shaped) == [0.0] * 3
    # shaping never exceeds its weight, however much progress a family reports
    greedy = _traj(progress=(1.0, 1.0, 1.0), invalid=(False,) * 3, success=False)
    assert sum(turn_credits(greedy, shaped)) == pytest.approx(0.5)


def test_bad_reward_settings_are_rejected():
    from horizonrl.config import ConfigError

    with pytest.raises(ConfigError, match=r"algorithm.reward='dense'.*shaped"):
        _cfg("algorithm.reward=dense")
    with pytest.raises(ConfigError, match="shaped_weight must be in"):
        _cfg("algorithm.shaped_weight=1.5")
    with pytest.raises(ConfigError, match="invalid_action_penalty must be >= 0"):
        _cfg("algorithm.invalid_action_penalty=-1")


def test_turn_steps_maps_sampled_tokens_to_turns_and_states():
    a, b = _traj(states=("", "a", "b")), _traj(states=("", None, "a"))
    b.token_ids, b.loss_mask, b.logprobs = (
        b.token_ids + [1, 2],
        b.loss_mask + [0, 0],
        b.logprobs + [None, None],
    )
    batch = collate([a, b])
    turns = turn_steps(batch.loss_mask, [a, b])
    assert turns.turn_index.tolist() == [
        [-1, 0, 0, -1, 1, -1, 2, 2, -1, -1],
        [-1, 0, 0, -1, 1, -1, 2, 2, -1, -1],
    ]
    # "" -> 0, "a" -> 1, "b" -> 2 across the batch; None -> -1
    assert turns.state_ids.tolist() == [
        [-1, 0, 0, -1, 1, -1, 2, 2, -1, -1],
        [-1, 0, 0, -1, -1, -1, 1, 1, -1, -1],
    ]
    # an old record without states: every turn unknown
    a.turn_states = []
    assert int(turn_steps(batch.loss_mask, [a, b]).state_ids[0].max()) == -1


def test_filter_groups_keeps_an_equal_return_group_only_for_a_step_level_estimator():
    """Both samples solve (returns equal) but B wastes a turn in state "": its step returns from ""
    (0.95^2 and 0.95^1) differ from A's (0.95), so gigpo's step group carries signal."""
    a = _traj(states=("", "x", "y"), invalid=(False,) * 3)
    b = _traj(states=("", "", "x"), invalid=(False,) * 3)
    b.turn_rewards = [0.0, 0.0, 1.0]
    c, d = _traj(group=1, states=("", "x", "y")), _traj(group=1, states=("", "x", "y"))  # identical
    trajs = [a, b, c, d]
    grpo = _cfg("algorithm.filter_groups=true", "algorithm.adv_estimator=grpo")
    gigpo = _cfg("algorithm.filter_groups=true", "algorithm.adv_estimator=gigpo")
    assert select_for_update(trajs, grpo)[0] == []
    kept, stats = select_for_update(trajs, gigpo)
    assert kept == [a, b] and stats["groups/informative_frac"] == 0.5
    assert step_returns(b, gigpo) == pytest.approx([0.95**2, 0.95, 1.0])
    assert stats["turns/invalid_frac"] == pytest.approx(2 / 12)  # c and d have one invalid turn each


def test_turn_stats_average_clipped_progress_over_played_episodes():
    played, failed = _traj(), _traj()
    failed.failed = True
    stats = turn_stats([played, failed])
    assert stats == {"turns/invalid_frac": 2 / 6, "progress/mean": 1.0}


def test_per_turn_fields_round_trip_and_misalignment_is_an_error(tmp_path):
    t = _traj(states=("", None, "b"))
    write_jsonl(tmp_path / "t.jsonl", [t])
    [back] = read_jsonl(tmp_path / "t.jsonl")
    assert (back.turn_states, back.turn_invalid, back.turn_progress) == (
        ["", None, "b"],
        [True, False, False],
        [0.5, 0.75, 0.0],
    )
    record = t.to_dict() | {"turn_invalid": [True]}
    with pytest.raises(ValueError, match="turn_invalid has 1 entries for 3 turns"):
        Trajectory.from_dict(record)


def test_the_engine_records_start_states_invalid_turns_and_progress():
    """textcraft_200 (dark oak fence, 4 progress units) with scripted replies: no action (invalid,
    env not stepped), get bamboo (1/4), a refused craft (invalid), get dark oak logs (1/4)."""
    replies = iter(
        [
            "Thought: hmm.",
            "Thought: bamboo.\nAction: get 4 bamboo",
            "Thought: stone.\nAction: craft 1 stone using 1 cobblestone",
            "Thought: logs.\nAction: get 1 dark oak logs",
        ]
    )
    backend = ScriptedBackend(load_tokenizer("tiny"), lambda req: next(replies))
    engine = RolloutEngine(backend, LocalEnvPool("textcraft"), EngineConfig(max_turns=4, progress=False))
    [t] = engine.run(["textcraft_200"])
    assert t.num_turns == 4 and t.meta["parse_errors"] == 1
    assert t.turn_states == ["", "", "bamboo:4", "bamboo:4"]  # each turn's state before it
    assert t.turn_invalid == [True, False, True, False]
    assert t.turn_progress == [0.0, 0.25, 0.0, 0.25]
    assert t.meta["state_key"] == "bamboo:4;dark oak logs:1"  # the final state
