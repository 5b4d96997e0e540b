"""Turn a saved trajectory record into what the replay page shows, turn by turn.

A rollout's `messages` are `system, user(instruction + first observation), assistant,
user(observation), assistant, ...`; the observation after the last action is kept in
`meta.final_observation`. Turn `k` is "observation k -> response k (thought, action) ->
reward k", where `turn_rewards[k]` is the env reward of that action.

What the env showed besides text (`meta["views"]`: BabyAI's `grid`, a web page's `screenshot`)
comes with each turn as `view` (the page draws the grid, or loads the screenshot through the
app, which serves only files inside the viewer's root).

Token view: `token_ids`, `loss_mask` and `logprobs` as saved, with per-token text only
when a tokenizer file is cheaply at hand (a `tokenizer.json` in the run's checkpoints, in
the configured model folder or in horizonrl's converted default model). The viewer never
loads a model.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from horizonrl.agent.parsing import parse_react

_ACTION_START = re.compile(r"^\s*(?:\*\*)?action(?:\*\*)?\s*[:：]|<search>|<answer>|```", re.I | re.M)
_THOUGHT_PREFIX = re.compile(r"^\s*(?:\*\*)?thought(?:\*\*)?\s*[:：]\s*", re.I)


def _family(item_id: str) -> str:
    return item_id.rpartition("_")[0] if "_" in item_id else item_id


def _prompt(family: str) -> Any:
    """The family's prompt (for its instruction text and action style), or None if unknown."""
    from horizonrl.agent.prompts import get_prompt

    try:
        return get_prompt(family)
    except (KeyError, ImportError):
        return None


def _strategy_instruction(meta: Any) -> str:
    """The instruction the episode's agent strategy added to the first user message, if any."""
    from horizonrl.agent.strategies import STRATEGIES

    name = meta.get("strategy") if isinstance(meta, dict) else None
    strategy = STRATEGIES.get(str(name)) if name else None
    return strategy.instruction if strategy is not None else ""


def split_response(text: str, style: str = "react") -> dict[str, Any]:
    """`{"thought", "action", "parse_error"}` of one assistant message."""
    parsed = parse_react(text, style=style)  # the family's own parser: what the env was sent
    match = _ACTION_START.search(text)
    thought = text[: match.start()] if match else ("" if parsed.action else text)
    return {
        "thought": _THOUGHT_PREFIX.sub("", thought, count=1).strip(),
        "action": parsed.action,
        "parse_error": parsed.error,
    }


def turns_of(record: dict[str, Any]) -> dict[str, Any]:
    """Split a record's conversation into system / instruction / turns / final observation."""
    messages = [m for m in record.get("messages") or [] if isinstance(m, dict)]
    rewards = list(record.get("turn_rewards") or [])
    prompt = _prompt(_family(str(record.get("item_id") or "")))
    style = prompt.action_style if prompt is not None else "react"
    system = "\n\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    chat = [m for m in messages if m.get("role") != "system"]

    instruction = ""
    first = 0
    observation: str | None = None
    if chat and chat[0].get("role") == "user":
        observation = str(chat[0].get("content", ""))
        first = 1
        if prompt is not None and observation.startswith(prompt.instruction):
            instruction = prompt.instruction
            observation = observation[len(prompt.instruction) :].lstrip("\n")
            extra = _strategy_instruction(record.get("meta"))
            if extra and observation.startswith(extra):  # the strategy's own instruction
                instruction = f"{instruction}\n\n{extra}"
                observation = observation[len(extra) :].lstrip("\n")

    turns: list[dict[str, Any]] = []
    pending: list[str] = []  # user messages seen since the last assistant message
    for message in chat[first:]:
        content = str(message.get("content", ""))
        if message.get("role") != "assistant":
            pending.append(content)
            continue
        if turns:
            turns[-1]["observation_after"] = "\n\n".join(pending) or None
            observation = turns[-1]["observation_after"]
        pending = []
        k = len(turns)
        turns.append(
            {
                "turn": k,
                "observation": observation,
                "response": content,
                **split_response(content, style),
                "reward": float(rewards[k]) if k < len(rewards) and rewards[k] is not None else None,
                "observation_after": None,
            }
        )
    meta = record.get("meta") or {}
    final = meta.get("final_observation") if isinstance(meta, dict) else None
    if pending:
        final = "\n\n".join(pending) if final is None else final
    if turns and turns[-1]["observation_after"] is None:
        turns[-1]["observation_after"] = final
    if not turns and final is None:
        final = observation
    views = meta.get("views") if isinstance(meta, dict) else None
    for turn in turns:
        turn["view"] = view_at(views, turn["turn"])
    mark_strategy_turns(turns, meta if isinstance(meta, dict) else {})
    return {"system": system, "instruction": instruction, "first_observation": observation if not turns
            else turns[0]["observation"], "turns": turns, "final_observation": final,
            "final_view": view_at(views, len(turns))}  # fmt: skip


