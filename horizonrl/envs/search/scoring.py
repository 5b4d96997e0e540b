"""Answer scoring for the search family: SQuAD-style normalization, exact match and token F1.

These are the metrics Search-R1 and FlashRAG report on the seven QA sets:

    normalize_answer("The  Eiffel Tower!")   -> "eiffel tower"
    exact_match("eiffel tower", ["The Eiffel Tower"])  -> True
    f1_score("the tower in paris", ["Eiffel Tower"])    -> 0.4

Normalization lower-cases, removes punctuation, drops the articles a/an/the and
collapses whitespace. A prediction is scored against every gold answer and the best
score counts (a question may list aliases: "Orvel", "Orvel River").
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)
# Answers that F1 must not give partial credit for (HotpotQA's rule): "yes" vs "no" is 0, not 0.5.
_CLOSED = ("yes", "no", "noanswer")


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation and articles, collapse whitespace."""
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, answers: Sequence[str]) -> bool:
    """True when the normalized prediction equals one normalized gold answer."""
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(a) for a in answers)


def _f1(prediction: str, answer: str) -> float:
    pred, gold = normalize_answer(prediction), normalize_answer(answer)
    if (pred in _CLOSED or gold in _CLOSED) and pred != gold:
        return 0.0
    pred_tokens, gold_tokens = pred.split(), gold.split()
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, answers: Sequence[str]) -> float:
    """Best token-level F1 of the normalized prediction against any gold answer (0 if none)."""
    return max((_f1(prediction, a) for a in answers), default=0.0)
