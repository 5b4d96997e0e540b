"""The learning protocol's statistics, as pure functions (no files, no models).

- `seed_spread`: per-seed success rates -> mean, min, max and sample std (ddof 1) over seeds.
- `bootstrap_ci`: a two-way percentile bootstrap of the mean success over a seeds x items table:
  each replicate resamples the items (with replacement) *and* the seeds (with replacement,
  independently), then averages the resampled table. It captures both sources of variation: which
  eval items happened to be drawn, and which training seed. Pooling the seeds x items cells into
  one list and resampling that would treat 3 x 70 outcomes as 210 independent ones and give a
  narrower interval than the seeds justify.
- `bootstrap_diff_ci`: the same for a difference of two arms on the same items: one item resample
  per replicate shared by both arms (paired by item), each arm's seeds resampled on their own.
- `band`: curves of several seeds on one x grid (linear interpolation, no extrapolation) ->
  mean, min and max per grid point, for the learning curves' shaded bands.
- `curve_rows`: a run's `metrics.jsonl` lines -> the learning curve points (step, cumulative
  sampled tokens, sampled success, held-out eval success where an eval ran).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def seed_spread(rates: Sequence[float]) -> dict[str, float]:
    """Mean, min, max and sample standard deviation (ddof 1; 0 for one seed) of per-seed rates."""
    if not rates:
        raise ValueError("seed_spread: no seeds")
    values = np.asarray(rates, dtype=float)
    std = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    return {"mean": float(values.mean()), "min": float(values.min()), "max": float(values.max()), "std": std}


def _table(outcomes: Sequence[Sequence[float]]) -> np.ndarray:
    table = np.asarray(outcomes, dtype=float)
    if table.ndim != 2 or table.shape[0] == 0 or table.shape[1] == 0:
        raise ValueError(f"expected a non-empty seeds x items table, got shape {table.shape}")
    return table


def _replicates(table: np.ndarray, items: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Mean of `table` for each replicate's item resample `items` (B, N) and a fresh seed resample."""
    n_boot = items.shape[0]
    seeds = rng.integers(0, table.shape[0], size=(n_boot, table.shape[0]))
    picked = table[seeds[:, :, None], items[:, None, :]]  # (B, S, N)
    means: np.ndarray = picked.mean(axis=(1, 2))
    return means


def bootstrap_ci(
    outcomes: Sequence[Sequence[float]], *, n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of the mean of `outcomes` (rows: seeds, columns: the same items), two-way
    resampling (items and seeds, see the module docstring), `n_boot` replicates, numpy's default
    generator seeded with `seed` (so the interval is reproducible)."""
    table = _table(outcomes)
    rng = np.random.default_rng(seed)
    items = rng.integers(0, table.shape[1], size=(n_boot, table.shape[1]))
    stats = _replicates(table, items, rng)
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def bootstrap_diff_ci(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of mean(a) - mean(b), two arms evaluated on the same items (columns in
    the same order): items resampled once per replicate for both, seeds per arm."""
    ta, tb = _table(a), _table(b)
    if ta.shape[1] != tb.shape[1]:
        raise ValueError(f"the arms have {ta.shape[1]} and {tb.shape[1]} items; they must share items")
    rng = np.random.default_rng(seed)
    items = rng.integers(0, ta.shape[1], size=(n_boot, ta.shape[1]))
    stats = _replicates(ta, items, rng) - _replicates(tb, items, rng)
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def _interp(points: Sequence[tuple[float, float]], x: float) -> float:
    """Linear interpolation of sorted `points` at `x`; NaN outside their x range."""
    xs = [p[0] for p in points]
    if not points or x < xs[0] or x > xs[-1]:
        return math.nan
    return float(np.interp(x, xs, [p[1] for p in points]))


def band(
    curves: Sequence[Sequence[tuple[float, float]]], grid: Sequence[float], *, require_all: bool = True
) -> list[dict[str, float]]:
    """Per grid point x: the mean, min and max over the `curves` (each a list of (x, y), sorted by
    x) interpolated linearly at x, and `n`, how many curves reach x. A curve does not extend past
    its own first/last point; with `require_all` a grid point that not every curve reaches is
    dropped (else it is kept with the curves that reach it)."""
    out = []
    for x in grid:
        ys = [y for c in curves if not math.isnan(y := _interp(sorted(c), x))]
        if not ys or (require_all and len(ys) < len(curves)):
            continue
        out.append({"x": float(x), "mean": float(np.mean(ys)), "lo": min(ys), "hi": max(ys), "n": len(ys)})
    return out


def curve_rows(rows: Sequence[dict[str, Any]], start_success: float | None = None) -> list[dict[str, Any]]:
    """Learning-curve points of one run from its metrics lines: per step the cumulative sampled
    tokens (`sampled_tokens/total`), sampled success (`success/mean`) and, where the run logged
    one at that step, the eval success (`eval/success`). `start_success`: the eval success of the
    starting checkpoint, placed at step 0 / 0 tokens."""
    points: dict[int, dict[str, Any]] = {}
    if start_success is not None:
        points[0] = {"step": 0, "tokens": 0.0, "success": None, "eval_success": start_success}
    tokens = 0.0
    for row in sorted(rows, key=lambda r: int(r["step"])):
        step = int(row["step"])
        empty = {"step": step, "tokens": tokens, "success": None, "eval_success": None}
        point = points.setdefault(step, empty)
        if "sampled_tokens/total" in row:
            tokens += float(row["sampled_tokens/total"])
            point["tokens"] = tokens
            point["success"] = float(row["success/mean"])
        if "eval/success" in row:
            point["eval_success"] = float(row["eval/success"])
    return [points[s] for s in sorted(points)]
