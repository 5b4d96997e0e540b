"""The web expert: finds elements by role and name in the observation, solves tasks in real Chromium.

The whole test set through `horizonrl serve web` is measured by `horizonrl solve web --split test
--server URL` (BENCHMARKS.md: 50/50); here one task per category and the expert's own rules.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from horizonrl.agent.prompts import get_prompt
from horizonrl.envs.registry import get_family
from horizonrl.envs.web.env import WebEnv
from horizonrl.envs.web.expert import WebExpert, find_element
from horizonrl.envs.web.sites import RunningSites
from horizonrl.eval.solve import play_expert

SPEC = get_family("web")

OBSERVATION = """OBSERVATION:
Tab 0 (current): Shop

[1] RootWebArea 'Shop' focused: True
\t[2] link 'Next page'
\t[3] textbox 'Search ' required: False
\t[4] button "Add Bob's Tee to cart"
\t[5] link 'Next page'
URL: http://127.0.0.1:1/
OBJECTIVE: x
PREVIOUS ACTION: None"""


def test_find_element_by_role_and_name() -> None:
    assert find_element(OBSERVATION, "link", "Next page").id == 2  # type: ignore[union-attr]
    assert find_element(OBSERVATION, "link", "Next page", nth=1).id == 5  # type: ignore[union-attr]
    assert find_element(OBSERVATION, "textbox", "Search").id == 3  # type: ignore[union-attr]
    assert find_element(OBSERVATION, "button", "Add Bob's Tee to cart").id == 4  # type: ignore[union-attr]
    assert find_element(OBSERVATION, "button", "Next page") is None  # the role must match too
    assert find_element(OBSERVATION, "link", "Next page", nth=2) is None


def test_expert_writes_webarena_actions_and_gives_up_on_a_missing_element() -> None:
    expert = WebExpert()
    expert.steps = [
        {"op": "type", "role": "textbox", "name": "Search", "text": "blue tee", "enter": True},
        {"op": "click", "role": "link", "name": "Next page", "nth": 1},
        {"op": "click", "role": "link", "name": "Checkout"},
        {"op": "stop", "answer": "$3.00"},
    ]
    assert expert.act(OBSERVATION)[1] == "type [3] [blue tee] [1]"
    assert expert.act(OBSERVATION)[1] == "click [5]"
    thought, action = expert.act(OBSERVATION)
    assert action == "stop []" and "cannot find the link 'Checkout'" in thought
    assert expert.act(OBSERVATION)[1] == "stop []"  # it does not resume after giving up
    prompt = get_prompt("web")
    assert prompt.parse_action(prompt.format_response("t", "click [5]")).action == "click [5]"


@pytest.fixture(scope="module")
def env(sites: RunningSites) -> Iterator[WebEnv]:
    e = WebEnv(sites=sites.to_env())
    yield e
    e.close()


@pytest.mark.parametrize("category", SPEC.categories)
def test_expert_solves_a_task_of_each_category(env: WebEnv, category: str) -> None:
    item = next(i for i in SPEC.split("test") if SPEC.category_of(i) == category)
    traj = play_expert(env, SPEC, item)
    assert traj.success and traj.score == 1.0 and traj.terminated, traj.meta.get("final_observation", "")[
        :500
    ]
    assert all(m["content"].startswith("Thought: ") for m in traj.messages if m["role"] == "assistant")
