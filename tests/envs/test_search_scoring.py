"""Answer normalization, exact match and F1 of the search family, on hand-made cases."""

from __future__ import annotations

import pytest

from horizonrl.envs.search.scoring import exact_match, f1_score, normalize_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The  Eiffel Tower!", "eiffel tower"),
        ("A Tale of Two Cities.", "tale of two cities"),
        ("an apple", "apple"),
        ("Theatre", "theatre"),  # "the" inside a word is not an article
        ("  U.S.A. ", "usa"),
        ("rock-'n'-roll", "rocknroll"),
        ("Café\tNoir", "café noir"),
        ("1,024", "1024"),
        ("", ""),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_exact_match_uses_normalization_and_any_alias() -> None:
    assert exact_match("the eiffel tower", ["Eiffel Tower"])
    assert exact_match("Orvel River", ["Orvel", "Orvel River"])
    assert exact_match("orvel.", ["Orvel", "Orvel River"])
    assert not exact_match("Eiffel", ["Eiffel Tower"])
    assert not exact_match("Eiffel Tower Paris", ["Eiffel Tower"])
    assert not exact_match("anything", [])


def test_f1_hand_computed() -> None:
    # pred tokens [tower, in, paris], gold [eiffel, tower]: overlap 1, P = 1/3, R = 1/2 -> F1 = 0.4
    assert f1_score("the tower in paris", ["Eiffel Tower"]) == pytest.approx(0.4)
    # repeated tokens count once per gold occurrence: P = 1/2, R = 1 -> 2/3
    assert f1_score("paris paris", ["Paris"]) == pytest.approx(2 / 3)
    assert f1_score("Eiffel Tower", ["Eiffel Tower"]) == 1.0
    assert f1_score("London", ["Eiffel Tower"]) == 0.0
    assert f1_score("", ["Eiffel Tower"]) == 0.0


def test_f1_takes_best_alias_and_no_partial_credit_for_yes_no() -> None:
    assert f1_score("orvel", ["Orvel River", "Orvel"]) == 1.0
    assert f1_score("yes", ["no"]) == 0.0
    assert f1_score("no", ["No"]) == 1.0
    assert f1_score("yes it is", ["yes"]) == 0.0  # HotpotQA: a yes/no gold needs the exact word
