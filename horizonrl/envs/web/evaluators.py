"""Scoring a finished web episode with WebArena's evaluators, plus our `db_state`.

`evaluate(task, ctx)` multiplies the scores of the task's `eval.eval_types` (as WebArena's
`EvaluatorComb` does), each in [0, 1]:

- `string_match`: the `stop` answer against `eval.reference_answers`. Both sides are cleaned
  as WebArena does (strip spaces, then one pair of surrounding quotes, then lower-case).
  `exact_match`: equal after cleaning. `must_include`: every phrase is a substring of the
  answer; when the list holds one phrase of a single character, it must be a whole token of
  the answer instead (WebArena's guard against "0" matching "10"; our tokenizer splits on
  whitespace and punctuation where WebArena uses NLTK's `word_tokenize`). `fuzzy_match`: an
  LLM judge decides (`judge(intent, reference, answer) -> float`); "N/A" is an exact match.
  No `stop` answer scores 0.
- `url_match`: the final URL against `eval.reference_url` (alternatives joined by ` |OR| `),
  rule `url_note` "GOLD in PRED" (WebArena's only rule; also the default): some reference's
  host+path is a substring of the final URL's host+path (trailing `/` ignored), and for every
  query key of the references, one of their values is among the final URL's values for that
  key. Queries are parsed (`parse_qs`), so their order and `+`/`%20` do not matter.
- `program_html`: for each `{url, locator, required_contents}`, the page text at `url` ("last"
  = the final URL; `func:reddit_get_post_url('__last_url__')` is understood) selected by
  the `locator` JavaScript ("" = the whole page), HTML-unescaped, must `exact_match` or
  `must_include` each entry (alternatives joined by ` |OR| `), cleaned as above.
- `db_state` (ours): each `{sql, expected}` of `eval.db_state` runs over the session's
  database and its rows must equal `expected` (a list of rows).

A task that needs fuzzy_match without a judge raises `FuzzyMatchNeedsJudge`, naming the
config key `env.kwargs.judge`.
"""

from __future__ import annotations

import html
import re
import urllib.parse
from collections import defaultdict
from collections.abc import Callable
from typing import Any, Protocol

Judge = Callable[[str, str, str], float]
"""`judge(intent, reference, answer)` -> score in [0, 1] (an LLM's verdict for fuzzy_match)."""

OR = " |OR| "


class EvalContext(Protocol):
    """What the evaluators need from a finished episode (the env implements it over its browser)."""

    answer: str | None
    """The `stop` action's answer; None when the episode did not stop."""
    url: str
    """The final page's URL."""

    def page_text(self, url: str, locator: str) -> str:
        """Open `url`, run the `locator` JavaScript expression (or take the page's text if "")."""
        ...

    def db_query(self, sql: str) -> list[list]:
        """Rows of `sql` over the session's database."""
        ...


class FuzzyMatchNeedsJudge(RuntimeError):
    """A task's reference answer is fuzzy_match and no LLM judge is configured."""


class EvalConfigError(ValueError):
    """A task's `eval` section that no evaluator understands."""


def clean_answer(answer: str) -> str:
    """WebArena's `StringEvaluator.clean_answer`: strip, drop one pair of outer quotes, lower-case."""
    answer = answer.strip()
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "'\"":
        answer = answer[1:-1]
    return answer.lower()


def _tokens(text: str) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", text)


def exact_match(ref: str, pred: str) -> float:
    return float(clean_answer(pred) == clean_answer(ref))


def must_include(ref: str, pred: str, tokenize: bool = False) -> float:
    """`ref` in `pred` after cleaning; as a whole token when `tokenize` and `ref` is one character."""
    clean_ref, clean_pred = clean_answer(ref), clean_answer(pred)
    if tokenize and len(clean_ref) == 1:
        return float(clean_ref in _tokens(clean_pred))
    return float(clean_ref in clean_pred)


def string_match(task: dict, ctx: EvalContext, judge: Judge | None) -> float:
    refs = task["eval"].get("reference_answers") or {}
    if ctx.answer is None:
        return 0.0
    pred = clean_answer(ctx.answer)
    score = 1.0
    for approach, value in refs.items():
        if approach == "exact_match":
            score *= exact_match(str(value), pred)
        elif approach == "must_include":
            values = _as_list(value, "must_include")
            for phrase in values:
                score *= must_include(str(phrase), pred, tokenize=len(values) == 1)
        elif approach == "fuzzy_match":
            if value == "N/A":
                score *= exact_match("N/A", pred)
                continue
            if judge is None:
                raise _needs_judge_error(task)
            for reference in _as_list(value, "fuzzy_match"):
                score *= float(judge(str(task.get("intent", "")), str(reference), pred))
        else:
            raise EvalConfigError(
                f"unknown reference_answers key {approach!r}; known: exact_match, must_include, fuzzy_match"
            )
    return score


def _needs_judge_error(task: dict) -> FuzzyMatchNeedsJudge:
    return FuzzyMatchNeedsJudge(
        f"task {task.get('task_id')!r} is scored by fuzzy_match, which needs an LLM judge: "
        "set env.kwargs.judge in the config (or pass judge= to evaluate)"
    )


