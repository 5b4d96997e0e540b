from __future__ import annotations

from horizonrl.agent.prompts import FamilyPrompt, register_prompt
from horizonrl.envs.core import EnvError, StepResult
from horizonrl.envs.registry import register
from horizonrl.eval.metrics import success_summary
from horizonrl.eval.solve import play_expert, solve_items
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
