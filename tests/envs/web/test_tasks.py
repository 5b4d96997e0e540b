"""The web family's tasks: splits and categories, the test file equals what the data gives, every
test task's solution solves it when replayed over real HTTP (a state-changing one fails before
and after a reset), a sample of train tasks too, and WebArena-format config files pointed at our
sites through WebArena's environment variables."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from horizonrl.envs.core import UnknownItemError
from horizonrl.envs.web import tasks
from horizonrl.envs.web.evaluators import evaluate
from horizonrl.envs.web.sites import RunningSites
from tests.envs.web.http_replay import HttpContext, HttpPlayer

TEST_IDS = [f"web_{i}" for i in range(50)]


def play(sites: RunningSites, tenant: str, task: dict) -> float:
    """Replay `task`'s solution on `tenant` over HTTP and score the end state."""
    resolved = tasks.resolve(task, sites.urls)
    player = HttpPlayer(sites, tenant)
    try:
        player.play(resolved["start_url"], resolved["horizonrl"]["solution"])
    finally:
        player.close()
    return evaluate(resolved, HttpContext(sites, tenant, player.answer, player.url))


def test_splits_and_categories_match_the_reference_test_set() -> None:
    splits = tasks.load_splits()
    assert splits["test"] == TEST_IDS and len(splits["train"]) >= 500
    assert not set(splits["test"]) & set(splits["train"])
    counts = Counter(tasks.category_of(i) for i in splits["test"])
    assert counts == {"shopping": 15, "shopping_admin": 15, "maps": 10, "gitlab+reddit": 10}
    assert set(Counter(tasks.category_of(i) for i in splits["train"])) == set(tasks.CATEGORIES)
    with pytest.raises(UnknownItemError, match="web_0 .. web_649"):
        tasks.get_task("web_650")
    with pytest.raises(UnknownItemError):
        tasks.get_task("textcraft_1")


def test_the_shipped_test_file_is_what_the_data_gives() -> None:
    shipped = json.loads(tasks.TEST_FILE.read_text())
    assert shipped == tasks.generate_test_tasks(), (
        "regenerate: python -m horizonrl.envs.web.tasks --write-test"
    )
    kinds = Counter("db_state" in t["eval"]["eval_types"] for t in shipped)
    assert kinds[True] >= 15 and kinds[False] >= 25  # state-changing and information-seeking both
    types = {e for t in shipped for e in t["eval"]["eval_types"]}
    assert types == {"string_match", "url_match", "program_html", "db_state"}
    for t in shipped:
        assert t["require_login"] is False and t["storage_state"] is None and t["start_url"].startswith("__")
        assert t["intent"] and "{{" not in t["intent"] and t["horizonrl"]["solution"][-1]["op"] == "stop"


def test_train_tasks_are_deterministic_and_distinct_from_test() -> None:
    first = tasks.generate_train_tasks()
    assert first == tasks.generate_train_tasks()
    test_keys = {
        (t["horizonrl"]["template"], t["horizonrl"]["instance"]) for t in tasks.generate_test_tasks()
    }
    train_keys = {(t["horizonrl"]["template"], t["horizonrl"]["instance"]) for t in first}
    assert len(train_keys) == len(first) and not train_keys & test_keys
    assert tasks.get_task("web_50")["task_id"] == 50


@pytest.mark.parametrize("item_id", TEST_IDS)
def test_every_test_task_is_solved_by_its_solution(sites: RunningSites, tenant: str, item_id: str) -> None:
    task = tasks.get_task(item_id)
    resolved = tasks.resolve(task, sites.urls)
    if task["require_reset"]:  # state-changing: the untouched start state must fail
        assert evaluate(resolved, HttpContext(sites, tenant, "", resolved["start_url"])) == 0.0
    assert play(sites, tenant, task) == 1.0
    if task["require_reset"]:
        sites.reset_tenant(tenant)
        assert evaluate(resolved, HttpContext(sites, tenant, "", resolved["start_url"])) == 0.0
        assert play(sites, tenant, task) == 1.0  # reset is exact: the same solution works again
    else:  # a wrong answer fails
        final = HttpContext(sites, tenant, "I do not know", resolved["start_url"] + "/nowhere")
        assert evaluate(resolved, final) == 0.0


def test_a_sample_of_train_tasks_is_solved(sites: RunningSites, tenant: str) -> None:
    train = tasks.load_splits()["train"]
    for item_id in train[::12]:
        sites.reset_tenant(tenant)
        assert play(sites, tenant, tasks.get_task(item_id)) == 1.0, item_id


def test_resolve_and_webarena_variables() -> None:
    env = {"SHOPPING": "http://a:1/", "SHOPPING_ADMIN": "http://b:2", "MAP": "", "WIKIPEDIA": "http://w"}
    urls = tasks.site_urls_from_environ(env)
    assert urls == {"shopping": "http://a:1", "shopping_admin": "http://b:2", "wikipedia": "http://w"}
    task = {"start_url": "__SHOPPING__/cart", "eval": {"program_html": [{"url": "__SHOPPING_ADMIN__/x"}]},
            "other": ["__MAP__", 3]}  # fmt: skip
    assert tasks.resolve(task, urls) == {"start_url": "http://a:1/cart",
                                         "eval": {"program_html": [{"url": "http://b:2/x"}]},
                                         "other": ["__MAP__", 3]}  # fmt: skip
    with pytest.raises(KeyError, match="unknown site"):
        tasks.resolve("x", {"shop": "http://a"})
    assert tasks.category_of_sites(["reddit", "gitlab"]) == "gitlab+reddit"
    assert tasks.category_of_sites(["map"]) == "maps"


def test_load_config_file_refuses_files_that_are_not_tasks(tmp_path: Path) -> None:
    bad = tmp_path / "1.json"
    bad.write_text('{"intent": "x"}')
    with pytest.raises(ValueError, match="1.json: a WebArena task needs"):
        tasks.load_config_file(bad)
    (tmp_path / "2.json").write_text("not json")
    with pytest.raises(ValueError, match="not a readable JSON"):
        tasks.load_config_file(tmp_path / "2.json")


def test_webarena_config_files_run_against_our_sites_through_the_variables(
    sites: RunningSites, tenant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WebArena-format files (`config_files/N.json`, placeholders, WebArena's keys only) resolved with
    `SHOPPING=...`-style variables, as a user's own deployment would be, and scored."""
    for var, site in tasks.WEBARENA_VARIABLES.items():
        if site in sites.urls:
            monkeypatch.setenv(var, sites.urls[site])
    config_dir = tmp_path / "config_files"
    config_dir.mkdir()
    chosen = {0: "web_0", 1: "web_5", 2: "web_28"}  # string_match, url_match, program_html + db_state
    for n, item_id in chosen.items():
        task = tasks.get_task(item_id)
        task.pop("horizonrl")
        task["task_id"] = n
        (config_dir / f"{n}.json").write_text(json.dumps(task))
    urls = tasks.site_urls_from_environ()
    assert urls == sites.urls
    for n, item_id in chosen.items():
        config = tasks.resolve(tasks.load_config_file(config_dir / f"{n}.json"), urls)
        assert "__" not in json.dumps(config["start_url"])
        solution = tasks.resolve(tasks.get_task(item_id)["horizonrl"]["solution"], urls)
        sites.reset_tenant(tenant)
        player = HttpPlayer(sites, tenant)
        player.play(config["start_url"], solution)
        player.close()
        assert evaluate(config, HttpContext(sites, tenant, player.answer, player.url)) == 1.0, n
