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
