"""Per-family prompts: the system prompt, the instruction, how a response is written and parsed.

Every family has one module here defining `PROMPT: FamilyPrompt`. The expert solvers
write their demonstrations with `format_response`, and the agent parses model output
with `parse_action`, so demonstrations and rollouts share one text format.

Conversation layout (DESIGN.md §5):

    system:    PROMPT.system
    user:      PROMPT.instruction + "\\n\\n" + first observation
    assistant: "Thought: ...\\nAction: ..."
    user:      next observation (or the parse error, when the response had no action)
    ...
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from horizonrl.agent.parsing import ParsedAction, parse_react

PROMPT_MODULES: dict[str, str] = {
    "textcraft": "horizonrl.agent.prompts.textcraft",
    "babyai": "horizonrl.agent.prompts.babyai",
    "sciworld": "horizonrl.agent.prompts.sciworld",
    "search": "horizonrl.agent.prompts.search",
    "web": "horizonrl.agent.prompts.web",
}

DEFAULT_SYSTEM = (
    "You are an agent that solves tasks in a text environment by acting step by step. "
    "Each turn, think briefly, then give exactly one action."
)


@dataclass(frozen=True)
class FamilyPrompt:
    family: str
    instruction: str
    """Task instructions shown before the first observation: goal, action grammar, format."""
    system: str = DEFAULT_SYSTEM
    action_style: str = "react"
    """`react`: "Action: <action>"; `tags`: the action is a <search>/<answer> tag;
    `backticks`: the action sits in triple backticks after "Action:"."""

    def first_user_message(self, observation: str) -> str:
        return f"{self.instruction}\n\n{observation}"

    def initial_messages(self, observation: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.first_user_message(observation)},
        ]

    def format_response(self, thought: str, action: str) -> str:
        """The assistant message for `(thought, action)`; used by experts for demonstrations."""
        if self.action_style == "tags":
            return f"Thought: {thought}\n{action}"
        if self.action_style == "backticks":
            return f"Thought: {thought}\nAction: ```{action}```"
        return f"Thought: {thought}\nAction: {action}"

    def parse_action(self, text: str) -> ParsedAction:
        return parse_react(text, style=self.action_style)


_REGISTERED: dict[str, FamilyPrompt] = {}


def register_prompt(prompt: FamilyPrompt) -> None:
    """Register the prompt of a user-defined family (built-in ones load from PROMPT_MODULES)."""
    _REGISTERED[prompt.family] = prompt


def get_prompt(family: str) -> FamilyPrompt:
    if family in _REGISTERED:
        return _REGISTERED[family]
    if family not in PROMPT_MODULES:
        known = ", ".join([*PROMPT_MODULES, *_REGISTERED])
        raise KeyError(f"no prompt for family {family!r}; known: {known}")
    prompt: FamilyPrompt = importlib.import_module(PROMPT_MODULES[family]).PROMPT
    return prompt
