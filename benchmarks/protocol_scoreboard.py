"""Every learning-protocol archive on one page: each RL arm against its equal-compute SFT.

    python benchmarks/protocol_scoreboard.py   # prints it, writes results/learning_protocol_scoreboard.md

Reads `benchmarks/results/learning_protocol_*.runs.json` (the archives `benchmarks/protocol.py
--results NAME` writes; see `protocol_report`) and, for each archive and family, lists every RL arm
with the checkpoint it started from, its mean greedy success over seeds and bootstrap interval,
how many of its steps had a learning signal (`signal`), and each continued-SFT arm timed against
it (`budget_arm_of`) with the paired difference; an archive of checkpoints scored again under
another eval (`protocol_rescore.py`) says so after its name. The last column applies issue 18's bar: RL at
least 10 points above its equal-compute SFT, with the two arms' intervals not overlapping. Only
files are read; nothing is trained or evaluated.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without install

from benchmarks.protocol_report import (  # noqa: E402
    RESULTS,
    budget_arm_of,
    equal_arms,
    load_results,
    outcome_table,
    paired_diff,
    summarize,
)

SCOREBOARD = "learning_protocol_scoreboard.md"
"""The page's file name under the results folder."""
BAR_POINTS = 0.10
"""Issue 18's bar: RL ≥ its equal-compute SFT + 10 points, the intervals not overlapping."""


def archives(results: Path = RESULTS) -> list[Path]:
    """The archives (`learning_protocol_NAME.runs.json`) under `results`, sorted by name."""
    return sorted(results.glob("learning_protocol_*.runs.json"))


def meets_bar(rl: dict[str, Any], equal: dict[str, Any], diff: float) -> bool:
    """`rl` and `equal` are one family's blocks of `summarize`; `diff` their paired difference."""
    return diff >= BAR_POINTS - 1e-9 and rl["ci95"][0] > equal["ci95"][1]


def signal(results: list[dict[str, Any]]) -> tuple[float, float] | None:
    """How much the RL arm's seeds had to learn from, from their archived step metrics: the mean
    number of steps that updated the policy (`update/skipped` 0: some group had reward variance)
    and the mean fraction of groups with reward variance over all steps; None when not recorded."""
    steps = [m for r in results for m in r.get("metrics", []) if "update/skipped" in m]
    if not steps:
        return None
    updated = sum(1 for m in steps if not m["update/skipped"]) / len(results)
    informative = sum(float(m.get("groups/informative_frac", 0.0)) for m in steps) / len(steps)
    return updated, informative


def rows(archive: Path, n_boot: int = 2000) -> list[dict[str, Any]]:
    """One row per RL arm x family x equal-compute arm timed against it in `archive`: every seed of
    that arm got this RL arm's seconds (`budget_arm_of`). An RL arm with none gets one row without
    a baseline; an equal-compute arm whose seeds were timed against different RL arms, none."""
    name = archive.name.removesuffix(".runs.json")
    runs = json.loads(archive.read_text())["runs"]
    found = load_results(archive.parent / "no run folders", archive=runs)  # the archive alone
    summary = summarize(found, n_boot=n_boot)
    start = next((r for rs in found.values() for r in rs if r.get("kind") == "eval"), None)
    out = []
    for arm, results in found.items():
        if results[0]["kind"] != "rl":
            continue
        timed = [e for e in equal_arms(found) if all(budget_arm_of(r, found) == arm for r in found[e])]
        for fam, block in summary[arm]["families"].items():
            base = summary[start["arm"]]["families"].get(fam) if start else None
            items, table = outcome_table(results, fam)
            gain = paired_diff(found[start["arm"]], fam, items, table, n_boot) if start else None
            row = {
                "archive": name,
                "rescored": results[0].get("rescored", {}).get("overrides"),
                "family": fam,
                "machine": results[0].get("machine", "not recorded"),
                "start_sha256": str(results[0].get("start_sha256", ""))[:8],
                "start": base["mean"] if base else None,
                "arm": arm,
                "seeds": len(results),
                "steps": max(r.get("steps", 0) for r in results),
                "signal": signal(results),
                "mean": block["mean"],
                "ci95": block["ci95"],
                "vs_start": gain,
            }
            if not timed:
                out.append({**row, "equal_arm": None})
            for other in timed:
                eq = summary[other]["families"].get(fam)
                d = block.get("diffs", {}).get(other)
                if eq is None or d is None:
                    continue
                out.append(
                    {
                        **row,
                        "equal_arm": other,
                        "equal_seeds": len(found[other]),
                        "equal_mean": eq["mean"],
                        "equal_ci95": eq["ci95"],
                        "diff": d["diff"],
                        "diff_ci95": d["ci95"],
                        "bar": meets_bar(block, eq, d["diff"]),
                    }
                )
    return out


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _diff(d: tuple[float, tuple[float, float]] | None) -> str:
    return "—" if d is None else f"{100 * d[0]:+.1f} [{100 * d[1][0]:+.1f}, {100 * d[1][1]:+.1f}]"


