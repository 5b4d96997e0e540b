"""The learning protocol's report: `<out>/*/result.json` -> tables (Markdown, JSON) and curves (PNG).

`summarize` turns the arm x seed results into per-arm, per-family statistics (`protocol_stats`);
`markdown` writes them as one table per family; `write_report` writes `<out>/protocol.md`,
`<out>/protocol.json` and `<out>/curves.png`, and copies them to `benchmarks/results/NAME.*` when
asked (`--results NAME`).

The archive, `benchmarks/results/NAME.runs.json` (with `--results NAME`): every arm x seed result
the report was made from (eval outcomes per item, step seconds, the curve's metrics, the command
line's overrides) and the commands that made them. Run folders are scratch (a fresh checkout or
machine has none); the archive is committed, so a later run of the protocol under the same NAME
skips what it holds and the report keeps every arm x seed, paired by item, wherever it ran. Every
run records the SHA-256 of the checkpoint it started from; runs from different checkpoints are
never mixed in one report.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from benchmarks.protocol_plots import plot_curves
from benchmarks.protocol_stats import bootstrap_ci, bootstrap_diff_ci, seed_spread

RESULTS = Path(__file__).resolve().parent / "results"
REFERENCE_ARM = "sft-equal"
"""Every other arm's difference is taken against this one (the equal-compute baseline)."""
DEFAULT_BUDGET_ARM = "grpo"
"""The RL arm whose step time sft-equal gets unless `--budget-arm` names another."""


ARCHIVED_METRICS = ("step", "time/step", "sampled_tokens/total", "success/mean", "eval/success",
                    "progress/mean", "turns/mean", "turns/invalid_frac", "schedule/max_turns",
                    "groups/informative_frac", "update/skipped", "advantages/abs_mean", "entropy/mean",
                    "grad/norm", "context/tokens_mean", "loss/sft")  # fmt: skip
"""The metrics of each step an archived result keeps: the curves' and the report's, and those the
BENCHMARKS narrative cites (progress, turns and invalid turns, the cap, groups with signal, skipped
updates, advantage size, gradient norm, entropy, context length; the SFT loss of sft-equal)."""


def archive_path(name: str) -> Path:
    return RESULTS / f"{name}.runs.json"


def load_archive(name: str | None) -> tuple[list[str], list[dict[str, Any]]]:
    """The commands and arm x seed results archived under `name` (none when it has no archive)."""
    path = archive_path(name) if name else None
    if path is None or not path.exists():
        return [], []
    data = json.loads(path.read_text())
    return list(data["commands"]), list(data["runs"])


def write_archive(name: str, commands: list[str], found: dict[str, list[dict[str, Any]]]) -> Path:
    runs = [archived(r) for results in found.values() for r in results]
    path = archive_path(name)
    path.write_text(json.dumps({"commands": commands, "runs": runs}, separators=(",", ":")) + "\n")
    return path


def archived(result: dict[str, Any]) -> dict[str, Any]:
    """`result` with its metrics cut to `ARCHIVED_METRICS` (the archive is committed)."""
    rows = [{k: row[k] for k in ARCHIVED_METRICS if k in row} for row in result.get("metrics", [])]
    return {**result, "metrics": rows}


def run_key(result: dict[str, Any]) -> tuple[str, int | None]:
    return result["arm"], result["seed"]


