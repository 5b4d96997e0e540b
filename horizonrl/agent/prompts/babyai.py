"""BabyAI prompt: carry out a mission in a grid world of rooms, objects and doors.

The agent answers `Thought: ...` / `Action: ...` (the shared ReAct parser); the env itself
accepts the action lines leniently ("pick up the red ball 1", "Go to red ball 1.").
"""

from __future__ import annotations

from horizonrl.agent.prompts import FamilyPrompt

INSTRUCTION = (
    "You are an agent in a grid world of rooms connected by doors, with balls, boxes and keys "
    "lying around. Carry out the goal written after 'Your goal:'. Each observation lists what "
    "you can see now, with positions counted in steps forward, to the left and to the right of "
    "you; walls and closed doors hide what is behind them. Objects are named "
    "'<colour> <type> <number>', e.g. 'red ball 1'.\n"
    "\n"
    "Actions (one per turn):\n"
    "- turn left / turn right / move forward\n"
    "- go to <object>: walk up to an object or door you have seen and face it, e.g. go to red ball 1\n"
    "- pickup <object>: walk to an object and pick it up (you can carry one thing), e.g. pickup blue key 1\n"
    "- drop: put down what you carry on the free cell in front of you\n"
    "- toggle: open, close or unlock (with the key of its colour) the door in front of you, "
    "or open the box in front of you\n"
    "- go through <door>: walk through an open door into the next room, e.g. go through grey door 1\n"
    "- toggle and go through <door>: open a closed door, then walk through it\n"
    "- check available actions\n"
    "\n"
    "Answer every turn in this format:\n"
    "Thought: <short reasoning>\n"
    "Action: <one action>\n"
    "\n"
    "Example:\n"
    "Thought: The goal is to pick up the red ball and I can see red ball 1, so I pick it up.\n"
    "Action: pickup red ball 1"
)

PROMPT = FamilyPrompt(family="babyai", instruction=INSTRUCTION)