def mark_strategy_turns(turns: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    """Tag each turn with `kind` ("plan" for a plan turn, else "act"), the `plan` steps it wrote
    and its `reflection` (the agent strategy's log in `meta`, see `horizonrl.agent.strategies`)."""
    plan_turns = {int(k) for k in meta.get("plan_turns") or [] if isinstance(k, int)}
    plans = {int(p["turn"]): p.get("steps") for p in meta.get("plans") or [] if isinstance(p, dict)}
    notes = {int(r["turn"]): r.get("text") for r in meta.get("reflections") or [] if isinstance(r, dict)}
    for turn in turns:
        k = turn["turn"]
        turn["kind"] = "plan" if k in plan_turns else "act"
        turn["plan"] = plans.get(k)
        turn["reflection"] = notes.get(k)
        if turn["reflection"] is not None:  # the thought is what follows the reflection line
            turn["thought"] = re.sub(r"^\s*reflection\s*[:：].*\n?", "", turn["thought"], count=1, flags=re.I)
            turn["thought"] = _THOUGHT_PREFIX.sub("", turn["thought"], count=1).strip()
        if turn["kind"] == "plan":  # no env step: nothing was parsed as an action
            turn["action"], turn["parse_error"], turn["thought"] = None, None, ""


def view_at(views: Any, turns_played: int) -> dict[str, Any] | None:
    """The env's view data (`meta["views"]`, see `horizonrl.rollout.trajectory`) shown after
    `turns_played` turns: the latest one recorded at or before it, with its key."""
    if not isinstance(views, dict):
        return None
    keys = [int(k) for k in views if str(k).isdigit() and int(k) <= turns_played]
    if not keys:
        return None
    key = max(keys)
    view = views.get(str(key))
    return {**view, "key": key} if isinstance(view, dict) else None


def token_stats(record: dict[str, Any]) -> dict[str, Any]:
    """Counts that explain the loss mask without decoding anything."""
    ids = record.get("token_ids") or []
    mask = record.get("loss_mask") or []
    logprobs = [lp for lp, m in zip(record.get("logprobs") or [], mask, strict=False) if m and lp is not None]
    ends = record.get("turn_ends") or []
    per_turn: list[int] = []
    start = int(record.get("prompt_length") or 0)
    for end in ends:
        per_turn.append(int(sum(mask[start : end + 1])))
        start = end + 1
    return {
        "n_tokens": len(ids),
        "n_sampled": int(sum(mask)),
        "prompt_length": int(record.get("prompt_length") or 0),
        "sampled_per_turn": per_turn,
        "mean_logprob": sum(logprobs) / len(logprobs) if logprobs else None,
        "min_logprob": min(logprobs) if logprobs else None,
    }


def _model_path(run_path: Path) -> str | None:
    """`model.path` from the run's `config.yaml`, if there is one."""
    import yaml

    try:
        config = yaml.safe_load((run_path / "config.yaml").read_text())
        path = config["model"]["path"]
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return None
    return str(path) if path else None


def _step_of(tokenizer_file: Path) -> int:
    digits = tokenizer_file.parts[-3].rpartition("_")[2]  # checkpoints/step_N/model/tokenizer.json
    return int(digits) if digits.isdigit() else -1


def find_tokenizer_file(run_path: Path) -> Path | None:
    """A `tokenizer.json` for this run, if one is on disk already (newest checkpoint first)."""
    candidates = sorted((run_path / "checkpoints").glob("step_*/model/tokenizer.json"), key=_step_of)[::-1]
    model_path = _model_path(run_path)
    if model_path:
        from horizonrl.models import DEFAULT_MODEL_ALIASES, TINY_MODEL_ALIASES, cache_dir

        if model_path in DEFAULT_MODEL_ALIASES or model_path in TINY_MODEL_ALIASES:
            candidates.append(cache_dir() / "models" / "smollm2-135m-instruct" / "tokenizer.json")
        else:
            candidates.append(Path(model_path).expanduser() / "tokenizer.json")
    return next((p for p in candidates if p.is_file()), None)


class TokenDecoder:
    """Per-token text from a `tokenizer.json` (the `tokenizers` library: no model, no torch)."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self.path = path
        self.tokenizer = Tokenizer.from_file(str(path))

    def pieces(self, ids: list[int]) -> list[str]:
        return list(self.tokenizer.decode_batch([[i] for i in ids], skip_special_tokens=False))
