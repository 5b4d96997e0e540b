"""The trajectory record: what a rollout, an expert or an eval writes, one JSON line each.

Token fields are filled by model rollouts (token-exact: the ids the model sampled, never
re-encoded) and are empty for expert demonstrations, whose `messages` are tokenized by
the same chat builder at SFT time.

    {"item_id": "textcraft_3", "category": "depth 1", "success": true, "score": 1.0,
     "reward": 1.0, "num_turns": 3, "terminated": true, "truncated": false,
     "failed": false, "fail_reason": null, "messages": [{"role": ..., "content": ...}],
     "turn_rewards": [0.0, 0.0, 1.0], "token_ids": [...], "loss_mask": [...],
     "logprobs": [null, ..., -0.12, ...], ...}

`logprobs` is aligned with `token_ids` and is null exactly where `loss_mask` is 0.

Per-turn lists (`turn_rewards`, `turn_states`, `turn_invalid`, `turn_progress`) have one entry
per assistant turn, also for a turn without an env step (reward 0, not invalid, no progress,
the state it was sampled in); the engine appends them together with `record_turn`. The start
state of turn k is the `state_key` of the env info before it (reset info, then each step's).

What an env shows besides text (`VIEW_KEYS` of its `info`: BabyAI's `grid`, a web page's
`screenshot` path) is kept in `meta["views"]`, keyed by the number of turns played when that
observation was shown (`"0"`: after reset), for the viewer's replay; absent for envs without.
In memory a `screenshot` is a base64 PNG (the web family with `env.kwargs.screenshots=true`);
`write_jsonl` saves each as a PNG file in `<name>.screenshots/` beside the JSONL file and
writes that file's path, relative to the JSONL's directory, in its place.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass
class Trajectory:
    item_id: str
    category: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The conversation as role/content messages (system, user, assistant, ...). An assistant
    message may carry `"weight": 0`: SFT does not train on it (a demo's deliberate mistake)."""
    success: bool = False
    score: float = 0.0
    """Final score in [0, 1] as reported by the env's `info`."""
    reward: float = 0.0
    """Sum of env rewards over the episode."""
    num_turns: int = 0
    """Number of assistant turns: env steps, plus model responses without a parsable action
    (answered with the parse error, env not stepped; counted as a turn, as in the reference)."""
    terminated: bool = False
    truncated: bool = False
    failed: bool = False
    """The env or the transport broke (not the agent); left out of updates by default."""
    fail_reason: str | None = None
    turn_rewards: list[float] = field(default_factory=list)
    """Env reward of each turn, in order (len == num_turns)."""
    turn_states: list[str | None] = field(default_factory=list)
    """Start state of each turn: the env's `info["state_key"]` of the observation it answered
    (None where the family reports none). Step groups of `gigpo` compare turns with equal keys."""
    turn_invalid: list[bool] = field(default_factory=list)
    """Per turn: the response had no parsable action, or the env rejected the action
    (`info["invalid_action"]`); `algorithm.invalid_action_penalty` reads it."""
    turn_progress: list[float] = field(default_factory=list)
    """Per turn: the sub-goal progress the env reported for it (`info["progress"]`, >= 0; an
    episode's progress sums to at most 1); `algorithm.reward: shaped` reads it."""
    token_ids: list[int] = field(default_factory=list)
    """Whole conversation as token ids (prompt + every turn), exactly as the model saw them."""
    loss_mask: list[int] = field(default_factory=list)
    """1 on tokens the model sampled, 0 on prompt/observation/template tokens."""
    logprobs: list[float | None] = field(default_factory=list)
    """Sampling logprob of each token where `loss_mask` is 1, else None."""
    prompt_length: int = 0
    """Number of leading tokens that form the initial prompt (system + first user turn)."""
    turn_ends: list[int] = field(default_factory=list)
    """Index of the last sampled token of each assistant turn (where per-turn rewards sit)."""
    max_turns: int | None = None
    seed: int | None = None
    group_id: int = 0
    """Samples of the same item in one batch share a group id (GRPO / RLOO)."""
    sample_index: int = 0
    policy_version: int | None = None
    """Training steps whose update the sampling weights include (the learner's step when they were
    copied); a trainer rollout of step s has `s - policy_version` <= `rollout.max_staleness`."""
    meta: dict[str, Any] = field(default_factory=dict)
    segments: list[dict[str, Any]] = field(default_factory=list)
    """Bounded context only (`agent.context`): the later context windows of the episode, each
    `{token_ids, loss_mask, logprobs, prompt_length, turn_ends}` as the model saw it; the token
    fields above are the first window. Empty (and not written) when nothing was dropped."""

    def __post_init__(self) -> None:
        for name in PER_TURN:
            values = getattr(self, name)
            if values and len(values) != len(self.turn_rewards):
                raise ValueError(
                    f"{name} has {len(values)} entries for {len(self.turn_rewards)} turns: every turn has "
                    "one entry in each per-turn list (see record_turn)"
                )
        if self.token_ids:
            n = len(self.token_ids)
            if len(self.loss_mask) != n or len(self.logprobs) != n:
                raise ValueError(
                    f"token_ids ({n}), loss_mask ({len(self.loss_mask)}) and logprobs "
                    f"({len(self.logprobs)}) must have the same length"
                )

    @property
    def response_length(self) -> int:
        """Tokens after the initial prompt (sampled and observation tokens)."""
        return len(self.token_ids) - self.prompt_length

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        if not record["segments"]:
            del record["segments"]  # records without bounded context stay as they were
        return record

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        meta = dict(data.get("meta") or {})
        meta.update({k: data[k] for k in unknown})
        return cls(**{k: v for k, v in data.items() if k in known and k != "meta"}, meta=meta)