def load_results(
    out: Path, order: list[str] | None = None, archive: list[dict[str, Any]] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Arm -> its results (one per seed, in seed order) found under `out` and in `archive` (a run
    folder's result wins over the archived one of the same arm x seed); arms in `order` first.
    Raises ValueError when they started from different checkpoints (`start_sha256`)."""
    merged = {run_key(r): r for r in archive or []}
    for path in sorted([*out.glob("*/result.json"), *out.glob("*/seed_*/result.json")]):
        result = json.loads(path.read_text())
        merged[run_key(result)] = result
    starts = {r.get("start_sha256") for r in merged.values()}
    if len(starts) > 1:
        by_start = {s: sorted(f"{a}/seed_{x}" for (a, x), r in merged.items() if r.get("start_sha256") == s)
                    for s in starts}  # fmt: skip
        listing = "; ".join(f"{s or 'not recorded'}: {', '.join(v)}" for s, v in by_start.items())
        raise ValueError(f"protocol: the runs started from different checkpoints ({listing})")
    found: dict[str, list[dict[str, Any]]] = {}
    for result in merged.values():
        found.setdefault(result["arm"], []).append(result)
    for results in found.values():
        results.sort(key=lambda r: -1 if r["seed"] is None else r["seed"])
    order = list(order or [])
    return dict(sorted(found.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))


def family(item_id: str) -> str:
    return item_id.rpartition("_")[0]


def outcome_table(results: list[dict[str, Any]], fam: str) -> tuple[list[str], list[list[float]]]:
    """The items of `fam` (sorted) and the seeds x items success table; every seed must have
    evaluated the same items (else the arms were not run with the same eval settings)."""
    sets = [sorted(i for i in r["items"] if family(i) == fam) for r in results]
    if any(s != sets[0] for s in sets):
        raise ValueError(f"arm {results[0]['arm']}: the seeds evaluated different {fam} items")
    return sets[0], [[r["items"][i] for i in sets[0]] for r in results]


def paired_diff(
    ref_results: list[dict[str, Any]], fam: str, items: list[str], table: list[list[float]], n_boot: int
) -> tuple[float, tuple[float, float]] | None:
    """An arm's mean success (`table`, seeds x `items`) minus the reference arm's and its paired
    bootstrap interval; None when the reference evaluated other items."""
    ref_items, ref = outcome_table(ref_results, fam)
    if ref_items != items:
        return None
    mean = sum(map(sum, table)) / (len(table) * len(items))
    ref_mean = sum(map(sum, ref)) / (len(ref) * len(items))
    return mean - ref_mean, bootstrap_diff_ci(table, ref, n_boot=n_boot)


def summarize(found: dict[str, list[dict[str, Any]]], n_boot: int = 2000) -> dict[str, Any]:
    """Per arm and family: seeds, mean success, spread, bootstrap interval, per-category means,
    and the difference to the reference arm (paired by item) with its interval."""
    families = sorted({family(i) for rs in found.values() for r in rs for i in r["items"]})
    summary: dict[str, Any] = {}
    for arm, results in found.items():
        entry: dict[str, Any] = {
            "label": results[0]["label"],
            "kind": results[0]["kind"],
            "seeds": [r["seed"] for r in results],
            "step_seconds": [r["step_seconds"] for r in results],
            "sampled_tokens": [r["sampled_tokens"] for r in results],
            "wall_s": [r["wall_s"] for r in results],
            "families": {},
        }
        for fam in families:
            items, table = outcome_table(results, fam)
            if not items:
                continue
            rates = [sum(row) / len(row) for row in table]
            cats: dict[str, list[float]] = {}
            for r in results:
                for i in items:
                    cats.setdefault(r["categories"][i], []).append(r["items"][i])
            block: dict[str, Any] = {
                "n_items": len(items),
                "per_seed": rates,
                **seed_spread(rates),
                "ci95": bootstrap_ci(table, n_boot=n_boot),
                "by_category": {c: sum(v) / len(v) for c, v in sorted(cats.items())},
            }
            reference = found.get(REFERENCE_ARM) if arm != REFERENCE_ARM else None
            if reference and (d := paired_diff(reference, fam, items, table, n_boot)) is not None:
                block["diff_vs_ref"], block["diff_ci95"] = d
            if results[0]["kind"] == "rl":  # against every equal-compute arm, sft-equal's included
                for other in equal_arms(found):
                    if (d := paired_diff(found[other], fam, items, table, n_boot)) is not None:
                        block.setdefault("diffs", {})[other] = {"diff": d[0], "ci95": d[1]}
            entry["families"][fam] = block
        summary[arm] = entry
    return summary


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def budget_arm_of(result: dict[str, Any], found: dict[str, list[dict[str, Any]]]) -> str:
    """The RL arm whose step time an sft-equal `result` got as budget: its `budget_arm`, else
    (results made before it was recorded) the arm in `found` whose run of the same seed trained
    exactly `budget_s`, else `DEFAULT_BUDGET_ARM`."""
    return result.get("budget_arm") or next(
        (
            arm
            for arm, runs in found.items()
            for o in runs
            if arm != REFERENCE_ARM
            and o.get("kind") != "sft"
            and o.get("seed") == result.get("seed")
            and o.get("step_seconds") == result.get("budget_s")
        ),
        DEFAULT_BUDGET_ARM,
    )


def equal_arms(found: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The equal-compute arms in `found`: sft-equal and the other continued-SFT (`sft`) arms."""
    return [arm for arm, rs in found.items() if arm == REFERENCE_ARM or rs[0].get("kind") == "sft"]


def budget_arms(found: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The RL arms whose step time the equal-compute results in `found` (sft-equal and the other
    `sft` arms) got as budget (`budget_arm_of`)."""
    equal = [r for arm in equal_arms(found) for r in found[arm]]
    return sorted({budget_arm_of(r, found) for r in equal}) or [DEFAULT_BUDGET_ARM]


def markdown(summary: dict[str, Any], title: str, command: str, budget: list[str]) -> str:
    families = sorted({f for e in summary.values() for f in e["families"]})
    lines = [f"## {title}", "", "```", command, "```", ""]
    for fam in families:
        arms = [a for a, e in summary.items() if fam in e["families"]]
        cats = sorted({c for a in arms for c in summary[a]["families"][fam]["by_category"]})
        n = summary[arms[0]]["families"][fam]["n_items"]
        lines += [
            f"### {fam}: greedy success on {n} test items (%)",
            "",
            "| arm | seeds | mean | 95% CI | min–max | std | "
            + " | ".join(cats)
            + f" | Δ vs {REFERENCE_ARM} [95% CI] | train s / seed | sampled tokens / seed |",
            "|---|---|---|---|---|---|" + "---|" * len(cats) + "---|---|---|",
        ]
        for arm in arms:
            e, b = summary[arm], summary[arm]["families"][fam]
            seeds = "1 (seed-free)" if e["seeds"] == [None] else str(len(e["seeds"]))
            diff = ""
            if "diff_vs_ref" in b:
                lo, hi = b["diff_ci95"]
                diff = f"{100 * b['diff_vs_ref']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
            secs = sum(e["step_seconds"]) / len(e["step_seconds"])
            toks = f"{sum(e['sampled_tokens']) / len(e['sampled_tokens']):.0f}" if e["kind"] == "rl" else "—"
            lines.append(
                f"| {arm} ({e['label']}) | {seeds} | **{_pct(b['mean'])}** | "
                f"[{_pct(b['ci95'][0])}, {_pct(b['ci95'][1])}] | {_pct(b['min'])}–{_pct(b['max'])} | "
                f"{_pct(b['std'])} | "
                + " | ".join(_pct(b["by_category"].get(c, float("nan"))) for c in cats)
                + f" | {diff} | {secs:.0f} | {toks} |"
            )
        lines.append("")
        pairs = [(a, o, d) for a in arms for o, d in summary[a]["families"][fam].get("diffs", {}).items()]
        if any(o != REFERENCE_ARM for _, o, _ in pairs):  # a baseline the Δ column does not show
            lines += [f"RL arms against each equal-compute arm ({fam}, paired by item, 95% CI):", ""]
            for arm, other, d in pairs:
                lo, hi = d["ci95"]
                lines.append(f"- {arm} − {other}: {100 * d['diff']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
            lines.append("")
    lines += [
        "Mean: over seeds of each seed's success on all items. Spread: min–max and sample std "
        "(ddof 1) of the per-seed rates. 95% CI: two-way percentile bootstrap (2000 replicates, "
        "items and seeds resampled with replacement, numpy seed 0). Δ: paired by item, each arm's "
        "seeds resampled on their own. Train s: the arm's training-step seconds (sum of `time/step`; "
        f"sft-equal's budget is the {' / '.join(budget)} run of the same seed, and it stops "
        "at the step boundary nearest to it).",
    ]
    return "\n".join(lines)


def write_report(out: Path, args: Any, order: list[str] | None = None) -> dict[str, Any]:
    """Tables and curves of everything finished under `out` and archived under `--results NAME`
    (see the module docstring); with NAME, the archive is rewritten with all of it. `order`: the
    arms' table order (the protocol's `ARMS`); others after them."""
    name = getattr(args, "results", None)
    archived_commands, archive = load_archive(name)
    try:
        found = load_results(out, order, archive)
    except ValueError as exc:
        raise SystemExit(f"{exc}{f' (the archive {archive_path(name)} and {out})' if name else ''}") from None
    if not found:
        raise SystemExit(f"protocol: no results under {out}")
    summary = summarize(found)
    commands = out / "commands.txt"
    lines = [*archived_commands, *(commands.read_text().splitlines() if commands.exists() else [])]
    unique = list(dict.fromkeys(line for line in lines if line))
    command = "\n".join(unique) or "(commands not recorded)"
    text = markdown(summary, getattr(args, "title", "Learning protocol"), command, budget_arms(found))
    text += f"\n\nLoad average (1 min) at the end of each run: {_loads(found)} on {os.cpu_count()} cores.\n"
    (out / "protocol.md").write_text(text)
    (out / "protocol.json").write_text(json.dumps({"command": command, "arms": summary}, indent=1))
    plot_curves(found, out / "curves.png", title=getattr(args, "title", "Learning protocol"))
    if name:
        write_archive(name, unique, found)
        for suffix, src in (("md", "protocol.md"), ("json", "protocol.json"), ("png", "curves.png")):
            shutil.copyfile(out / src, RESULTS / f"{name}.{suffix}")
    print(text)
    return summary


def _loads(found: dict[str, list[dict[str, Any]]]) -> str:
    values = [r["load_avg"] for rs in found.values() for r in rs]
    return f"{min(values):.1f}–{max(values):.1f}"
