"""Per-family prompts: the system prompt, the instruction, how a response is written and parsed.

Every built-in family has one module here defining `PROMPT: FamilyPrompt`; a user's family
brings its prompt in its `FamilySpec.prompt` (a `FamilyPrompt` or a dict of its fields), or gets
`default_prompt`: the env's first observation states the task, and the instruction only asks for
the ReAct format (`DEFAULT_INSTRUCTION`). The expert solvers
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

from horizonrl.agent.parsing import BACKTICKS_HINT, REACT_HINT, TAGS_HINT, ParsedAction, parse_react
from horizonrl.envs.registry import get_family

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


DEFAULT_INSTRUCTION = (
    "Solve the task described below by interacting with the environment, one action per turn.\n"
    "\n"
    "Answer every turn in this format:\n"
    "Thought: <short reasoning>\n"
    "Action: <one action>"
)
"""The instruction of a family without its own: the first observation says what the task is."""


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

    @property
    def format_hint(self) -> str:
        """One sentence on how a response is written (the parse errors' hint)."""
        return {"tags": TAGS_HINT, "backticks": BACKTICKS_HINT}.get(self.action_style, REACT_HINT)

    def parse_action(self, text: str) -> ParsedAction:
        return parse_react(text, style=self.action_style)


_REGISTERED: dict[str, FamilyPrompt] = {}


def register_prompt(prompt: FamilyPrompt) -> None:
    """Register the prompt of a user-defined family (built-in ones load from PROMPT_MODULES)."""
    _REGISTERED[prompt.family] = prompt


def default_prompt(family: str, **fields: str) -> FamilyPrompt:
    """The prompt of a family without its own: `DEFAULT_INSTRUCTION`, then the first observation."""
    return FamilyPrompt(family=family, **{"instruction": DEFAULT_INSTRUCTION, **fields})


def get_prompt(family: str) -> FamilyPrompt:
    """The prompt of `family`: registered, built-in, the spec's `prompt`, else `default_prompt`."""
    if family in _REGISTERED:
        return _REGISTERED[family]
    if family in PROMPT_MODULES:
        prompt: FamilyPrompt = importlib.import_module(PROMPT_MODULES[family]).PROMPT
        return prompt
    spec = get_family(family)  # KeyError naming the known families
    if isinstance(spec.prompt, FamilyPrompt):
        return spec.prompt
    if spec.prompt is None:
        return default_prompt(spec.name)
    if not isinstance(spec.prompt, dict):
        raise TypeError(
            f"family {spec.name!r}: prompt must be a FamilyPrompt or a dict, got {spec.prompt!r:.80}"
        )
    valid = {"instruction", "system", "action_style"}
    unknown = set(spec.prompt) - valid
    if unknown:
        raise ValueError(
            f"family {spec.name!r}: unknown prompt keys {sorted(unknown)}; valid: {sorted(valid)}"
        )
    return default_prompt(spec.name, **{k: str(v) for k, v in spec.prompt.items()})
