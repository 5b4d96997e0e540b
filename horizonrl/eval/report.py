"""Eval reports: `report.json` (machine-readable) and `report.md` (a table per category).

`report.json` for one family:

    {"env": "textcraft", "model": "default", "split": "test", "k": 1, "strategy": "react", "n_items": 20,
     "success_rate": ..., "mean_score": ..., "avg_at_k": ..., "pass_at_k": ..., "mean_turns": ...,
     "n_failed": 0, "by_category": {"depth 1": {same fields}, ...},
     "families": {"textcraft": {same fields + by_category}}, "settings": {...}, "timing": {...}}

With several families, the top-level figures are the unweighted average over families
(each family one row, as the paper's tables), `by_category` is keyed "family/category",
and `families` holds each family's own report block.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from horizonrl.eval.metrics import EVAL_FIELDS

_AVERAGED = ("success_rate", "mean_score", "avg_at_k", "pass_at_k", "mean_turns")


def combine(
    families: Mapping[str, dict[str, Any]], *, model: str, split: str, k: int, settings: dict[str, Any]
) -> dict[str, Any]:
    """The whole report from per-family `eval_summary` blocks."""
    report: dict[str, Any] = {"env": ",".join(families), "model": model, "split": split, "k": k}
    report["strategy"] = str(settings.get("strategy", "react"))  # the agent strategy that played
    if len(families) == 1:
        (block,) = families.values()
        report.update({key: value for key, value in block.items()})
    else:
        blocks = list(families.values())
        report["n_items"] = sum(b["n_items"] for b in blocks)
        report["n_trajectories"] = sum(b["n_trajectories"] for b in blocks)
        report["n_failed"] = sum(b["n_failed"] for b in blocks)
        for key in _AVERAGED:
            report[key] = sum(b[key] for b in blocks) / len(blocks)
        report["by_category"] = {
            f"{fam}/{cat}": row for fam, b in families.items() for cat, row in b["by_category"].items()
        }
    report["families"] = dict(families)
    report["settings"] = settings
    return report


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _row(name: str, block: dict[str, Any]) -> str:
    return (
        f"| {name} | {block['n_items']} | {_pct(block['success_rate'])} | {block['mean_score']:.3f} | "
        f"{_pct(block['avg_at_k'])} | {_pct(block['pass_at_k'])} | {block['mean_turns']:.1f} | "
        f"{block.get('n_failed', 0)} |"
    )


def to_markdown(report: dict[str, Any]) -> str:
    """A family table (one row each + the average) and a category table per family."""
    k = report["k"]
    header = (
        f"| {{}} | items | success % | mean score | avg@{k} % | pass@{k} % | mean turns | failed |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    settings = report.get("settings", {})
    lines = [
        f"# Eval: {report['model']} on {report['env']} ({report['split']})",
        "",
        f"Agent strategy: {report.get('strategy', 'react')}",
        "",
        ", ".join(f"{key}={value}" for key, value in settings.items() if key not in ("out",)),
        "",
        header.format("family"),
    ]
    for fam, block in report["families"].items():
        lines.append(_row(fam, block))
    if len(report["families"]) > 1:
        lines.append(_row("**average**", report))
    for fam, block in report["families"].items():
        lines += ["", f"## {fam}", "", header.format("category")]
        lines += [_row(cat, row) for cat, row in block["by_category"].items()]
        lines.append(_row("**all**", block))
    timing = report.get("timing")
    if timing:
        lines += ["", "Timing: " + ", ".join(f"{key}={value}" for key, value in timing.items())]
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "report.json", out / "report.md"
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    md_path.write_text(to_markdown(report))
    return json_path, md_path


__all__ = ["EVAL_FIELDS", "combine", "to_markdown", "write_report"]
