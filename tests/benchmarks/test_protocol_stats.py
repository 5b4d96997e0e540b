"""The learning protocol's statistics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from benchmarks.protocol_stats import band, bootstrap_ci, bootstrap_diff_ci, curve_rows, seed_spread


def test_seed_spread_is_mean_min_max_and_sample_std():
    # mean 0.4; deviations -0.2, 0, 0.2 -> sum of squares 0.08 / (3 - 1) = 0.04 -> std 0.2
    assert seed_spread([0.2, 0.4, 0.6]) == pytest.approx({"mean": 0.4, "min": 0.2, "max": 0.6, "std": 0.2})
    assert seed_spread([0.5])["std"] == 0.0
    with pytest.raises(ValueError, match="no seeds"):
        seed_spread([])


def test_bootstrap_of_a_constant_table_is_that_constant():
    assert bootstrap_ci([[1, 1, 1], [1, 1, 1]]) == (1.0, 1.0)
    assert bootstrap_ci([[0.0, 0.0]]) == (0.0, 0.0)


def test_bootstrap_over_items_two_outcomes():
    # one seed, items [0, 1]: a replicate's mean is 0 (p 1/4), 0.5 (1/2) or 1 (1/4), so the 2.5% and
    # 97.5% quantiles of 2000 replicates are 0 and 1
    assert bootstrap_ci([[0, 1]]) == (0.0, 1.0)
    # three items [0, 0, 1]: P(mean = 0) = (2/3)^3 = 0.30 > 2.5%, P(mean = 1) = 1/27 = 0.037 > 2.5%
    assert bootstrap_ci([[0, 0, 1]]) == (0.0, 1.0)


def test_bootstrap_resamples_seeds_too():
    # seed A solved nothing, seed B everything (3 items each): item resampling alone changes no
    # replicate (every column is [0, 1]); resampling the seeds gives 0 (1/4), 0.5 (1/2), 1 (1/4)
    assert bootstrap_ci([[0, 0, 0], [1, 1, 1]]) == (0.0, 1.0)
    # pooled as 6 independent cells the interval would be narrower: check ours is not that one
    pooled = bootstrap_ci([[0, 0, 0, 1, 1, 1]])
    assert pooled[0] > 0.0 and pooled[1] < 1.0


def test_bootstrap_is_reproducible_and_its_level_orders_intervals():
    table = [[0, 1, 1, 0, 1, 0, 0, 1, 1, 1], [1, 1, 0, 0, 1, 0, 1, 1, 1, 0]]
    assert bootstrap_ci(table, seed=3) == bootstrap_ci(table, seed=3)
    lo95, hi95 = bootstrap_ci(table)
    lo50, hi50 = bootstrap_ci(table, level=0.5)
    assert lo95 <= lo50 <= 0.6 <= hi50 <= hi95
    with pytest.raises(ValueError, match="seeds x items"):
        bootstrap_ci([])


def test_paired_difference_interval():
    # the same items solved by both arms: every replicate's difference is exactly 0
    same = [[0, 1, 1, 0]]
    assert bootstrap_diff_ci(same, same) == (0.0, 0.0)
    # arm a (one seed) solves every item, arm b (two seeds) none: every replicate differs by 1
    assert bootstrap_diff_ci([[1, 1, 1]], [[0, 0, 0], [0, 0, 0]]) == (1.0, 1.0)
    with pytest.raises(ValueError, match="share items"):
        bootstrap_diff_ci([[1, 0]], [[1, 0, 1]])


def test_band_interpolates_and_does_not_extrapolate():
    a = [(0.0, 0.0), (2.0, 1.0)]
    b = [(0.0, 1.0), (2.0, 1.0), (4.0, 0.0)]
    rows = band([a, b], [0, 1, 2, 3])
    # x=1: a gives 0.5 (halfway), b gives 1.0; x=3 is past a's last point: dropped
    assert [r["x"] for r in rows] == [0, 1, 2]
    assert [r["mean"] for r in rows] == [0.5, 0.75, 1.0]
    assert [r["lo"] for r in rows] == [0.0, 0.5, 1.0]
    assert [r["hi"] for r in rows] == [1.0, 1.0, 1.0]
    kept = band([a, b], [3], require_all=False)
    assert kept == [{"x": 3.0, "mean": 0.5, "lo": 0.5, "hi": 0.5, "n": 1}]


def test_curve_rows_accumulate_tokens_and_take_evals():
    rows = [
        {"step": 1, "sampled_tokens/total": 100.0, "success/mean": 0.25, "time/step": 3.0},
        {"step": 2, "sampled_tokens/total": 50.0, "success/mean": 0.5, "time/step": 3.0},
        {"step": 2, "eval/success": 0.4},
    ]
    points = curve_rows(rows, start_success=0.3)
    assert [(p["step"], p["tokens"], p["success"], p["eval_success"]) for p in points] == [
        (0, 0.0, None, 0.3),
        (1, 100.0, 0.25, None),
        (2, 150.0, 0.5, 0.4),
    ]
    assert math.isclose(sum(p["tokens"] for p in points), 250.0)
