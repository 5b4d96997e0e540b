"""SciWorld items, splits, categories and prompt: plain data, no JVM."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from horizonrl.agent.prompts import get_prompt
from horizonrl.envs.core import UnknownItemError
from horizonrl.envs.registry import get_family
from horizonrl.envs.sciworld.expert import thought_for
from horizonrl.envs.sciworld.tasks import CATEGORIES, EXCLUDED_TASKS, TASKS, all_items, item_of


def test_item_ids_follow_the_reference_numbering() -> None:
    # Reference: walk the task table in order, skip excluded tasks, variations 0..max-1.
    expected = [
        (t.name, v) for t in TASKS if t.task_id not in EXCLUDED_TASKS for v in range(t.max_variations)
    ]
    assert len(all_items()) == len(expected) == 4639
    assert (item_of("sciworld_0").task.name, item_of("sciworld_0").variation) == ("boil", 0)
    assert (item_of("sciworld_30").task.name, item_of("sciworld_30").variation) == ("melt", 0)
    assert (item_of("sciworld_120").task.name, item_of("sciworld_120").variation) == ("use-thermometer", 0)
    # after chemistry (6-x) comes 7-1: 5-1 and 5-2 are skipped
    first_lifespan = next(i for i in all_items() if i.task.task_id == "7-1")
    assert first_lifespan.index == 4240
    last = item_of("sciworld_4638")
    assert (last.task.name, last.variation) == ("identify-life-stages-2", 9)
    for i in (0, 777, 2500, 4638):
        item = item_of(f"sciworld_{i}")
        assert (item.task.name, item.variation) == expected[i]


def test_unknown_ids_are_rejected() -> None:
    spec = get_family("sciworld")
    for bad in ("sciworld_4639", "textcraft_3", "sciworld_x", "sciworld"):
        with pytest.raises(UnknownItemError):
            spec.category_of(bad)


def test_test_split_has_200_test_variation_items_over_all_categories() -> None:
    spec = get_family("sciworld")
    test = spec.split("test")
    assert len(test) == len(set(test)) == 200
    assert all(item_of(i).task.split_of(item_of(i).variation) == "test" for i in test)
    by_category = Counter(spec.category_of(i) for i in test)
    assert set(by_category) == set(CATEGORIES)
    assert min(by_category.values()) >= 26
    tasks = {item_of(i).task.task_id for i in test}
    assert len(tasks) == 23  # every kept task appears


def test_splits_do_not_overlap_and_cover_every_item() -> None:
    splits = get_family("sciworld").splits()
    train, dev, test_all = set(splits["train"]), set(splits["dev"]), set(splits["test_all"])
    assert (len(train), len(dev), len(test_all)) == (2312, 1156, 1171)
    assert not (train & dev) and not (train & test_all) and not (dev & test_all)
    assert len(train | dev | test_all) == len(all_items())
    assert set(splits["test"]) <= test_all


def test_splits_do_not_depend_on_hash_seed() -> None:
    code = "from horizonrl.envs.sciworld.tasks import load_splits; print(load_splits()['test'])"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={
                "PYTHONHASHSEED": seed,
                "PATH": "/usr/bin:/bin",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            },
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


def test_categories_are_the_six_groups() -> None:
    assert get_family("sciworld").categories == (
        "matter",
        "measurement",
        "electricity",
        "classification",
        "chemistry",
        "life science",
    )
    assert item_of("sciworld_0").category == "matter"
    assert item_of("sciworld_4638").category == "life science"
    assert get_family("sciworld").isolate is True


def test_prompt_parses_react_and_expert_format() -> None:
    prompt = get_prompt("sciworld")
    assert "focus on OBJ" in prompt.instruction and "Action:" in prompt.instruction
    response = prompt.format_response(thought_for("move lead to metal pot"), "move lead to metal pot")
    assert response == "Thought: I put the lead in the metal pot.\nAction: move lead to metal pot"
    assert prompt.parse_action(response).action == "move lead to metal pot"
    assert (
        prompt.parse_action("Thought: the door\nAction: open door to kitchen.").action
        == "open door to kitchen"
    )
    assert prompt.parse_action("Thought: hmm").action is None
    assert thought_for("1") == "The request was ambiguous; option 1 is the one I mean."
