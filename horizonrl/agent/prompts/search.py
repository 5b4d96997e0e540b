"""Deep-search prompt: Search-R1's tag protocol with a short thought before each tag."""

from __future__ import annotations

from horizonrl.agent.prompts import FamilyPrompt

INSTRUCTION = (
    "Answer the question. You do not know the answer yet: find it by searching a knowledge base. "
    "Questions may need several searches, one fact at a time.\n"
    "\n"
    "Actions (one per turn):\n"
    "- <search>query</search>: search the knowledge base; the top results come back between "
    "<information> and </information>\n"
    "- <answer>answer</answer>: give the final answer, only the answer and no explanation\n"
    "\n"
    "Answer every turn in this format:\n"
    "Thought: <short reasoning>\n"
    "<search>query</search> or <answer>answer</answer>\n"
    "\n"
    "Example:\n"
    "Thought: I need to know where Ada Lovelace was born.\n"
    "<search>Ada Lovelace</search>"
)

PROMPT = FamilyPrompt(family="search", instruction=INSTRUCTION, action_style="tags")
