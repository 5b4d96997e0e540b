"""Agent strategies: how an episode's turns are shaped around the family's ReAct format.

    strategy = get_strategy("plan")                      # react | plan | reflect, or a registered one
    state = strategy.start()                             # one per episode
    messages = strategy.initial_messages(prompt, first_observation)
    turn = state.read(content)                           # after each sampled turn
    turn.is_plan, turn.text                              # a plan turn (no env step), or the text to parse
    state.next_observation(observation, failed=...)      # what the model is shown next

- `react` (the default): today's agent, byte for byte: the family's prompt, every turn is
  Thought/Action, the observation is shown as the env wrote it.
- `plan`: the first user message asks for a numbered plan first. The first assistant turn is a
  *plan turn*: its `Plan:\\n1. ...` block is parsed (`parse_plan`), the env is not stepped, and
  the model is told to act (`PLAN_NOTED`). The plan stays in context like any turn. A later
  response that starts with a `Plan:` block revises the current plan; its action is parsed from
  the rest of the response.
- `reflect`: after a failed turn the next observation ends with `REFLECT_ASK`, which asks for a
  one-line `Reflection: ...` before Thought/Action. A turn failed when its response had no
  parsable action, when the env's info says `invalid_action`, or (families without that flag)
  when the observation is the same as the one before it (nothing changed).

Plans and reflections are sampled tokens like any other: trained on, token-exact. Budgets: every
assistant turn (a plan turn too) counts against the token budgets (`max_tokens` per turn,
`max_response_length`) and is one entry of `turn_ends` and `turn_rewards` (a plan turn: 0.0). A
plan turn does not count against `max_turns` (the cap bounds the turns that act; a plan is one
turn more); `Trajectory.num_turns` counts it. What an episode did is kept in its trajectory's
meta: `strategy`, `plan_turns` (indices of plan turns), `plans` (`{"turn", "steps"}` each time
the plan was written or revised) and `reflections` (`{"turn", "text"}`); none of these keys is
written under `react`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from horizonrl.agent.prompts import FamilyPrompt

_PLAN_HEAD = re.compile(r"^\s*(?:\*\*)?plan(?:\*\*)?\s*[:：]\s*(.*)$", re.IGNORECASE)
_STEP = re.compile(r"^\s*(\d+)\s*[.)]\s*(.+?)\s*$")
_REFLECTION = re.compile(r"^\s*(?:\*\*)?reflection(?:\*\*)?\s*[:：]\s*(.*)$", re.IGNORECASE)

PLAN_INSTRUCTION = (
    "Plan first: your first response is a numbered plan, not an action, in this format:\n"
    "Plan:\n"
    "1. <first step>\n"
    "2. <next step>\n"
    "Then act one step per turn. To change the plan later, start a response with a new Plan: block."
)
PLAN_NOTED = "Plan noted. Now act, one action per turn. {hint}"
PLAN_MISSING = "No numbered plan found (Plan: then 1. 2. ...). Act anyway, one action per turn. {hint}"
REFLECT_INSTRUCTION = (
    "When an action fails, you will be asked to reflect: then begin your response with one line\n"
    "Reflection: <what went wrong and what to do instead>\n"
    "before your usual answer."
)
REFLECT_ASK = "That did not work. Begin with one line 'Reflection: <what went wrong>', then answer as usual."


def parse_plan(text: str) -> tuple[list[str] | None, str]:
    """The numbered steps of a leading `Plan:` block and the text after it; `(None, text)` without one.

    The block is the `Plan:` line (steps may start on it) and the numbered lines right after it;
    the first line that is neither numbered nor blank ends it."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip()), None)
    if start is None or not (head := _PLAN_HEAD.match(lines[start])):
        return None, text
    steps: list[str] = []
    inline = head.group(1).strip()
    if inline:
        step = _STEP.match(inline)
        steps.append(step.group(2) if step else inline)
    end = start + 1
    while end < len(lines):
        step = _STEP.match(lines[end])
        if step:
            steps.append(step.group(2))
        elif lines[end].strip():
            break
        end += 1
    return (steps or None), "\n".join(lines[end:])


