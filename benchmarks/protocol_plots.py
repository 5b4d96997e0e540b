"""Learning curves of the protocol: one line per arm, a band (min-max) over its seeds.

Four panels: held-out greedy eval success (top) and sampled training success (bottom), each by RL
step (left) and by sampled tokens (right, the running sum of `sampled_tokens/total`). An RL arm's
eval line starts at the SFT checkpoint's eval (step 0, from the `sft` arm) and has a point at every
step it was evaluated (`--eval-every`, and the final eval). The SFT arms train no RL steps: they
are drawn as horizontal lines (mean over seeds, band min-max) across the eval panels. Matplotlib
with the headless Agg backend (no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.protocol_stats import band, curve_rows  # noqa: E402


def _eval_mean(result: dict[str, Any]) -> float:
    values = list(result["items"].values())
    return sum(values) / len(values)


Lines = list[list[tuple[float, float]]]


def arm_curves(results: list[dict[str, Any]], start: float | None) -> dict[str, Lines]:
    """Per seed, the (x, y) lines: `eval_step`, `eval_tokens`, `train_step`, `train_tokens`."""
    out: dict[str, Lines] = {k: [] for k in ("eval_step", "eval_tokens", "train_step", "train_tokens")}
    for r in results:
        points = curve_rows(r["metrics"], start)
        ev = [p for p in points if p["eval_success"] is not None]
        tr = [p for p in points if p["success"] is not None]
        out["eval_step"].append([(p["step"], p["eval_success"]) for p in ev])
        out["eval_tokens"].append([(p["tokens"], p["eval_success"]) for p in ev])
        out["train_step"].append([(p["step"], p["success"]) for p in tr])
        out["train_tokens"].append([(p["tokens"], p["success"]) for p in tr])
    return out


def _grid(curves: list[list[tuple[float, float]]], by_step: bool) -> list[float]:
    if by_step:
        return sorted({x for c in curves for x, _ in c})
    ends = [c[-1][0] for c in curves if c]
    starts = [c[0][0] for c in curves if c]
    if not ends:
        return []
    return list(np.linspace(max(starts), min(ends), 40)) if min(ends) > max(starts) else [min(ends)]


def plot_curves(found: dict[str, list[dict[str, Any]]], path: Path, *, title: str) -> Path:
    """Write the four-panel figure of all arms in `found` to `path` (PNG)."""
    start = _eval_mean(found["sft"][0]) if "sft" in found else None
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharey="row")
    panels = {
        "eval_step": axes[0][0],
        "eval_tokens": axes[0][1],
        "train_step": axes[1][0],
        "train_tokens": axes[1][1],
    }
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    flat: list[tuple[str, list[dict[str, Any]]]] = []
    for i, (arm, results) in enumerate(found.items()):
        color = colors[i % len(colors)]
        if results[0]["kind"] != "rl":
            flat.append((arm, results))
            continue
        for key, curves in arm_curves(results, start).items():
            points = band(curves, _grid(curves, key.endswith("step")))
            if not points:
                continue
            ax = panels[key]
            xs = [p["x"] for p in points]
            ax.plot(xs, [p["mean"] for p in points], color=color, marker="o" if len(xs) < 12 else None,
                    label=f"{arm} ({len(results)} seeds)")  # fmt: skip
            ax.fill_between(xs, [p["lo"] for p in points], [p["hi"] for p in points], color=color, alpha=0.2)
    for j, (arm, results) in enumerate(flat):
        color = colors[(len(found) + j) % len(colors)]
        rates = [_eval_mean(r) for r in results]
        mean = sum(rates) / len(rates)
        for key in ("eval_step", "eval_tokens"):
            ax = panels[key]
            ax.axhline(mean, color=color, linestyle="--", label=f"{arm} ({len(results)} seed(s))")
            if len(rates) > 1:
                ax.axhspan(min(rates), max(rates), color=color, alpha=0.12)
    axes[0][0].set_ylabel("greedy eval success (held-out)")
    axes[1][0].set_ylabel("sampled success (training)")
    for ax in panels.values():
        ax.set_ylim(-0.02, 1.02)
    axes[1][0].set_xlabel("RL step")
    axes[1][1].set_xlabel("sampled tokens (cumulative)")
    for ax in panels.values():
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="best")
    fig.suptitle(f"{title} — line: mean over seeds, band: min–max", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
