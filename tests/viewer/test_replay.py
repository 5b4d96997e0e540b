"""Splitting saved conversations into replay turns, for each action style and for sparse records."""

from __future__ import annotations

from horizonrl.agent.prompts import get_prompt
from horizonrl.viewer.replay import split_response, token_stats, turns_of


def test_search_tags_and_a_turn_without_an_action():
    prompt = get_prompt("search")
    record = {
        "item_id": "search_4",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": prompt.first_user_message("Question: who?")},
            {"role": "assistant", "content": "I should look it up."},
            {"role": "user", "content": "No <search> or <answer> tag found."},
            {"role": "assistant", "content": "Thought: look\n<search>who wrote X</search>"},
            {"role": "user", "content": "<information>Y wrote X</information>"},
            {"role": "assistant", "content": "<answer>Y</answer>"},
        ],
        "turn_rewards": [0.0, 0.0, 1.0],
        "meta": {"final_observation": "Correct."},
    }
    replay = turns_of(record)
    assert replay["instruction"] == prompt.instruction and replay["system"] == "sys"
    first, second, third = replay["turns"]
    assert first["action"] is None and "tag" in first["parse_error"]
    assert first["observation"] == "Question: who?"
    assert second["observation"] == "No <search> or <answer> tag found."
    assert (second["thought"], second["action"]) == ("look", "<search>who wrote X</search>")
    assert third["action"] == "<answer>Y</answer>" and third["reward"] == 1.0
    assert third["observation_after"] == replay["final_observation"] == "Correct."


def test_sparse_record_from_another_writer():
    replay = turns_of(
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "go north"}]}
    )
    [turn] = replay["turns"]
    assert turn["observation"] == "hi" and turn["action"] == "go north" and turn["reward"] is None
    assert turns_of({})["turns"] == [] and token_stats({})["n_tokens"] == 0


def test_thought_is_the_text_before_the_action():
    parts = split_response("Thought: the key is north.\nAction: go to key 1", "react")
    assert parts == {"thought": "the key is north.", "action": "go to key 1", "parse_error": None}
    web = split_response("Thought: open it\nAction: ```click [12]```", "backticks")
    assert web["action"] == "click [12]" and web["thought"] == "open it"


def test_plan_turns_and_reflections_are_shown_as_such():
    from horizonrl.agent.strategies import PLAN_INSTRUCTION

    prompt = get_prompt("textcraft")
    record = {
        "item_id": "textcraft_1",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": f"{prompt.instruction}\n\n{PLAN_INSTRUCTION}\n\nGoal: stick"},
            {"role": "assistant", "content": "Plan:\n1. get logs\n2. craft"},
            {"role": "user", "content": "Plan noted."},
            {"role": "assistant", "content": "Reflection: wrong.\nThought: t\nAction: get 1 oak logs"},
        ],
        "turn_rewards": [0.0, 0.0],
        "meta": {
            "strategy": "plan",
            "plan_turns": [0],
            "plans": [{"turn": 0, "steps": ["get logs", "craft"]}],
            "reflections": [{"turn": 1, "text": "wrong."}],
        },
    }
    replay = turns_of(record)
    assert replay["turns"][0]["observation"] == "Goal: stick"
    plan, act = replay["turns"]
    assert plan["kind"] == "plan" and plan["plan"] == ["get logs", "craft"] and plan["action"] is None
    assert act["kind"] == "act" and act["action"] == "get 1 oak logs" and act["reflection"] == "wrong."
    assert act["thought"] == "t"