def mask_spans(mask: list[int]) -> list[list[int]]:
    """The runs of 1s in a loss mask as `[start, end)` positions: one per sampled reply (its
    end-of-turn token included)."""
    spans: list[list[int]] = []
    for pos, m in enumerate(mask):
        if not m:
            continue
        if spans and spans[-1][1] == pos:
            spans[-1][1] = pos + 1
        else:
            spans.append([pos, pos + 1])
    return spans


PER_TURN = ("turn_states", "turn_invalid", "turn_progress")
"""The per-turn lists besides `turn_rewards`: empty (not recorded, e.g. an expert's demo) or one
entry per turn, appended together by `record_turn`."""


def record_state(traj: Trajectory, info: dict[str, Any]) -> None:
    """Note the env state the next turn starts from (`info["state_key"]`; None if absent) in
    `meta["state_key"]`; after the episode it holds the final state."""
    key = info.get("state_key")
    traj.meta["state_key"] = None if key is None else str(key)


def record_turn(
    traj: Trajectory, reward: float, info: dict[str, Any] | None = None, *, invalid: bool = False
) -> None:
    """Append one assistant turn's per-turn entries: `reward`, its start state (the state noted
    last), whether it was invalid (`invalid`, or the env's `info["invalid_action"]`) and its
    progress (`info["progress"]`). `info` is the env's answer to the turn, None when the env was
    not stepped (no parsable action, a turn without an env step, an env failure): then the
    state stays as it was and there is no progress."""
    traj.turn_rewards.append(float(reward))
    traj.turn_states.append(traj.meta.get("state_key"))
    traj.turn_invalid.append(bool(invalid or (info is not None and info.get("invalid_action", False))))
    traj.turn_progress.append(max(0.0, float(info.get("progress", 0.0))) if info is not None else 0.0)
    if info is not None:
        record_state(traj, info)


VIEW_KEYS = ("grid", "screenshot")
"""`info` keys that describe what the agent saw, copied into `meta["views"]` (see above)."""


PER_TURN_SKIP = frozenset({"messages", "token_ids", "loss_mask", "logprobs", "turn_ends", "segments"})


