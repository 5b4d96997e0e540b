from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from horizonrl.agent.prompts import FamilyPrompt, register_prompt
from horizonrl.cli import main
from horizonrl.envs.core import EnvError, StepResult, make_info
from horizonrl.envs.registry import Detour, register
from horizonrl.eval import solve
from horizonrl.eval.metrics import success_summary
from horizonrl.eval.solve import play_expert, solve_items
from horizonrl.rollout.trajectory import iter_jsonl
from tests.envs.toy import TOY_SPEC, CountEnv

register(TOY_SPEC, overwrite=True)
register_prompt(FamilyPrompt(family="toy", instruction="Count up with 'inc'."))


def test_expert_episode_is_written_in_the_agent_format():
    traj = play_expert(CountEnv(), TOY_SPEC, "toy_2")
    assert traj.success and traj.score == 1.0 and traj.terminated and not traj.truncated
    assert traj.num_turns == 3 and traj.turn_rewards == [0.0, 0.0, 1.0]
    roles = [m["role"] for m in traj.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert traj.messages[1]["content"] == "Count up with 'inc'.\n\nCount to 3."
    assert traj.messages[2]["content"] == "Thought: Increase the count.\nAction: inc"
    assert traj.meta["final_observation"] == "Count is 3."


def test_turn_cap_truncates_expert_episode():
    traj = play_expert(CountEnv(), TOY_SPEC, "toy_2", max_turns=2)
    assert traj.truncated and not traj.terminated and not traj.success and traj.num_turns == 2


class _Crashes(CountEnv):
    def step(self, action: str) -> StepResult:
        raise EnvError("backend died")


def test_env_failure_marks_trajectory_failed_and_counts_as_unsolved():
    traj = play_expert(_Crashes(), TOY_SPEC, "toy_1")
    assert traj.failed and traj.fail_reason == "backend died" and not traj.success
    summary = success_summary([traj, play_expert(CountEnv(), TOY_SPEC, "toy_3")], TOY_SPEC.categories)
    assert summary["n"] == 2 and summary["success_rate"] == 0.5
    assert summary["by_category"]["odd"] == {"n": 2, "success_rate": 0.5, "mean_score": 0.5}
    assert summary["by_category"]["even"]["n"] == 0


def test_solve_items_keeps_item_order_with_several_workers():
    items = TOY_SPEC.split("train")
    trajs = solve_items(CountEnv, TOY_SPEC, items, workers=3)
    assert [t.item_id for t in trajs] == items and all(t.success for t in trajs)


class _LongCount(CountEnv):
    """Count to 150: longer than any turn cap an expert used to get by default (100)."""

    def reset(self, item_id, *, seed=None):
        observation, info = super().reset(item_id, seed=seed)
        self.target = 150
        return observation, info


def test_expert_without_cap_plays_to_the_end():
    traj = play_expert(_LongCount(), TOY_SPEC, "toy_2")
    assert traj.success and traj.terminated and not traj.truncated and traj.num_turns == 150
    assert traj.max_turns is None


class _NeverDone(CountEnv):
    def step(self, action: str) -> StepResult:
        return StepResult("Nothing happens.", 0.0, False, False, make_info(False, 0.0, "even"))


def test_uncapped_expert_that_never_finishes_is_stopped_as_failed(monkeypatch):
    monkeypatch.setattr(solve, "EXPERT_TURN_GUARD", 7)
    traj = play_expert(_NeverDone(), TOY_SPEC, "toy_2")
    assert traj.failed and not traj.truncated and not traj.success and traj.num_turns == 7
    assert "7 turns" in traj.fail_reason


def _summary(capsys, *args):
    assert main(["solve", "toy", "--split", "train", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_solve_summary_counts_truncations_under_a_cap(capsys):
    # train items toy_0..toy_7 count to 1, 2, 3, 1, 2, 3, 1, 2: a cap of 2 cuts toy_2 and toy_5
    *lines, last = _summary(capsys, "--max-turns", "2")
    summary = json.loads(last)
    assert {"family", "split", "n", "success_rate", "mean_score", "by_category"} <= set(summary)
    assert summary["n"] == 8 and summary["success_rate"] == 0.75
    assert summary["max_turns"] == 2 and summary["truncated"] == 2
    assert any("2 of 8 episodes truncated (unsolved) at --max-turns 2" in line for line in lines)

    *lines, last = _summary(capsys)
    summary = json.loads(last)
    assert summary["success_rate"] == 1.0 and summary["max_turns"] is None and summary["truncated"] == 0
    assert not any("truncated" in line for line in lines)


def test_solve_out_writes_every_trajectory(tmp_path, capsys):
    out = tmp_path / "demos" / "toy_train.jsonl"
    _summary(capsys, "--out", str(out))
    trajs = list(iter_jsonl(out))
    assert [t.item_id for t in trajs] == TOY_SPEC.split("train") and all(t.success for t in trajs)
    assert [p.name for p in out.parent.iterdir()] == ["toy_train.jsonl"]  # no temporary file left


class _FlagsRejections(CountEnv):
    """CountEnv whose rejections say so in `info` (as the built-in families' do)."""

    def step(self, action: str) -> StepResult:
        result = super().step(action)
        if action.strip() != "inc":
            result.info["invalid_action"] = True
        return result


def _count_down(task: str, action: str, rng: random.Random) -> Detour:
    return Detour("Count down.", "dec", "Only inc counts up.")


def test_detours_put_a_weight_0_mistake_and_its_rejection_before_the_expert_action():
    spec = replace(TOY_SPEC, detour=_count_down)
    traj = play_expert(_FlagsRejections(), spec, "toy_2", detours=1.0)
    assert traj.success and not traj.failed and traj.num_turns == 6 and traj.meta["detours"] == 3
    replies = [m for m in traj.messages if m["role"] == "assistant"]
    wrong = {"role": "assistant", "content": "Thought: Count down.\nAction: dec", "weight": 0}
    recovery = {"role": "assistant", "content": "Thought: Only inc counts up.\nAction: inc"}
    assert replies == [wrong, recovery] * 3
    assert traj.messages[3]["content"].startswith("Invalid action.")
    again = play_expert(_FlagsRejections(), spec, "toy_2", detours=0.5)
    assert again.messages == play_expert(_FlagsRejections(), spec, "toy_2", detours=0.5).messages  # seeded
    plain = play_expert(CountEnv(), TOY_SPEC, "toy_2")
    assert play_expert(_FlagsRejections(), spec, "toy_2").messages == plain.messages  # detours=0: none


def test_a_detour_the_env_does_not_flag_fails_the_demo_and_bad_detours_are_refused():
    spec = replace(TOY_SPEC, detour=_count_down)
    traj = play_expert(CountEnv(), spec, "toy_2", detours=1.0)
    assert traj.failed and "detour 'dec' was not rejected" in traj.fail_reason and not traj.success
    with pytest.raises(ValueError, match="family 'toy' has no detour"):
        play_expert(CountEnv(), TOY_SPEC, "toy_2", detours=0.3)
    with pytest.raises(ValueError, match="probability from 0 to 1, got 1.5"):
        play_expert(CountEnv(), TOY_SPEC, "toy_2", detours=1.5)
    with pytest.raises(SystemExit, match="horizonrl solve: family 'toy' has no detour"):
        main(["solve", "toy", "--split", "train", "--detours", "0.3"])


def test_expert_kwargs_reach_the_experts_factory_and_bad_ones_are_refused(tmp_path, capsys):
    out = tmp_path / "textcraft_test.jsonl"
    args = ["solve", "textcraft", "--split", "test", "--limit", "3", "--out", str(out)]
    assert main([*args, "--expert-kwargs", '{"worked": true}']) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["success_rate"] == 1.0
    worked = [t.messages[2]["content"] for t in iter_jsonl(out)]
    assert all(t.meta["expert_kwargs"] == {"worked": True} for t in iter_jsonl(out))  # the file says so
    assert main(args) == 0
    plain = [t.messages[2]["content"] for t in iter_jsonl(out)]
    assert not any("expert_kwargs" in t.meta for t in iter_jsonl(out))
    assert all(" need" in w and "I need" not in w for w in worked) and all("I need" in p for p in plain)
    for bad, message in [("{worked}", "not valid JSON"), ("[1]", "must be a JSON object, got '[1]'")]:
        with pytest.raises(SystemExit):
            main([*args, "--expert-kwargs", bad])
        assert f"argument --expert-kwargs: {message}" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="horizonrl solve: the textcraft expert does not take"):
        main([*args, "--expert-kwargs", '{"wroked": true}'])
    with pytest.raises(SystemExit, match="horizonrl solve: the toy expert does not take"):
        main(["solve", "toy", "--split", "train", "--expert-kwargs", '{"worked": true}'])
