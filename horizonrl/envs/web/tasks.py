"""The web family's tasks, in WebArena's config format, and WebArena's own task files.

Item ids are `web_<i>`; `get_task(item_id)` returns task `i` with its `__SHOPPING__`-style
placeholders unresolved (`resolve(task, urls)` fills them in).

- test: `web_0` .. `web_49`, read from `data/test_tasks.json` (WebArena's format, readable):
  15 shopping, 15 shopping_admin, 10 maps, 10 gitlab+reddit, as the reference's test set.
  They are a fixed, hand-checked selection of template instances (`TEST_SELECTION`); the
  file is what `python -m horizonrl.envs.web.tasks --write-test` writes, and a test checks
  that it still equals the generated tasks (answers come from the data, never by hand).
- train: `web_50` .. `web_649`, generated on first use: every template's other instances in
  an order shuffled by `random.Random(SPLIT_SEED)`, taken round-robin over the templates.

Each task carries WebArena's keys (`sites`, `task_id`, `require_login` false, `storage_state`
null, `start_url`, `intent`, `intent_template`, `instantiation_dict`, `require_reset`, `eval`),
our `db_state` eval type, and `horizonrl` = {category, template, instance, solution}.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from horizonrl.envs.core import UnknownItemError, parse_item_id
from horizonrl.envs.web.sites import PLACEHOLDERS
from horizonrl.envs.web.sites.data import template_path
from horizonrl.envs.web.taskgen import TEMPLATES
from horizonrl.envs.web.taskgen.base import Template, fill

FAMILY = "web"
CATEGORIES = ("shopping", "shopping_admin", "maps", "gitlab+reddit")
TEST_FILE = Path(__file__).parent / "data" / "test_tasks.json"
N_TRAIN = 600
SPLIT_SEED = 0

TEST_SELECTION: list[tuple[str, int]] = [
    # shopping (15)
    ("shop_price", 3), ("shop_review_count", 10), ("shop_avg_rating", 4), ("shop_colors", 20),
    ("shop_cheapest", 0), ("shop_sorted_url", 2), ("shop_search_count", 5), ("shop_order_total", 22),
    ("shop_order_status", 3), ("shop_orders_in_year", 1), ("shop_add_to_cart", 7), ("shop_add_to_cart", 40),
    ("shop_place_order", 12), ("shop_change_phone", 0), ("shop_write_review", 30),
    # shopping_admin (15)
    ("admin_bestseller", 0), ("admin_status_count", 1), ("admin_status_url", 2), ("admin_customer_email", 8),
    ("admin_customer_orders", 11), ("admin_order_customer", 123), ("admin_order_total", 250),
    ("admin_month_revenue", 14), ("admin_lifetime_sales", 0), ("admin_change_price", 17),
    ("admin_set_stock", 45), ("admin_disable_product", 60), ("admin_cancel_order", 9),
    ("admin_comment_order", 77), ("admin_change_email", 33),
    # maps (10)
    ("map_coordinates", 5), ("map_city", 17), ("map_address", 29), ("map_nearest", 41), ("map_distance", 53),
    ("map_walk_time", 65), ("map_drive_time", 77), ("map_route_url", 89), ("map_closer", 101),
    ("map_kind_count", 3),
    # gitlab + reddit (10)
    ("gitlab_open_issues", 4), ("gitlab_license", 9), ("gitlab_create_issue", 2), ("gitlab_invite", 10),
    ("gitlab_close_issue", 6), ("reddit_top_post", 1), ("reddit_top_url", 5), ("reddit_upvote", 100),
    ("reddit_comment", 200), ("reddit_create_post", 3),
]  # fmt: skip
"""(template, instance index) of each test task, in item order."""

WEBARENA_VARIABLES = {
    "SHOPPING": "shopping",
    "SHOPPING_ADMIN": "shopping_admin",
    "REDDIT": "reddit",
    "GITLAB": "gitlab",
    "MAP": "map",
    "WIKIPEDIA": "wikipedia",
    "HOMEPAGE": "homepage",
}
"""WebArena's environment variable -> site name."""
SITE_CATEGORY = {"shopping": "shopping", "shopping_admin": "shopping_admin", "map": "maps",
                 "gitlab": "gitlab+reddit", "reddit": "gitlab+reddit"}  # fmt: skip


def _template_db() -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{template_path()}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return db


def build_task(
    db: sqlite3.Connection, template: Template, instance: int, task_id: int, instances: list | None = None
) -> dict[str, Any]:
    """Task `task_id`: instance number `instance` of `template` (whose `instances`, if given, are
    `template.instances(db)`), in WebArena's format."""
    instances = template.instances(db) if instances is None else instances
    if not 0 <= instance < len(instances):
        raise IndexError(f"template {template.name} has {len(instances)} instances, not {instance + 1}")
    built = template.build(db, instances[instance])
    ev = {"string_note": "", **built["eval"]}
    return {
        "sites": built["sites"],
        "task_id": task_id,
        "require_login": False,
        "storage_state": None,
        "start_url": built["start_url"],
        "geolocation": None,
        "intent_template": template.intent,
        "instantiation_dict": built["show"],
        "intent": fill(template.intent, built["show"]),
        "require_reset": "db_state" in ev["eval_types"],
        "eval": ev,
        "intent_template_id": [t.name for t in TEMPLATES].index(template.name),
        "horizonrl": {"category": template.category, "template": template.name, "instance": instance,
                      "solution": built["solution"]},
    }  # fmt: skip


