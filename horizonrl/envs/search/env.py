"""The search environment: answer a question by querying a retriever (Search-R1 style).

See the package docstring (`horizonrl.envs.search`) for the observation, action and
reward contract; this module holds the episode logic only.
"""

from __future__ import annotations

import re
from typing import Any

from horizonrl.envs.core import StepResult, UnknownItemError, make_info, parse_item_id
from horizonrl.envs.search.data import QAItem, SearchDataset
from horizonrl.envs.search.retrieval import Retriever, format_information
from horizonrl.envs.search.scoring import exact_match, f1_score, normalize_answer

_TAG = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_OPEN_TAG = re.compile(r"<(search|answer)>(.*)$", re.DOTALL | re.IGNORECASE)
MAX_QUERY_CHARS = 500
HOW_TO = "Write <search>your query</search> to search, or <answer>your answer</answer> to answer."


def parse_search_action(action: str) -> tuple[str | None, str]:
    """`("search" | "answer" | None, body)` from an action; the first tag wins, as in Search-R1.

    The whole model response is accepted too (clients of the reference send it as is), and
    an opening tag whose closing tag was cut off by a stop sequence still counts.
    """
    match = _TAG.search(action) or _OPEN_TAG.search(action)
    if match is None:
        return None, ""
    return match.group(1).lower(), " ".join(match.group(2).split())


class SearchEnv:
    """One question at a time; `search` steps return passages, `answer` steps are scored."""

    def __init__(
        self,
        dataset: SearchDataset,
        retriever: Retriever,
        *,
        top_k: int = 3,
        answer_ends_episode: bool = True,
    ) -> None:
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        self.dataset = dataset
        self.retriever = retriever
        self.top_k = top_k
        self.answer_ends_episode = answer_ends_episode
        self._item: QAItem | None = None
        self._searches = 0
        self._f1 = 0.0
        self._done = False
        self._solved = False
        self._retrieved: set[str] = set()
        self._found = False

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start the episode of `item_id` (the env is deterministic: `seed` changes nothing)."""
        family, index = parse_item_id(item_id)
        if family != self.dataset.family:
            raise UnknownItemError(f"item {item_id!r} does not belong to family {self.dataset.family!r}")
        self._item = self.dataset.item(index)
        self._searches, self._f1, self._done, self._solved = 0, 0.0, False, False
        self._retrieved, self._found = set(), False
        return f"Question: {self._item.question}", self._info()

    def _info(self, **extra: Any) -> dict[str, Any]:
        assert self._item is not None
        if "valid" in extra:  # a step: the generic flag the trainer reads
            extra["invalid_action"] = not extra["valid"]
        return make_info(
            self._solved,
            float(self._solved),
            self._item.category,
            f1=round(self._f1, 6),
            searches=self._searches,
            state_key=" ".join(sorted(self._retrieved)),
            **extra,
        )

    def step(self, action: str) -> StepResult:
        if self._item is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            return StepResult("The episode is over; reset to play again.", 0.0, True, False, self._info())
        kind, body = parse_search_action(str(action))
        if kind is None:
            obs = f"Invalid action: no <search> or <answer> tag found. {HOW_TO}"
            return StepResult(obs, 0.0, False, False, self._info(valid=False))
        if not body:
            obs = f"Invalid action: the {kind} is empty. {HOW_TO}"
            return StepResult(obs, 0.0, False, False, self._info(valid=False))
        if kind == "search":
            self._searches += 1
            hits = self.retriever.search(body[:MAX_QUERY_CHARS], k=self.top_k)
            self._retrieved.update(str(h.id) for h in hits)
            found = not self._found and any(self._holds_answer(f"{h.title} {h.text}") for h in hits)
            self._found = self._found or found
            info = self._info(valid=True, progress=float(found))
            return StepResult(format_information(hits), 0.0, False, False, info)
        return self._answer(body)

    def _holds_answer(self, passage: str) -> bool:
        """A gold answer occurs in the passage, as whole words after answer normalization."""
        assert self._item is not None
        text = f" {normalize_answer(passage)} "
        return any(f" {gold} " in text for a in self._item.answers if (gold := normalize_answer(a)))

    def _answer(self, answer: str) -> StepResult:
        assert self._item is not None
        self._f1 = max(self._f1, f1_score(answer, self._item.answers))
        if exact_match(answer, self._item.answers):
            self._solved = self._done = True
            return StepResult("Your answer is correct.", 1.0, True, False, self._info(valid=True))
        if self.answer_ends_episode:
            self._done = True
            return StepResult("Your answer is incorrect.", 0.0, True, False, self._info(valid=True))
        obs = "Your answer is incorrect. Search more or answer again."
        return StepResult(obs, 0.0, False, False, self._info(valid=True))

    def available_actions(self) -> list[str] | None:
        return None

    def close(self) -> None:
        self._item = None
