"""Unit tests of the web evaluators: a passing and a failing case for every eval type, WebArena's
normalisation rules, their product, and the fuzzy_match judge error. The context is a plain
object (the real browser-backed context is W2's; the tasks' tests score through real HTTP)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from horizonrl.envs.web.evaluators import (
    EvalConfigError,
    FuzzyMatchNeedsJudge,
    clean_answer,
    evaluate,
    must_include,
    reddit_get_post_url,
)


@dataclass
class Ctx:
    answer: str | None = None
    url: str = "http://shop.test/"
    pages: dict[tuple[str, str], str] = field(default_factory=dict)
    rows: dict[str, list[list]] = field(default_factory=dict)
    opened: list[str] = field(default_factory=list)

    def page_text(self, url: str, locator: str) -> str:
        self.opened.append(url)
        return self.pages.get((url, locator), "")

    def db_query(self, sql: str) -> list[list]:
        return self.rows[sql]


def task(eval_types: list[str], **eval_fields: object) -> dict:
    return {"task_id": 7, "intent": "q?", "eval": {"eval_types": eval_types, **eval_fields}}


def test_clean_answer_strips_spaces_one_pair_of_quotes_and_case() -> None:
    assert clean_answer('  "Blue Tee" ') == "blue tee"
    assert clean_answer("'It''s'") == "it''s"
    assert clean_answer("\"unbalanced'") == "\"unbalanced'"


def test_exact_match() -> None:
    t = task(["string_match"], reference_answers={"exact_match": "Cozy Polo"})
    assert evaluate(t, Ctx(answer=' "cozy polo" ')) == 1.0
    assert evaluate(t, Ctx(answer="Cozy Polo, I think")) == 0.0
    assert evaluate(t, Ctx(answer=None)) == 0.0  # the episode never stopped


def test_must_include_needs_every_phrase() -> None:
    t = task(["string_match"], reference_answers={"must_include": ["3.2 km", "7 min"]})
    assert evaluate(t, Ctx(answer="It is 3.2 KM, about 7 min by car")) == 1.0
    assert evaluate(t, Ctx(answer="It is 3.2 km")) == 0.0


def test_a_single_one_character_phrase_must_be_a_whole_token() -> None:
    t = task(["string_match"], reference_answers={"must_include": ["0"]})
    assert evaluate(t, Ctx(answer="There are 0 open issues.")) == 1.0
    assert evaluate(t, Ctx(answer="There are 10 open issues.")) == 0.0
    assert must_include("0", "10") == 1.0  # without tokenize (several phrases, program_html) a substring


def test_fuzzy_match_needs_a_judge_and_names_the_config_key() -> None:
    t = task(["string_match"], reference_answers={"fuzzy_match": ["the order was canceled"]})
    with pytest.raises(FuzzyMatchNeedsJudge, match="env.kwargs.judge"):
        evaluate(t, Ctx(answer="cancelled"))
    calls = []

    def judge(intent: str, reference: str, answer: str) -> float:
        calls.append((intent, reference, answer))
        return 1.0 if "cancel" in answer else 0.0

    assert evaluate(t, Ctx(answer="Cancelled"), judge=judge) == 1.0
    assert evaluate(t, Ctx(answer="shipped"), judge=judge) == 0.0
    assert calls[0] == ("q?", "the order was canceled", "cancelled")
    na = task(["string_match"], reference_answers={"fuzzy_match": "N/A"})
    assert evaluate(na, Ctx(answer="n/a")) == 1.0  # N/A is an exact match, no judge needed
    assert evaluate(na, Ctx(answer="42")) == 0.0


def test_url_match_ignores_query_order_and_trailing_slash() -> None:
    t = task(["url_match"], reference_url="http://map.test/directions?from=A+B&to=C&mode=foot")
    assert evaluate(t, Ctx(url="http://map.test/directions/?mode=foot&to=C&from=A%20B")) == 1.0
    assert evaluate(t, Ctx(url="http://map.test/directions?mode=car&to=C&from=A+B")) == 0.0
    assert evaluate(t, Ctx(url="http://map.test/search?mode=foot&to=C&from=A+B")) == 0.0


def test_url_match_gold_in_pred_with_alternatives() -> None:
    t = task(
        ["url_match"], reference_url="http://s.test/orders |OR| http://s.test/cart", url_note="GOLD in PRED"
    )
    assert evaluate(t, Ctx(url="http://s.test/cart?added=5")) == 1.0  # extra query keys are fine
    assert evaluate(t, Ctx(url="http://s.test/account")) == 0.0
    with pytest.raises(EvalConfigError, match="GOLD in PRED"):
        evaluate(task(["url_match"], reference_url="http://s.test/", url_note="EXACT"), Ctx())


def test_program_html_exact_and_must_include_with_or() -> None:
    t = task(["program_html"], program_html=[
        {"url": "http://s.test/p/1", "locator": "document.querySelector('h1').outerText",
         "required_contents": {"exact_match": "Cozy Polo"}},
        {"url": "last", "locator": "", "required_contents": {"must_include": ["$12.50 |OR| 12.5", "Saved"]}},
    ])  # fmt: skip
    pages = {("http://s.test/p/1", "document.querySelector('h1').outerText"): "cozy polo",
             ("http://s.test/done", ""): "You saved it. Price: $12.50 &amp; more"}  # fmt: skip
    ctx = Ctx(url="http://s.test/done", pages=pages)
    assert evaluate(t, ctx) == 1.0 and ctx.opened == ["http://s.test/p/1", "http://s.test/done"]
    pages[("http://s.test/done", "")] = "You saved it. Price: $13.00"
    assert evaluate(t, Ctx(url="http://s.test/done", pages=pages)) == 0.0


def test_program_html_reddit_post_url_helper() -> None:
    assert reddit_get_post_url("http://r.test/f/books/12/some-title") == "http://r.test/f/books/12/"
    assert reddit_get_post_url("http://r.test/forums") == "http://r.test/forums"
    target = {"url": "func:reddit_get_post_url('__last_url__')", "locator": "",
              "required_contents": {"must_include": ["Great book"]}}  # fmt: skip
    t = task(["program_html"], program_html=[target])
    page = {("http://r.test/f/books/12/", ""): "Comments: Great book"}
    assert evaluate(t, Ctx(url="http://r.test/f/books/12/slug", pages=page)) == 1.0
    assert evaluate(t, Ctx(url="http://r.test/f/books/13/slug", pages=page)) == 0.0
    bad = task(["program_html"], program_html=[{"url": "func:shopping_get_latest_order_url()", "locator": "",
                                                "required_contents": {"must_include": ["x"]}}])  # fmt: skip
    with pytest.raises(EvalConfigError, match="only func:reddit_get_post_url"):
        evaluate(bad, Ctx())


def test_db_state_compares_rows() -> None:
    sql = "SELECT qty FROM cart_items WHERE product_id = 5"
    t = task(["db_state"], db_state=[{"sql": sql, "expected": [[2]]}])
    assert evaluate(t, Ctx(rows={sql: [[2]]})) == 1.0
    assert evaluate(t, Ctx(rows={sql: [[1]]})) == 0.0
    assert evaluate(t, Ctx(rows={sql: []})) == 0.0


def test_eval_types_multiply() -> None:
    sql = "SELECT 1"
    t = task(["string_match", "url_match", "db_state"], reference_answers={"must_include": ["yes"]},
             reference_url="http://s.test/cart", db_state=[{"sql": sql, "expected": [[1]]}])  # fmt: skip
    good = Ctx(answer="yes", url="http://s.test/cart", rows={sql: [[1]]})
    assert evaluate(t, good) == 1.0
    assert evaluate(t, Ctx(answer="yes", url="http://s.test/orders", rows={sql: [[1]]})) == 0.0
    assert evaluate(t, Ctx(answer="no", url="http://s.test/cart", rows={sql: [[1]]})) == 0.0


def test_unknown_eval_types_are_refused() -> None:
    with pytest.raises(EvalConfigError, match="known: string_match"):
        evaluate(task(["screenshot_match"]), Ctx())
    with pytest.raises(EvalConfigError):
        evaluate(task([]), Ctx())
