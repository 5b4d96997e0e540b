"""How agents fail: per arm of a protocol run (or any eval), the failed episodes' invalid turns,
the ones stuck on a rejected action or with a reply without an action, the env's first rejections.

    python benchmarks/failure_modes.py runs/protocol_sft150_16_t1          # every arm of a protocol run
    python benchmarks/failure_modes.py runs/x/eval/final/trajectories.jsonl  # one eval

A path is a `trajectories.jsonl` or a folder searched for `eval/final/trajectories.jsonl` (an arm x
seed's final greedy eval); the seeds of one arm (`<arm>/seed_<s>/...`) are pooled into one row.
Per row: episodes, solved; the failed ones with an invalid turn (the env marked the action
invalid, `turn_invalid`), stuck (right after a rejection the agent sent the very same action
again: it ignored the env's feedback), with a reply the agent could not parse an action from
(`meta.parse_errors`: a format collapse shows here), cut at the turn cap (truncated); and the
env's first rejection in each failed episode, grouped by its first three words with digits as N (a
rough, family-agnostic taxonomy: read the episodes in `horizonrl view` for the detail). Turns are
split as the viewer splits them (`turns_of`: each action parsed in its family's style). Only files
are read, unless `--expert`: then the family's expert plays each item (a local env) and the row
says how many solved and failed episodes opened with another move than the expert's (TextCraft:
the first `get`'s count is the whole plan's arithmetic).
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without install

from horizonrl.agent.prompts import get_prompt  # noqa: E402
from horizonrl.envs.core import TextEnv  # noqa: E402
from horizonrl.envs.registry import family_of, get_family  # noqa: E402
from horizonrl.eval.solve import play_expert  # noqa: E402
from horizonrl.viewer.replay import turns_of  # noqa: E402

FINAL_EVAL = Path("eval/final/trajectories.jsonl")
"""Where a run keeps its final greedy eval's episodes."""


def rejection_kind(observation: str) -> str:
    """The first three words of an observation, digits as N: `Could not craft`, `Wrong ingredient
    counts`."""
    return " ".join(re.sub(r"\d+", "N", observation).split()[:3])


def failure_modes(
    episodes: Iterable[dict[str, Any]], expert_opening: Callable[[str], str | None] | None = None
) -> dict[str, Any]:
    """Counts over `episodes` (trajectory records); see the module docstring. `expert_opening(item_id)`:
    the expert's first action on the item (`--expert`)."""
    n = solved = invalid = stuck = unparsed = truncated = 0
    other_opening = Counter({True: 0, False: 0})  # by success: opened with another move than the expert's
    first_rejection: Counter[str] = Counter()
    for ep in episodes:
        n += 1
        turns = turns_of(ep)["turns"]  # the viewer's split: each action parsed in its family's style
        actions = [t["action"] for t in turns]
        if expert_opening is not None:
            other_opening[bool(ep["success"])] += not actions or actions[0] != expert_opening(ep["item_id"])
        if ep["success"]:
            solved += 1
            continue
        flags = list(ep.get("turn_invalid") or [])
        observations = [t["observation_after"] or "" for t in turns]
        truncated += bool(ep.get("truncated"))
        unparsed += bool((ep.get("meta") or {}).get("parse_errors"))
        rejected = [i for i, bad in enumerate(flags) if bad]
        if not rejected:
            continue
        invalid += 1
        stuck += any(
            i + 1 < len(actions) and actions[i] is not None and actions[i + 1] == actions[i] for i in rejected
        )
        if rejected[0] < len(observations):
            first_rejection[rejection_kind(observations[rejected[0]])] += 1
    failed = n - solved
    return {
        "episodes": n,
        "solved": solved,
        "failed": failed,
        "failed_invalid": invalid,
        "failed_stuck": stuck,
        "failed_unparsed": unparsed,
        "failed_truncated": truncated,
        "first_rejections": first_rejection.most_common(),
        **({"solved_other_opening": other_opening[True], "failed_other_opening": other_opening[False]}
           if expert_opening else {}),
    }  # fmt: skip


@functools.cache
def _env(family: str) -> TextEnv:
    return get_family(family).make_env()


@functools.cache  # an item's opening is the same in every arm and seed
def expert_opening(item_id: str) -> str | None:
    """The first action of the expert of `item_id`'s family on it (None: the family has no expert)."""
    spec = family_of(item_id)
    if spec.make_expert is None:
        return None
    demo = play_expert(_env(spec.name), spec, item_id, max_turns=1)
    first = next((m for m in demo.messages if m["role"] == "assistant"), None)
    return None if first is None else get_prompt(spec.name).parse_action(first["content"]).action


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Episodes by row label: a file is its own row (labelled by its path); under a folder, each final
    eval found, the seeds of an arm (`<arm>/seed_<s>/eval/final/...`) pooled under `<arm>`."""
    if path.is_file():
        return {str(path): _read(path)}
    found = sorted(path.rglob(str(FINAL_EVAL)))
    if not found:
        raise SystemExit(f"failure_modes: no {FINAL_EVAL} under {path}")
    rows: dict[str, list[dict[str, Any]]] = {}
    for f in found:
        run = f.parents[2]
        label = run.parent.name if run.name.startswith("seed_") else run.name
        rows.setdefault(label, []).extend(_read(f))
    return rows


def _share(k: int, n: int) -> str:
    return f"{k} ({100 * k / n:.0f}%)" if n else "0"


def markdown(rows: dict[str, dict[str, Any]], top: int = 4) -> str:
    opening = all("failed_other_opening" in m for m in rows.values())
    extra = " another opening than the expert's: solved / failed |" if opening else ""
    lines = [
        "| arm | episodes | solved | failed | failed with an invalid turn | stuck on a rejected action "
        f"| with a reply without an action | cut at the cap | first rejections (most common) |{extra}",
        "|---|---|---|---|---|---|---|---|---|" + ("---|" if opening else ""),
    ]
    for label, m in rows.items():
        kinds = ", ".join(f"{k} {c}" for k, c in m["first_rejections"][:top]) or "—"
        cell = ""
        if opening:
            solved, failed = m["solved_other_opening"], m["failed_other_opening"]
            cell = f" {_share(solved, m['solved'])} / {_share(failed, m['failed'])} |"
        lines.append(
            f"| {label} | {m['episodes']} | {_share(m['solved'], m['episodes'])} | {m['failed']} "
            f"| {_share(m['failed_invalid'], m['failed'])} | {_share(m['failed_stuck'], m['failed'])} "
            f"| {_share(m['failed_unparsed'], m['failed'])} | {_share(m['failed_truncated'], m['failed'])} "
            f"| {kinds} |{cell}"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="+", type=Path, help="trajectories.jsonl files or run / protocol folders")
    p.add_argument("--expert", action="store_true", help="count openings that differ from the expert's")
    args = p.parse_args(argv)
    opening = expert_opening if args.expert else None
    rows = {
        label if len(args.paths) == 1 or path.is_file() else f"{path.name}/{label}": failure_modes(
            eps, opening
        )
        for path in args.paths
        for label, eps in load(path).items()
    }
    print(markdown(rows), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