def _as_list(value: Any, key: str) -> list:
    if not isinstance(value, list):
        raise EvalConfigError(f"reference_answers.{key} must be a list, got {type(value).__name__}")
    return value


def _parse_url(url: str) -> tuple[str, dict[str, list[str]]]:
    parsed = urllib.parse.urlparse(url.rstrip("/"))
    return parsed.netloc + parsed.path.rstrip("/"), urllib.parse.parse_qs(parsed.query)


def url_match(task: dict, ctx: EvalContext, judge: Judge | None = None) -> float:
    rule = task["eval"].get("url_note") or "GOLD in PRED"
    if rule != "GOLD in PRED":
        raise EvalConfigError(f"unknown url_note {rule!r}; WebArena's rule is 'GOLD in PRED'")
    refs = [r.strip() for r in str(task["eval"].get("reference_url") or "").split(OR.strip()) if r.strip()]
    if not refs:
        raise EvalConfigError("url_match needs eval.reference_url")
    pred_base, pred_query = _parse_url(ctx.url)
    ref_bases: list[str] = []
    ref_query: defaultdict[str, set[str]] = defaultdict(set)
    for ref in refs:
        base, query = _parse_url(ref)
        ref_bases.append(base)
        for key, values in query.items():
            ref_query[key].update(values)
    score = float(any(base in pred_base for base in ref_bases))
    for key, wanted in ref_query.items():
        score *= float(any(v in pred_query.get(key, []) for v in wanted))
    return score


def reddit_get_post_url(url: str) -> str:
    """WebArena's helper: `.../f/<forum>/<post id>/...` -> `.../f/<forum>/<post id>/`; else `url`."""
    parsed = urllib.parse.urlparse(url)
    parts = parsed.path.split("/")
    if len(parts) < 4 or parts[1] != "f":
        return url
    return f"{parsed.scheme}://{parsed.netloc}/f/{parts[2]}/{parts[3]}/"


def _target_url(raw: str, final_url: str) -> str:
    if raw == "last":
        return final_url
    if raw.startswith("func:"):
        call = raw[len("func:") :].replace("__last_url__", final_url)
        match = re.fullmatch(r"reddit_get_post_url\('(.*)'\)", call)
        if match is None:
            raise EvalConfigError(
                f"program_html url {raw!r}: only func:reddit_get_post_url('__last_url__') is "
                "supported (WebArena's other helpers call its sites' private APIs)"
            )
        return reddit_get_post_url(match.group(1))
    return raw


def program_html(task: dict, ctx: EvalContext, judge: Judge | None = None) -> float:
    score = 1.0
    for target in task["eval"].get("program_html") or []:
        locator = str(target.get("locator", ""))
        if locator.startswith("func:"):
            raise EvalConfigError(f"program_html locator {locator!r}: helper functions are not supported")
        text = html.unescape(ctx.page_text(_target_url(str(target["url"]), ctx.url), locator) or "")
        required = target.get("required_contents") or {}
        if "exact_match" in required:
            score *= exact_match(str(required["exact_match"]), text)
        elif "must_include" in required:
            for content in _as_list(required["must_include"], "must_include"):
                score *= float(any(must_include(alt, text) for alt in str(content).split(OR)))
        else:
            raise EvalConfigError(
                f"program_html required_contents needs exact_match or must_include, got {sorted(required)}"
            )
    return score


def db_state(task: dict, ctx: EvalContext, judge: Judge | None = None) -> float:
    checks = task["eval"].get("db_state") or []
    if not checks:
        raise EvalConfigError("db_state needs eval.db_state: [{'sql': ..., 'expected': [[...], ...]}]")
    return float(all(ctx.db_query(check["sql"]) == check["expected"] for check in checks))


EVALUATORS: dict[str, Callable[[dict, EvalContext, Judge | None], float]] = {
    "string_match": string_match,
    "url_match": url_match,
    "program_html": program_html,
    "db_state": db_state,
}


def needs_judge(task: dict) -> bool:
    """Whether scoring `task` calls an LLM judge (a fuzzy_match reference other than "N/A")."""
    refs = task.get("eval", {}).get("reference_answers") or {}
    return (
        "string_match" in task.get("eval", {}).get("eval_types", [])
        and refs.get("fuzzy_match", "N/A") != "N/A"
    )


def evaluate(task: dict, ctx: EvalContext, *, judge: Judge | None = None) -> float:
    """The task's score in [0, 1]: the product of its eval types' scores."""
    types = task.get("eval", {}).get("eval_types") or []
    unknown = [t for t in types if t not in EVALUATORS]
    if not types or unknown:
        raise EvalConfigError(
            f"task {task.get('task_id')!r}: eval_types {types!r}; known: {', '.join(EVALUATORS)}"
        )
    if needs_judge(task) and judge is None:  # before any page is opened
        raise _needs_judge_error(task)
    score = 1.0
    for name in types:
        score *= EVALUATORS[name](task, ctx, judge)
        if score == 0.0:
            break
    return score
