"""benchmarks/textcraft_shortcut.py: which eval episodes craft the goal right after their first get."""

from __future__ import annotations

import json

from benchmarks.textcraft_shortcut import shortcut, summary

TASK = "Crafting commands:\ncraft 3 warped door using 6 warped planks\n\nGoal: craft warped door."


def _episode(category, success, *actions):
    messages = [{"role": "system", "content": "Act."}, {"role": "user", "content": TASK}]
    for a in actions:
        messages += [
            {"role": "assistant", "content": f"Thought: go.\nAction: {a}"},
            {"role": "user", "content": "ok"},
        ]
    return {"item_id": "textcraft_391", "category": category, "success": success, "messages": messages}


def test_the_goal_crafted_right_after_the_first_get_is_a_shortcut():
    assert shortcut(
        _episode("depth 2", False, "get 2 warped stems", "craft 3 warped door using 2 warped stems")
    )
    # the intermediate first: no shortcut; a second get, or no get first: no shortcut either
    assert not shortcut(
        _episode("depth 2", True, "get 2 warped stems", "craft 8 warped planks using 2 warped stems")
    )
    assert not shortcut(_episode("depth 2", False, "get 2 warped stems", "get 6 warped planks"))
    assert not shortcut(_episode("depth 2", False, "inventory", "craft 3 warped door using 6 warped planks"))
    assert not shortcut(_episode("depth 2", False, "get 2 warped stems"))


def test_summary_counts_per_category(tmp_path):
    rows = [
        _episode("depth 2", False, "get 2 warped stems", "craft 3 warped door using 2 warped stems"),
        _episode("depth 2", True, "get 2 warped stems", "craft 8 warped planks using 2 warped stems"),
    ]
    (tmp_path / "eval" / "final").mkdir(parents=True)
    (tmp_path / "eval" / "final" / "trajectories.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    assert summary(tmp_path) == {"depth 2": {"items": 2, "successes": 1, "shortcuts": 1}}
