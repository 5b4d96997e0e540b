"""Failure modes of eval episodes: invalid turns, an agent stuck on a rejected action, the rejections."""

from __future__ import annotations

import json

from benchmarks import failure_modes as fm


def episode(actions: list[str], observations: list[str], invalid: list[bool], success: bool = False) -> dict:
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "craft 1 stick"}]
    for act, obs in zip(actions, observations, strict=True):
        messages += [
            {"role": "assistant", "content": f"Thought: go.\nAction: {act}"},
            {"role": "user", "content": obs},
        ]
    unparsed = sum(1 for a in actions if not a)  # an empty action: what the rollout counts as a parse error
    return {
        "messages": messages,
        "turn_invalid": invalid,
        "success": success,
        "truncated": not success,
        "meta": {"parse_errors": unparsed},
    }


SOLVED = episode(["get 1 oak log", "craft 4 planks using 1 oak log"], ["Got", "Done"], [False, False], True)
STUCK = episode(  # rejected, then the same action again: it ignored the feedback
    ["craft 3 stick using 1 planks", "craft 3 stick using 1 planks", "get 2 planks"],
    ["Could not craft 3 stick: makes 4", "Could not craft 3 stick: makes 4", "Could not get planks"],
    [True, True, True],
)
RECOVERED = episode(  # rejected, then a different action (still failed at the cap)
    ["get 2 planks", "get 1 oak log"], ["Could not get planks: not raw", "Got 1 oak log"], [True, False]
)
NO_INVALID = episode(
    ["get 1 oak log", ""], ["Got 1 oak log", "Your response had no 'Action:' line."], [False, False]
)


def test_counts_a_stuck_agent_apart_from_one_that_changed_its_action():
    m = fm.failure_modes([SOLVED, STUCK, RECOVERED, NO_INVALID])
    assert (m["episodes"], m["solved"], m["failed"]) == (4, 1, 3)
    assert m["failed_invalid"] == 2 and m["failed_stuck"] == 1 and m["failed_truncated"] == 3
    assert m["failed_unparsed"] == 1
    # each failed episode's first rejection, digits as N
    assert m["first_rejections"] == [("Could not craft", 1), ("Could not get", 1)]
    assert fm.rejection_kind("Wrong ingredient counts for 6 stone") == "Wrong ingredient counts"


def test_a_protocol_folder_pools_each_arms_seeds_into_one_row(tmp_path, capsys):
    for run, episodes in {
        "grpo/seed_1": [STUCK, SOLVED],
        "grpo/seed_2": [RECOVERED, SOLVED],
        "sft": [NO_INVALID, STUCK],
    }.items():
        path = tmp_path / run / fm.FINAL_EVAL
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    rows = fm.load(tmp_path)
    assert sorted(rows) == ["grpo", "sft"] and len(rows["grpo"]) == 4

    assert fm.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    grpo = "| grpo | 4 | 2 (50%) | 2 | 2 (100%) | 1 (50%) | 0 (0%) | 2 (100%) |"
    assert grpo + " Could not craft 1, Could not get 1 |" in out
    assert "| sft | 2 | 0 (0%) | 2 | 1 (50%) | 1 (50%) | 1 (50%) | 2 (100%) |" in out

    # files are rows of their own, by path: two seeds' evals side by side
    seeds = [tmp_path / f"grpo/seed_{s}" / fm.FINAL_EVAL for s in (1, 2)]
    assert fm.main([str(f) for f in seeds]) == 0
    out = capsys.readouterr().out
    assert f"| {seeds[0]} | 2 | 1 (50%) | 1 | 1 (100%) | 1 (100%) |" in out
    assert f"| {seeds[1]} | 2 | 1 (50%) | 1 | 1 (100%) | 0 (0%) |" in out


def test_expert_counts_the_episodes_that_open_with_another_move_than_the_experts(tmp_path, capsys):
    # textcraft_157: blue ice from 9 packed ice, each from 9 ice; the expert opens with `get 81 ice`
    right = {**episode(["get 81 ice"], ["Got 81 ice"], [False], True), "item_id": "textcraft_157"}
    # the plan's arithmetic collapsed: 9 ice, then blue ice straight from it
    short = episode(["get 9 ice", "craft 1 blue ice using 9 ice"], ["Got 9 ice", "No recipe makes"], [0, 1])
    short["item_id"] = "textcraft_157"
    assert fm.expert_opening("textcraft_157") == "get 81 ice"
    m = fm.failure_modes([right, short, short], fm.expert_opening)
    assert (m["solved_other_opening"], m["failed_other_opening"]) == (0, 2)
    assert "failed_other_opening" not in fm.failure_modes([right, short])  # only with --expert

    path = tmp_path / "sft" / fm.FINAL_EVAL
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in [right, short, short]))
    assert fm.main([str(tmp_path), "--expert"]) == 0
    assert "another opening than the expert's: solved / failed |" in (out := capsys.readouterr().out)
    assert out.splitlines()[-1].endswith("| No recipe makes 2 | 0 (0%) / 2 (100%) |")
