"""Lenient parsing of model output into one env action.

Failures are not exceptions: they come back as `ParsedAction(action=None, error=...)`,
and the rollout feeds `error` to the model as the next observation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ACTION_LINE = re.compile(r"^\s*(?:\*\*)?action(?:\*\*)?\s*[:：]\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_BACKTICKS = re.compile(r"```(?:[a-z]*\n)?(.*?)```", re.DOTALL)
_TAG = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_OPEN_TAG = re.compile(r"<(search|answer)>(.*)$", re.DOTALL | re.IGNORECASE)

MAX_ACTION_CHARS = 2000

REACT_HINT = "Answer in this format:\nThought: <your reasoning>\nAction: <one action>"
TAGS_HINT = "Answer with <search>query</search> to search, or <answer>text</answer> to answer."
BACKTICKS_HINT = "Answer in this format:\nThought: <your reasoning>\nAction: ```<one action>```"


@dataclass(frozen=True)
class ParsedAction:
    action: str | None
    """The action to send to the env, or None when the text had none."""
    error: str | None = None
    """Feedback for the model when `action` is None."""

    @property
    def ok(self) -> bool:
        return self.action is not None


def _clean(action: str) -> str:
    action = action.strip().strip("`").strip()
    if len(action) >= 2 and action[0] == action[-1] and action[0] in "\"'":
        action = action[1:-1].strip()
    if action.endswith(".") and not action.endswith(".."):
        action = action[:-1].rstrip()
    return action[:MAX_ACTION_CHARS]


def parse_react(text: str, style: str = "react") -> ParsedAction:
    """Extract the action from a `Thought: ... / Action: ...` response (see module docstring)."""
    if style == "tags":
        return _parse_tags(text)
    if style == "backticks":
        fenced = _BACKTICKS.findall(text)
        if fenced:
            action = _clean(fenced[-1])
            if action:
                return ParsedAction(action)
        return ParsedAction(None, f"No action in triple backticks found. {BACKTICKS_HINT}")
    matches = _ACTION_LINE.findall(text)
    if matches:
        action = _clean(matches[-1])
        if action:
            return ParsedAction(action)
        return ParsedAction(None, f"The 'Action:' line was empty. {REACT_HINT}")
    lines = [line for line in text.strip().splitlines() if line.strip()]
    # A bare one-line answer with no "Thought:" is taken as the action itself.
    if len(lines) == 1 and not lines[0].lower().lstrip().startswith("thought"):
        action = _clean(lines[0])
        if action:
            return ParsedAction(action)
    return ParsedAction(None, f"Your response had no 'Action:' line. {REACT_HINT}")


def _parse_tags(text: str) -> ParsedAction:
    matches = _TAG.findall(text)
    if matches:
        kind, body = matches[0]
        return ParsedAction(f"<{kind.lower()}>{body.strip()[:MAX_ACTION_CHARS]}</{kind.lower()}>")
    unclosed = _OPEN_TAG.search(text)
    if unclosed:  # generation stopped at the closing tag or ran out of tokens
        kind, body = unclosed.groups()
        if body.strip():
            return ParsedAction(f"<{kind.lower()}>{body.strip()[:MAX_ACTION_CHARS]}</{kind.lower()}>")
    return ParsedAction(None, f"No <search> or <answer> tag found. {TAGS_HINT}")
