"""`WebEnv` in real Chromium on the project's sites: contract, exact resets, WebArena configs, screenshots."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from horizonrl.envs.checker import check_env
from horizonrl.envs.core import UnknownItemError
from horizonrl.envs.registry import get_family
from horizonrl.envs.web import tasks
from horizonrl.envs.web.env import WebEnv, load_judge
from horizonrl.envs.web.evaluators import FuzzyMatchNeedsJudge
from horizonrl.envs.web.expert import find_element
from horizonrl.envs.web.sites import RunningSites
from horizonrl.eval.solve import play_expert
from horizonrl.rollout.trajectory import read_jsonl, write_jsonl
from tests.ports import dead_url

SPEC = get_family("web")


DEAD = dead_url()


@pytest.fixture(scope="module")
def env(sites: RunningSites) -> Iterator[WebEnv]:
    e = WebEnv(sites=sites.to_env())
    yield e
    e.close()


def first_of_each_category() -> list[str]:
    test = SPEC.split("test")
    return [next(i for i in test if SPEC.category_of(i) == c) for c in SPEC.categories]


def state_changing_item() -> str:
    return next(i for i in SPEC.split("test") if "db_state" in tasks.get_task(i)["eval"]["eval_types"])


def test_registered_family() -> None:
    assert SPEC.categories == tasks.CATEGORIES and SPEC.isolate and SPEC.host_services is not None


def test_check_env_locally(env: WebEnv) -> None:
    check_env(env, SPEC, item_ids=first_of_each_category()[:2], n_actions=3)


def test_reset_observation_and_info(env: WebEnv) -> None:
    item = SPEC.split("test")[0]
    observation, info = env.reset(item, seed=0)
    task = tasks.get_task(item)
    assert observation.startswith("OBSERVATION:\nTab 0 (current): ")
    assert "[1] RootWebArea " in observation and f"OBJECTIVE: {task['intent']}" in observation
    assert observation.rstrip().endswith("PREVIOUS ACTION: None")
    assert info["category"] == SPEC.category_of(item) and info["success"] is False
    assert info["sites"] == task["sites"] and set(info["site_urls"]) >= set(task["sites"])
    assert info["object"]["intent"] == task["intent"]
    with pytest.raises(UnknownItemError):
        env.reset("web_999999")


def test_state_changing_task_solved_twice_the_same(env: WebEnv) -> None:
    """Reset restores the exact start state: the second solve sees the pages the first saw."""
    item = state_changing_item()
    first = play_expert(env, SPEC, item)
    second = play_expert(env, SPEC, item)
    assert first.success and first.score == 1.0, first.messages[-1]
    assert second.to_dict() == first.to_dict()


def test_invalid_action_and_stop_without_solving(env: WebEnv) -> None:
    env.reset(SPEC.split("test")[0])
    bad = env.step("fly [1]")
    assert bad.observation.startswith("Invalid action 'fly [1]'") and not bad.done and bad.reward == 0
    stop = env.step("stop [certainly not the answer]")
    assert stop.terminated and stop.reward == 0.0 and stop.info["success"] is False
    after = env.step("click [1]")
    assert after.terminated and "The episode is over" in after.observation


def test_screenshots_are_saved_beside_the_trajectories(env: WebEnv, tmp_path: Path) -> None:
    env.screenshots = True
    try:
        traj = play_expert(env, SPEC, SPEC.split("test")[0])
    finally:
        env.screenshots = False
    views = traj.meta["views"]
    assert sorted(map(int, views)) == list(range(traj.num_turns + 1))
    assert base64.b64decode(views["0"]["screenshot"])[:8] == b"\x89PNG\r\n\x1a\n"
    write_jsonl(tmp_path / "trajectories.jsonl", [traj])
    (back,) = read_jsonl(tmp_path / "trajectories.jsonl")
    paths = [back.meta["views"][str(turn)]["screenshot"] for turn in range(traj.num_turns + 1)]
    assert all(p.startswith("trajectories.screenshots/") and p.endswith(".png") for p in paths)
    assert (tmp_path / paths[-1]).read_bytes()[:4] == b"\x89PNG"


# ---- real WebArena: its config files and variables, pointed at our sites ---------------------


def write_configs(folder: Path) -> None:
    """Four WebArena-format config files (as WebArena's `config_files/N.json`)."""
    base = {"require_login": False, "storage_state": None, "require_reset": False, "intent_template": ""}
    configs = [
        {"sites": ["shopping"], "start_url": "__SHOPPING__", "intent": "Name a product category.",
         "eval": {"eval_types": ["string_match"], "reference_answers": {"must_include": ["Beauty"]},
                  "reference_url": "", "program_html": []}},
        {"sites": ["shopping"], "start_url": "__SHOPPING__", "intent": "Open my cart.",
         "eval": {"eval_types": ["url_match"], "reference_answers": None,
                  "reference_url": "__SHOPPING__/cart", "program_html": [], "url_note": "GOLD in PRED"}},
        {"sites": ["shopping"], "start_url": "__SHOPPING__", "intent": "Go to my orders.",
         "eval": {"eval_types": ["program_html"], "reference_answers": None, "reference_url": "",
                  "program_html": [{"url": "last", "locator": "document.querySelector('h1').outerText",
                                    "required_contents": {"exact_match": "My Orders"}}]}},
        {"sites": ["wikipedia"], "start_url": "__WIKIPEDIA__", "intent": "Read the wiki.",
         "eval": {"eval_types": ["string_match"], "reference_answers": {"exact_match": "N/A"},
                  "reference_url": "", "program_html": []}},
        {"sites": ["shopping"], "start_url": "__SHOPPING__", "intent": "Describe the shop.",
         "eval": {"eval_types": ["string_match"], "reference_answers": {"fuzzy_match": ["a market"]},
                  "reference_url": "", "program_html": []}},
    ]  # fmt: skip
    for i, config in enumerate(configs):
        (folder / f"{i}.json").write_text(json.dumps({**base, "task_id": i, **config}))


@pytest.fixture(scope="module")
def webarena_env(sites: RunningSites, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebEnv]:
    folder = tmp_path_factory.mktemp("config_files")
    write_configs(folder)
    patch = pytest.MonkeyPatch()
    for site, url in sites.urls.items():
        patch.setenv("MAP" if site == "map" else site.upper(), url)
    patch.setenv("WIKIPEDIA", DEAD)  # in the allowed set, but nothing listens there
    e = WebEnv(config_dir=str(folder))
    yield e
    e.close()
    patch.undo()


def test_webarena_configs_through_webarena_variables(webarena_env: WebEnv, sites: RunningSites) -> None:
    env = webarena_env
    observation, info = env.reset("web_0")
    assert info["category"] == "shopping" and sites.urls["shopping"] in observation
    assert env.step("stop [Beauty]").reward == 1.0
    env.reset("web_0")
    assert env.step("stop [Shoes only]").reward == 0.0

    observation, _ = env.reset("web_1")
    cart = find_element(observation, "link", "My Cart")
    assert cart is not None
    env.step(f"click [{cart.id}]")
    assert env.step("stop []").reward == 1.0

    observation, _ = env.reset("web_2")
    orders = find_element(observation, "link", "My Orders")
    assert orders is not None
    env.step(f"click [{orders.id}]")
    assert env.step("stop").reward == 1.0
    with pytest.raises(UnknownItemError):
        env.reset("web_5")  # no 5.json


def judge_by_length(intent: str, reference: str, answer: str) -> float:
    """A stand-in for an LLM judge (`env.kwargs.judge`): long answers pass."""
    return float(len(answer) > 10)


def test_fuzzy_match_needs_the_configured_judge(webarena_env: WebEnv) -> None:
    webarena_env.reset("web_4")
    with pytest.raises(FuzzyMatchNeedsJudge, match="env.kwargs.judge"):
        webarena_env.step("stop [a shop]")
    webarena_env.judge = load_judge("tests.envs.web.test_env:judge_by_length")
    try:
        webarena_env.reset("web_4")
        assert webarena_env.step("stop [a small general store]").reward == 1.0
        webarena_env.reset("web_4")
        assert webarena_env.step("stop [shop]").reward == 0.0
    finally:
        webarena_env.judge = None
    with pytest.raises(ValueError, match="expected 'module:function'"):
        load_judge("no_colon")


def test_unreachable_start_url_and_goto_are_observations(webarena_env: WebEnv) -> None:
    observation, info = webarena_env.reset("web_3")
    assert "failed: net::ERR_CONNECTION_REFUSED" in observation and info["category"] == "wikipedia"
    result = webarena_env.step(f"goto [{DEAD}/wiki/A]")
    assert "failed: net::ERR_CONNECTION_REFUSED" in result.observation and not result.done
    blocked = webarena_env.step("goto [http://example.com/]")
    assert "was blocked: this browser may only visit the sites" in blocked.observation