def training_rows(traj: Trajectory) -> list[Trajectory]:
    """The rows one episode trains as: itself, or with bounded context one per context window.

    Row `w` has window `w`'s token fields and turn ends, the slice of every per-turn list
    (`turn_rewards` and any other list field with one entry per turn) for its turns, and the
    episode's group and sample index. The outcome (`success`, `score`, `reward`, `terminated`,
    `truncated`) sits on the last row only, so it lands on the episode's last sampled token and
    the rows' rewards add up to the episode's; `failed` is on every row."""
    if not traj.segments:
        return [traj]
    windows = [
        {
            "token_ids": traj.token_ids,
            "loss_mask": traj.loss_mask,
            "logprobs": traj.logprobs,
            "prompt_length": traj.prompt_length,
            "turn_ends": traj.turn_ends,
        },
        *traj.segments,
    ]
    per_turn = [
        f.name
        for f in fields(Trajectory)
        if f.name not in PER_TURN_SKIP
        and isinstance(getattr(traj, f.name), list)
        and len(getattr(traj, f.name)) == traj.num_turns
    ]
    rows, first = [], 0
    for w, window in enumerate(windows):
        last = w == len(windows) - 1
        n = len(window["turn_ends"])
        row = Trajectory(
            item_id=traj.item_id,
            category=traj.category,
            success=traj.success and last,
            score=traj.score if last else 0.0,
            reward=traj.reward if last else 0.0,
            num_turns=n,
            terminated=traj.terminated and last,
            truncated=traj.truncated and last,
            failed=traj.failed,
            fail_reason=traj.fail_reason,
            token_ids=list(window["token_ids"]),
            loss_mask=list(window["loss_mask"]),
            logprobs=list(window["logprobs"]),
            prompt_length=int(window["prompt_length"]),
            turn_ends=list(window["turn_ends"]),
            max_turns=traj.max_turns,
            seed=traj.seed,
            group_id=traj.group_id,
            sample_index=traj.sample_index,
            meta={"window": w, "windows": len(windows)},
        )
        for name in per_turn:
            setattr(row, name, list(getattr(traj, name)[first : first + n]))
        rows.append(row)
        first += n
    return rows


def context_tokens(traj: Trajectory) -> list[int]:
    """Tokens of the context each turn was sampled from (`meta["context_tokens"]` when the
    rollout recorded them, else read off the token fields: where each turn's sampled run begins)."""
    recorded = traj.meta.get("context_tokens")
    if isinstance(recorded, list):
        return [int(x) for x in recorded]
    out = []
    for end in traj.turn_ends:
        start = end
        while start > 0 and traj.loss_mask[start - 1] == 1:
            start -= 1
        out.append(start)
    return out


def record_view(traj: Trajectory, info: dict[str, Any]) -> None:
    """Keep `info`'s view keys for the observation shown after `traj.num_turns` turns."""
    view = {key: info[key] for key in VIEW_KEYS if key in info}
    if view:
        traj.meta.setdefault("views", {})[str(traj.num_turns)] = view


def write_jsonl(path: str | Path, trajectories: Iterable[Trajectory], *, append: bool = False) -> int:
    """Write trajectories one JSON object per line; returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("a" if append else "w") as f:
        for traj in trajectories:
            record = traj.to_dict()
            views = record["meta"].get("views")
            if views:
                record["meta"]["views"] = {k: _saved_screenshot(path, v) for k, v in views.items()}
            f.write(json.dumps(record) + "\n")
            n += 1
    return n


_PNG_BASE64 = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()[:8]
"""How every base64 PNG begins (its 8-byte signature, encoded): tells one from a file path."""


def _saved_screenshot(jsonl: Path, view: dict[str, Any]) -> dict[str, Any]:
    """`view` with a base64 `screenshot` saved as a PNG beside `jsonl` and replaced by its relative path."""
    data = view.get("screenshot")
    if not isinstance(data, str) or not data.startswith(_PNG_BASE64):
        return view  # already a path (a re-written or planted record)
    png = base64.b64decode(data)
    folder = jsonl.parent / f"{jsonl.stem}.screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{hashlib.sha1(png).hexdigest()[:16]}.png"  # by content: a rewrite of the same file reuses it
    (folder / name).write_bytes(png)
    return {**view, "screenshot": f"{folder.name}/{name}"}


def iter_jsonl(path: str | Path) -> Iterator[Trajectory]:
    with Path(path).open() as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield Trajectory.from_dict(json.loads(line))
            except (json.JSONDecodeError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}:{lineno}: not a trajectory record: {exc}") from exc


def read_jsonl(path: str | Path) -> list[Trajectory]:
    return list(iter_jsonl(path))