def generate_test_tasks() -> list[dict[str, Any]]:
    """The 50 test tasks of `TEST_SELECTION`, built from the template database."""
    by_name = {t.name: t for t in TEMPLATES}
    with _template_db() as db:
        return [build_task(db, by_name[name], k, i) for i, (name, k) in enumerate(TEST_SELECTION)]


def generate_train_tasks() -> list[dict[str, Any]]:
    """`N_TRAIN` tasks from the instances the test set does not use, round-robin over the templates."""
    rng = random.Random(SPLIT_SEED)
    used = set(TEST_SELECTION)
    tasks: list[dict[str, Any]] = []
    db = _template_db()
    try:
        queues = []
        for t in TEMPLATES:
            instances = t.instances(db)
            order = [k for k in range(len(instances)) if (t.name, k) not in used]
            rng.shuffle(order)
            queues.append((t, instances, order))
        while len(tasks) < N_TRAIN and any(order for _, _, order in queues):
            for t, instances, order in queues:
                if order and len(tasks) < N_TRAIN:
                    tasks.append(build_task(db, t, order.pop(), len(TEST_SELECTION) + len(tasks), instances))
    finally:
        db.close()
    return tasks


@functools.cache
def _test_tasks() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(TEST_FILE.read_text()))


@functools.cache
def _train_tasks() -> tuple[dict[str, Any], ...]:
    return tuple(generate_train_tasks())


def load_splits() -> dict[str, list[str]]:
    n_test = len(TEST_SELECTION)
    return {"train": [f"{FAMILY}_{n_test + i}" for i in range(N_TRAIN)],
            "test": [f"{FAMILY}_{i}" for i in range(n_test)]}  # fmt: skip


def get_task(item_id: str) -> dict[str, Any]:
    """The WebArena config dict of `item_id` (a fresh copy; placeholders unresolved)."""
    family, index = parse_item_id(item_id)
    n_test = len(TEST_SELECTION)
    if family != FAMILY or not 0 <= index < n_test + N_TRAIN:
        raise UnknownItemError(f"unknown web item {item_id!r}: items are web_0 .. web_{n_test + N_TRAIN - 1}")
    task = _test_tasks()[index] if index < n_test else _train_tasks()[index - n_test]
    return json.loads(json.dumps(task))


def category_of(item_id: str) -> str:
    family, index = parse_item_id(item_id)
    if family == FAMILY and 0 <= index < len(TEST_SELECTION):  # without building the train tasks
        return {t.name: t.category for t in TEMPLATES}[TEST_SELECTION[index][0]]
    return str(get_task(item_id)["horizonrl"]["category"])


def category_of_sites(sites: list[str]) -> str:
    """The report category of a (real WebArena) task from its `sites`; its first site decides."""
    for site in sites:
        if site in SITE_CATEGORY:
            return SITE_CATEGORY[site]
    return sites[0] if sites else "other"


def resolve(task_or_str: Any, urls: Mapping[str, str]) -> Any:
    """Replace `__SHOPPING__`-style placeholders with `urls[site]` in a string, or in every string of
    a task dict / list (a copy). Sites missing from `urls` keep their placeholder."""
    if isinstance(task_or_str, str):
        out = task_or_str
        for site, url in urls.items():
            if site not in PLACEHOLDERS:
                raise KeyError(f"unknown site {site!r}; sites: {', '.join(PLACEHOLDERS)}")
            out = out.replace(PLACEHOLDERS[site], url.rstrip("/"))
        return out
    if isinstance(task_or_str, dict):
        return {k: resolve(v, urls) for k, v in task_or_str.items()}
    if isinstance(task_or_str, list):
        return [resolve(v, urls) for v in task_or_str]
    return task_or_str


def site_urls_from_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Site URLs from WebArena's variables (`SHOPPING=http://host:7770` ...); unset or empty ones left out."""
    env = os.environ if environ is None else environ
    return {
        site: env[var].rstrip("/") for var, site in WEBARENA_VARIABLES.items() if env.get(var, "").strip()
    }


def load_config_file(path: str | Path) -> dict[str, Any]:
    """One WebArena task file (`config_files/N.json`), checked for the keys the env needs."""
    try:
        task = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable JSON task file: {exc}") from exc
    missing = [k for k in ("intent", "start_url", "eval") if k not in task]
    if not isinstance(task, dict) or missing or "eval_types" not in task["eval"]:
        raise ValueError(
            f"{path}: a WebArena task needs intent, start_url and eval.eval_types (missing {missing})"
        )
    return dict(task)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="write the web family's test tasks file")
    parser.add_argument("--write-test", action="store_true", help=f"regenerate {TEST_FILE}")
    args = parser.parse_args(argv)
    tasks = generate_test_tasks()
    if args.write_test:
        TEST_FILE.parent.mkdir(parents=True, exist_ok=True)
        TEST_FILE.write_text(json.dumps(tasks, indent=1, ensure_ascii=False) + "\n")
    for t in tasks:
        print(
            t["task_id"],
            t["horizonrl"]["category"],
            "|",
            t["intent"],
            "|",
            t["eval"].get("reference_answers"),
        )


if __name__ == "__main__":
    main()
