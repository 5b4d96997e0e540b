"""What every task template uses: the `Template` record, solution steps, eval sections.

Task templates over the sites' generated data live one module per category.

A `Template` enumerates its instantiations over the template database in a fixed order
(`instances`) and turns one into a WebArena task dict (`build`), whose reference answers and
expected database rows are read from that same data, never typed by hand. `tasks.py` picks the
test tasks (a fixed, hand-checked list of (template, instance) pairs) and draws the train tasks
from the other instances.

Steps of a `solution` (what the expert replays): `click` / `type` an element found by its
accessibility role and exact name, `goto`, `go_back`, `stop` with the answer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from horizonrl.envs.web.sites.html import PER_PAGE

Params = dict[str, Any]
Step = dict[str, Any]


@dataclass(frozen=True)
class Template:
    """One kind of task, instantiated over the data."""

    name: str
    """Unique id, also the task's `intent_template_id` key in reports."""
    category: str
    """One of `tasks.CATEGORIES`."""
    intent: str
    """WebArena's `intent_template`, with `{{key}}` slots filled from an instance's `show` dict."""
    instances: Callable[[sqlite3.Connection], list[Params]]
    """Every instantiation over the template database, in a fixed order."""
    build: Callable[[sqlite3.Connection, Params], dict[str, Any]]
    """Instance -> the task's `start_url`, `sites`, `eval`, `solution` and `show` (the intent's slots)."""


def click(role: str, name: str, nth: int | None = None) -> Step:
    step: Step = {"op": "click", "role": role, "name": name}
    if nth is not None:
        step["nth"] = nth
    return step


def type_(role: str, name: str, text: str, enter: bool = False) -> Step:
    return {"op": "type", "role": role, "name": name, "text": text, "enter": enter}


def stop(answer: str = "") -> Step:
    return {"op": "stop", "answer": answer}


def next_pages(index: int) -> list[Step]:
    """Clicks on "Next page" that reach the page holding the `index`-th item (0-based)."""
    return [click("link", "Next page")] * (index // PER_PAGE)


def money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


def string_eval(**answers: Any) -> dict[str, Any]:
    return {
        "eval_types": ["string_match"],
        "reference_answers": answers,
        "reference_url": "",
        "program_html": [],
    }


def db_eval(checks: list[tuple[str, list[list]]], program_html: list[dict] | None = None) -> dict[str, Any]:
    types = (["program_html"] if program_html else []) + ["db_state"]
    return {
        "eval_types": types,
        "reference_answers": None,
        "reference_url": "",
        "program_html": program_html or [],
        "db_state": [{"sql": sql, "expected": expected} for sql, expected in checks],
    }


def url_eval(reference_url: str) -> dict[str, Any]:
    return {
        "eval_types": ["url_match"],
        "reference_answers": None,
        "reference_url": reference_url,
        "program_html": [],
        "url_note": "GOLD in PRED",
    }


def rows(db: sqlite3.Connection, sql: str, *args: Any) -> list[sqlite3.Row]:
    return db.execute(sql, args).fetchall()


def scalar(db: sqlite3.Connection, sql: str, *args: Any) -> Any:
    return db.execute(sql, args).fetchone()[0]


def fill(template: str, show: Params) -> str:
    out = template
    for key, value in show.items():
        out = out.replace("{{" + key + "}}", str(value))
    return out
