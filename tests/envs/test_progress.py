"""The reward-shaping `info` fields of the families: `state_key`, `invalid_action`, `progress`.

Real env episodes with scripted actions; each expected value is worked out in the test."""

from __future__ import annotations

import pytest

from horizonrl.envs.babyai import BabyAIEnv
from horizonrl.envs.search import make_env as make_search_env
from horizonrl.envs.search.world import generate_world, write_world
from horizonrl.envs.textcraft import TextCraftEnv, TextCraftExpert


def _play(env, actions):
    return [env.step(a).info for a in actions]


def test_textcraft_progress_state_and_invalid_by_hand():
    """textcraft_200 is "dark oak fence": craft 3 using 2 stick + 4 dark oak planks. The shortest
    solution obtains 4 distinct items first (bamboo, dark oak logs, dark oak planks, stick), so
    each tree item first obtained is worth 1/4; the goal itself is the outcome's, not progress."""
    env = TextCraftEnv()
    _, info = env.reset("textcraft_200", seed=0)
    assert info["state_key"] == "" and "progress" not in info
    steps = _play(
        env,
        [
            "inventory",  # a query: valid, nothing obtained
            "get 4 bamboo",  # first tree item: 1/4
            "get 4 bamboo",  # again: nothing new
            "craft 1 stone using 1 cobblestone",  # refused (no cobblestone): invalid
            "get 2 cobblestone",  # valid, but not on the fence's tree
            "get 1 dark oak logs",  # 1/4
            "craft 4 dark oak planks using 1 dark oak logs",  # 1/4 (the logs are used up: no matter)
            "craft 2 stick using 4 bamboo",  # 1/4 -> 1 in all
            "get 1 oak logs",  # a tree item (planks accept oak) but the sum is already 1: 0
            "craft 3 dark oak fence using 2 stick, 4 dark oak planks",  # the goal: outcome, no progress
        ],
    )
    assert [s["progress"] for s in steps] == [0, 0.25, 0, 0, 0, 0.25, 0.25, 0.25, 0, 0]
    assert [s["invalid_action"] for s in steps] == [False, False, False, True] + [False] * 6
    assert steps[2]["state_key"] == "bamboo:8"
    assert steps[3]["state_key"] == steps[2]["state_key"]  # a refused action changes no state
    assert steps[7]["state_key"] == "bamboo:4;cobblestone:2;dark oak planks:4;stick:2"
    assert steps[-1]["success"]


def test_textcraft_expert_progress_sums_to_one_on_every_depth():
    env = TextCraftEnv()
    for item in ("textcraft_0", "textcraft_130", "textcraft_420", "textcraft_540"):
        obs, info = env.reset(item, seed=3)
        expert = TextCraftExpert()
        expert.reset(item, obs, info)
        total = 0.0
        while True:
            result = env.step(expert.act(obs)[1])
            obs, total = result.observation, total + result.info["progress"]
            if result.done:
                break
        assert result.info["success"] and result.info["progress"] == 0  # the goal's craft: outcome only
        assert total == pytest.approx(1.0), item


def test_babyai_pickup_sub_goals_by_hand():
    """babyai_56 is Pickup "pick up a grey box", the box in view at reset: sub-goals seen, facing,
    done; the mission's completion is the outcome, so N = 3 - 1 = 2 units, and "seen" is
    reached at reset without progress."""
    env = BabyAIEnv()
    _, info = env.reset("babyai_56")
    start = info["state_key"]
    assert start.startswith("12,19,2|-|")  # pose (x, y, dir), nothing carried, grid hash
    drop, goto, turn, pickup = _play(env, ["drop", "go to grey box 1", "turn left", "pickup grey box 1"])
    assert drop["invalid_action"] and drop["progress"] == 0 and drop["state_key"] == start
    assert not goto["invalid_action"] and goto["progress"] == 0.5  # facing the box: 1 of 2 units
    assert turn["progress"] == 0  # facing it again later is not new
    assert pickup["success"] and pickup["progress"] == 0  # done = the outcome
    assert pickup["state_key"].startswith("12,17,3|grey box|")
    grid = lambda key: key.rsplit("|", 1)[1]  # noqa: E731
    assert grid(pickup["state_key"]) != grid(goto["state_key"])  # the box left the grid


def test_babyai_sequence_counts_each_clause():
    """babyai_47: "go to a key and go to the ball after you go to the red ball and go to a key":
    4 go-to clauses x (seen, done) = 8 sub-goals, N = 7. Played by hand: the red ball and a key
    come into view (2/7), the red ball is reached (1/7), then the blue door shows the second key
    and the ball (2/7), the key is reached, which completes "red ball and a key" and the "key" of
    the other part (2/7); the last "go to red ball" completes the mission: outcome, no progress."""
    env = BabyAIEnv()
    env.reset("babyai_47")
    actions = [
        "turn right",
        "go to red ball 1",
        "turn left",
        "toggle and go through blue door 1",
        "go to purple key 1",
        "go to red ball 1",
    ]
    steps = _play(env, actions)
    assert [round(s["progress"] * 7) for s in steps] == [2, 1, 0, 2, 2, 0]
    assert steps[-1]["success"] and sum(s["progress"] for s in steps) == pytest.approx(1.0)


@pytest.fixture(scope="module")
def search_env(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("search_progress") / "world"
    write_world(generate_world(5, entities=200, n_test=15, n_train=5), out)
    return make_search_env(world=str(out))


def test_search_progress_when_a_passage_first_holds_the_answer(search_env):
    _, info = search_env.reset("search_0")
    answer = search_env._item.answers[0]
    assert info["state_key"] == ""
    steps = _play(
        search_env,
        [
            "no tags here",  # invalid: no <search> / <answer>
            "<search></search>",  # invalid: empty
            f"<search>{answer}</search>",  # the answer's own passage: progress 1
            f"<search>{answer}</search>",  # found before: 0
        ],
    )
    assert [s["invalid_action"] for s in steps] == [True, True, False, False]
    assert [s.get("progress", 0.0) for s in steps] == [0, 0, 1.0, 0]
    ids = steps[2]["state_key"].split()
    assert len(ids) == 3 and ids == sorted(ids) and steps[3]["state_key"] == steps[2]["state_key"]


@pytest.mark.slow
def test_sciworld_progress_is_the_score_rising_short_of_completion():
    """sciworld_0 (boil water): the gold path's first score rises are "activate sink" (+0.03) and
    "focus on substance in metal pot" (+0.67); progress is exactly those rises."""
    from horizonrl.envs.sciworld.env import SciWorldEnv

    env = SciWorldEnv()
    try:
        _, info = env.reset("sciworld_0")
        assert "state_key" not in info  # none: gigpo finds no step groups here
        actions = [
            "xyzzy the frobnicator",  # no action matches: invalid
            "open door to kitchen",
            "go to kitchen",
            "pick up thermometer",
            "open cupboard",
            "pick up metal pot",
            "move metal pot to sink",
            "activate sink",
            "deactivate sink",
            "pick up metal pot",
            "focus on substance in metal pot",
        ]
        steps = [env.step(a) for a in actions]
        assert [s.info["invalid_action"] for s in steps] == [True] + [False] * 10
        progress = [round(s.info["progress"], 6) for s in steps]
        assert progress == [0, 0, 0, 0, 0, 0, 0, 0.03, 0, 0, 0.67]
        assert progress == [round(max(0.0, s.reward), 6) for s in steps]
    finally:
        env.close()