def _signal(s: tuple[float, float] | None, steps: int) -> str:
    return "—" if s is None else f"{s[0]:.1f} of {steps}, {100 * s[1]:.0f}%"


def _ci(ci: tuple[float, float] | list[float]) -> str:
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def markdown(all_rows: list[dict[str, Any]]) -> str:
    lines = [
        "## Learning protocol: every archive, RL against its equal-compute SFT",
        "",
        "`python benchmarks/protocol_scoreboard.py` "
        "(from `benchmarks/results/learning_protocol_*.runs.json`). "
        "Greedy success (%) over seeds, 95% bootstrap intervals (items and seeds), Δ paired by item; "
        "steps updated: the RL steps that changed the policy (mean over seeds; a step with no group "
        "whose rewards differ is skipped), and the share of groups with differing rewards over all steps. "
        "Bar (issue 18): Δ ≥ +10 points and the two intervals apart.",
        "",
        "| archive | family | machine | start (SHA-256, %) | RL arm | seeds | steps | RL mean [95% CI] "
        "| RL − start | steps updated, groups with signal "
        "| equal-compute arm (seeds) | its mean [95% CI] | Δ [95% CI] | bar |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in all_rows:
        start = f"{r['start_sha256']}…, {_pct(r['start'])}"
        name = r["archive"].removeprefix("learning_protocol_")
        if r["rescored"]:  # the same checkpoints under another eval (`protocol_rescore.py`)
            name += f" (rescored: {' '.join(r['rescored'])})"
        head = (
            f"| {name} | {r['family']} | {r['machine']} | {start} "
            f"| {r['arm']} | {r['seeds']} | {r['steps']} | **{_pct(r['mean'])}** {_ci(r['ci95'])} "
            f"| {_diff(r['vs_start'])} | {_signal(r['signal'], r['steps'])} "
        )
        if r["equal_arm"] is None:
            lines.append(head + "| — | — | — | — |")
            continue
        lines.append(
            head
            + f"| {r['equal_arm']} ({r['equal_seeds']}) | {_pct(r['equal_mean'])} {_ci(r['equal_ci95'])} "
            f"| **{_diff((r['diff'], r['diff_ci95']))}** "
            f"| {'met' if r['bar'] else 'not met'} |"
        )
    met = sum(1 for r in all_rows if r.get("bar"))
    paired = sum(1 for r in all_rows if r["equal_arm"] is not None)
    lines += ["", f"{met} of {paired} RL-vs-equal-compute pairs meet the bar."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=RESULTS, help="the folder of the archives")
    p.add_argument("--out", type=Path, default=None, help="the Markdown file (default: under --results)")
    args = p.parse_args(argv)
    text = write_scoreboard(args.results, args.out)
    if text is None:
        raise SystemExit(f"protocol_scoreboard: no learning_protocol_*.runs.json under {args.results}")
    print(text)
    return 0


def write_scoreboard(results: Path, out: Path | None = None) -> str | None:
    """Write the page of every archive under `results` to `out` (default:
    `results/learning_protocol_scoreboard.md`) and return it; None when there is no archive."""
    paths = archives(results)
    if not paths:
        return None
    text = markdown([row for path in paths for row in rows(path)])
    (out or results / SCOREBOARD).write_text(text)
    return text


if __name__ == "__main__":
    raise SystemExit(main())
