"""How often a TextCraft eval crafts the goal straight after its first `get` (the depth-1 shortcut).

    python benchmarks/textcraft_shortcut.py runs/protocol_dyn/sft runs/protocol_dyn/grpo-dynamic/seed_0

For each run folder's greedy eval (`eval/final/trajectories.jsonl`), per depth: items, successes,
and the episodes whose second reply's action is `craft ... <goal>` after a first reply that was a
`get` — right for a depth-1 goal made from one raw material, wrong for every depth-2 goal (an
intermediate has to be crafted first). The RL arms of the learning protocol turn this on for
depth-2 items (benchmarks/results/learning_protocol_sessions.md, session 12).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ACTION = re.compile(r"Action:\s*(.+)", re.IGNORECASE)


def action(reply: str) -> str:
    """The reply's action line (lower case), or '' when it has none."""
    found = ACTION.search(reply)
    return found.group(1).strip().lower() if found else ""


def goal_of(trajectory: dict) -> str:
    """The goal item named in the task's instruction (`Goal: ...` line of the first user turn)."""
    first = next(m["content"] for m in trajectory["messages"] if m["role"] == "user")
    for line in first.splitlines():
        if line.lower().startswith("goal:"):
            text = line.split(":", 1)[1].strip().lower()
            return re.sub(r"^(craft |get )?(\d+ )?", "", text).rstrip(".")
    raise ValueError(f"no 'Goal:' line in the first user turn of {trajectory['item_id']}")


def shortcut(trajectory: dict) -> bool:
    """A `get` first, then a `craft N <goal> using ...` second."""
    replies = [action(m["content"]) for m in trajectory["messages"] if m["role"] == "assistant"]
    if len(replies) < 2 or not replies[0].startswith("get "):
        return False
    second = re.match(r"craft \d+ (.+?) using ", replies[1])
    return bool(second) and second.group(1) == goal_of(trajectory)


def summary(run: Path) -> dict[str, dict[str, int]]:
    """`{category: {"items", "successes", "shortcuts"}}` of a run folder's final eval."""
    out: dict[str, dict[str, int]] = {}
    for line in (run / "eval" / "final" / "trajectories.jsonl").read_text().splitlines():
        t = json.loads(line)
        row = out.setdefault(t["category"], {"items": 0, "successes": 0, "shortcuts": 0})
        row["items"] += 1
        row["successes"] += bool(t["success"])
        row["shortcuts"] += shortcut(t)
    return dict(sorted(out.items()))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", type=Path, help="run folders with eval/final/trajectories.jsonl")
    args = p.parse_args(argv)
    print("| run | category | items | successes | goal crafted right after the first get |")
    print("|---|---|---|---|---|")
    for run in args.runs:
        for category, row in summary(run).items():
            print(f"| {run} | {category} | {row['items']} | {row['successes']} | {row['shortcuts']} |")


if __name__ == "__main__":
    main()
