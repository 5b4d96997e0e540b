"""What the viewer shows about training itself: per-token update data and GRPO groups.

Token stats (`trajectories/token_stats/step_N.jsonl`, written by the trainer with
`logging.save_token_stats`; format in `horizonrl.trainer.token_stats`) hold one value per
sampled token; `expand_token_stats` spreads them back over the whole token sequence so the
token view can colour every token by any of them.

A group is every sample of one item in one step (same `group_id` and `item_id`): GRPO and
RLOO score each sample against the others. `group_detail` lays the samples side by side, turn
by turn, and finds the first turn where their actions differ.
"""

from __future__ import annotations

from typing import Any

from horizonrl.viewer.replay import turns_of

STAT_FIELDS = ("advantages", "old_logprobs", "ref_logprobs", "kl", "token_rewards", "values", "returns")
"""Per-token arrays a token-stats line may carry, in the order the token view offers them."""


def expand_token_stats(row: dict[str, Any], n_tokens: int) -> dict[str, list[float | None]]:
    """`{field: [value or None per token]}` of one token-stats line (fields of the wrong length left out)."""
    positions = [p for start, end in row.get("spans") or [] for p in range(int(start), int(end))]
    if any(p >= n_tokens for p in positions):
        return {}
    out: dict[str, list[float | None]] = {}
    for name in STAT_FIELDS:
        values = row.get(name)
        if not isinstance(values, list) or len(values) != len(positions):
            continue
        full: list[float | None] = [None] * n_tokens
        for p, v in zip(positions, values, strict=True):
            full[p] = v
        out[name] = full
    return out


def _mean(values: list[Any] | None) -> float | None:
    vals = [float(v) for v in values or [] if v is not None]
    return sum(vals) / len(vals) if vals else None


def groups_of(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The groups of one trajectory file, in file order, each keyed by its first record's index."""
    groups: dict[tuple[Any, str], list[dict[str, Any]]] = {}
    for s in summaries:
        groups.setdefault((s["group_id"], s["item_id"]), []).append(s)
    out = []
    for (group_id, item_id), members in groups.items():
        rewards = [float(m["reward"] or 0.0) for m in members]
        out.append(
            {
                "key": members[0]["index"],
                "group_id": group_id,
                "item_id": item_id,
                "category": members[0]["category"],
                "n": len(members),
                "n_success": sum(bool(m["success"]) for m in members),
                "rewards": rewards,
                "turns": [m["num_turns"] for m in members],
                "informative": len(members) > 1 and max(rewards) - min(rewards) > 1e-9,
                "indexes": [m["index"] for m in members],
            }
        )
    return out


def first_difference(actions: list[list[str | None]]) -> int | None:
    """First turn at which the samples' actions differ (or some samples have stopped), or None."""
    if len(actions) < 2:
        return None
    for k in range(max(len(a) for a in actions)):
        at_k = {a[k] if k < len(a) else "\0ended" for a in actions}
        if len(at_k) > 1:
            return k
    return None


def group_detail(
    records: list[tuple[int, dict[str, Any]]], stats: dict[int, dict[str, Any] | None]
) -> dict[str, Any]:
    """The samples of one group side by side: outcome, advantage (from saved token stats), turns."""
    samples: list[dict[str, Any]] = []
    for index, record in records:
        turns = turns_of(record)["turns"]
        row = stats.get(index)
        advantages = (row or {}).get("advantages")
        samples.append(
            {
                "index": index,
                "sample_index": record.get("sample_index"),
                "success": bool(record.get("success")),
                "score": record.get("score"),
                "reward": record.get("reward"),
                "num_turns": record.get("num_turns"),
                "stop_reason": (record.get("meta") or {}).get("stop_reason"),
                "in_update": row is not None,
                "advantage": _mean(advantages),
                "turns": [
                    {
                        "action": t["action"],
                        "parse_error": t["parse_error"],
                        "thought": t["thought"],
                        "reward": t["reward"],
                    }
                    for t in turns
                ],
            }
        )
    actions = [[t["action"] if t["action"] is not None else f"\0{t['parse_error']}" for t in s["turns"]]
               for s in samples]  # fmt: skip
    return {"samples": samples, "first_difference": first_difference(actions)}
