"""TextCraft prompt: craft the goal item by following the listed crafting commands."""

from __future__ import annotations

from horizonrl.agent.prompts import FamilyPrompt

INSTRUCTION = (
    "You are in a Minecraft crafting world. You are given a list of crafting commands and a goal item. "
    "Use the commands to craft the goal.\n"
    "\n"
    "Actions (one per turn):\n"
    "- get N item: take N of a raw material (an item that no command crafts), e.g. get 1 oak logs\n"
    "- craft N item using N ingredient, N ingredient: craft with exactly the counts of a command "
    "(or a whole multiple of them), e.g. craft 4 oak planks using 1 oak logs\n"
    "- inventory: list what you carry\n"
    "\n"
    'A generic ingredient such as "planks" in a command means any one kind of it: name the kind you '
    "have, e.g. craft 4 stick using 2 oak planks.\n"
    "\n"
    "Answer every turn in this format:\n"
    "Thought: <short reasoning>\n"
    "Action: <one action>\n"
    "\n"
    "Example:\n"
    "Thought: I need 4 oak planks, so first I get 1 oak logs.\n"
    "Action: get 1 oak logs"
)

PROMPT = FamilyPrompt(family="textcraft", instruction=INSTRUCTION)