def parse_reflection(text: str) -> tuple[str | None, str]:
    """A leading `Reflection: ...` line and the text after it; `(None, text)` without one."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip()), None)
    if start is None or not (match := _REFLECTION.match(lines[start])):
        return None, text
    return match.group(1).strip(), "\n".join(lines[start + 1 :])


@dataclass(frozen=True)
class Turn:
    """What `StrategyState.read` made of one sampled response."""

    text: str
    """The text to parse the action from (the response, less a plan or reflection block)."""
    is_plan: bool = False
    """A plan turn: no env step; `feedback` is the next observation."""
    feedback: str = ""


@dataclass(frozen=True)
class Strategy:
    """One registered way to play an episode (see the module docstring); its fields say what it does."""

    name: str
    instruction: str = ""
    """Appended to the family's instruction in the first user message ("" keeps it as is)."""
    plan_first: bool = False
    """The first assistant turn is a plan turn, and later `Plan:` blocks revise the plan."""
    reflect: bool = False
    """After a failed turn, the observation asks for a `Reflection:` line."""

    def initial_messages(self, prompt: FamilyPrompt, observation: str) -> list[dict[str, str]]:
        messages = prompt.initial_messages(observation)
        if self.instruction:
            first = f"{prompt.instruction}\n\n{self.instruction}\n\n{observation}"
            messages[-1] = {"role": "user", "content": first}
        return messages

    def start(self, prompt: FamilyPrompt) -> StrategyState:
        return StrategyState(self, prompt)


@dataclass
class StrategyState:
    """One episode's strategy state: whether the plan turn is due, the current plan, the log."""

    strategy: Strategy
    prompt: FamilyPrompt
    turns: int = 0
    plan: list[str] | None = None
    plan_turns: list[int] = field(default_factory=list)
    plans: list[dict[str, Any]] = field(default_factory=list)
    reflections: list[dict[str, Any]] = field(default_factory=list)
    last_observation: str | None = None

    @property
    def free_turns(self) -> int:
        """Turns that do not count against `max_turns` (plan turns)."""
        return len(self.plan_turns)

    def read(self, content: str) -> Turn:
        """Interpret the sampled response of the next turn (turn index `self.turns`)."""
        s, turn = self.strategy, self.turns
        self.turns += 1
        text = content
        if s.plan_first:
            steps, rest = parse_plan(text)
            if turn == 0:
                self.plan_turns.append(turn)
                if steps:
                    self.plan = steps
                    self.plans.append({"turn": turn, "steps": steps})
                feedback = (PLAN_NOTED if steps else PLAN_MISSING).format(hint=self.prompt.format_hint)
                return Turn(text, is_plan=True, feedback=feedback)
            if steps:
                self.plan = steps
                self.plans.append({"turn": turn, "steps": steps})
                text = rest
        if s.reflect:
            reflection, rest = parse_reflection(text)
            if reflection is not None:
                self.reflections.append({"turn": turn, "text": reflection})
                text = rest
        return Turn(text)

    def next_observation(
        self, observation: str, *, failed: bool = False, info: dict[str, Any] | None = None
    ) -> str:
        """What the model is shown after a turn: `observation`, plus the reflection request after a
        failed turn under `reflect` (failed: no parsable action, `info["invalid_action"]`, or the
        observation unchanged when the family does not report that flag)."""
        previous, self.last_observation = self.last_observation, observation
        if not self.strategy.reflect:
            return observation
        if info is not None:
            if "invalid_action" in info:
                failed = failed or bool(info["invalid_action"])
            else:
                failed = failed or observation == previous
        return f"{observation}\n\n{REFLECT_ASK}" if failed else observation

    def meta(self) -> dict[str, Any]:
        """The trajectory meta of the episode (empty under a strategy that changes nothing)."""
        s = self.strategy
        if not (s.plan_first or s.reflect or s.instruction):
            return {}
        out: dict[str, Any] = {"strategy": s.name}
        if s.plan_first:
            out |= {"plan_turns": list(self.plan_turns), "plans": list(self.plans)}
        if s.reflect:
            out["reflections"] = list(self.reflections)
        return out


STRATEGIES: dict[str, Strategy] = {}


def register_strategy(strategy: Strategy) -> Strategy:
    """Make `strategy` selectable by name (`agent.strategy`)."""
    STRATEGIES[strategy.name] = strategy
    return strategy


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise KeyError(f"unknown agent strategy {name!r}; known: {sorted(STRATEGIES)}") from None


register_strategy(Strategy("react"))
register_strategy(Strategy("plan", instruction=PLAN_INSTRUCTION, plan_first=True))
register_strategy(Strategy("reflect", instruction=REFLECT_INSTRUCTION, reflect=True))
