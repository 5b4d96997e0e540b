"""Prompt for SciWorld: ScienceWorld's action grammar, ReAct format (`Thought:` / `Action:`)."""

from __future__ import annotations

from horizonrl.agent.prompts import FamilyPrompt

ACTIONS = (
    ("open OBJ / close OBJ", "open or close a container or door"),
    ("activate OBJ / deactivate OBJ", "switch a device on or off"),
    ("connect OBJ to OBJ", "connect electrical components"),
    ("disconnect OBJ", "disconnect an electrical component"),
    ("use OBJ [on OBJ]", "use a device or item (e.g. a thermometer on a substance)"),
    ("look around", "describe the current room"),
    ("look at OBJ", "describe an object in detail"),
    ("look in OBJ", "describe what a container holds"),
    ("read OBJ", "read a note or book"),
    ("move OBJ to OBJ", "move an object into a container"),
    ("pick up OBJ", "put an object in your inventory"),
    ("put down OBJ", "drop an object from your inventory"),
    ("pour OBJ in OBJ", "pour a liquid into a container"),
    ("dunk OBJ in OBJ", "dunk a container into a liquid"),
    ("mix OBJ", "chemically mix what a container holds"),
    ("go to LOC", "move to another room (its door must be open)"),
    ("eat OBJ", "eat a food"),
    ("flush OBJ", "flush a toilet"),
    ("focus on OBJ", "declare the object the task is about (a wrong focus fails the task)"),
    ("wait", "do nothing for 10 time steps"),
    ("wait1", "do nothing for 1 time step"),
    ("task", "repeat the task description"),
    ("inventory", "list what you carry"),
)

INSTRUCTION = (
    "You are an agent in ScienceWorld, a simulated house where you carry out elementary science "
    "tasks. Each turn you get an observation and answer with one action that brings you closer to "
    "finishing the task.\n"
    "Actions you can take (OBJ and LOC are objects and places named in the observations):\n"
    + "\n".join(f"- {form}: {what}" for form, what in ACTIONS)
    + "\nWhen the game says a request is ambiguous, answer with the number of the option you mean.\n"
    "Answer in this format:\nThought: <your reasoning>\nAction: <one action>"
)

PROMPT = FamilyPrompt(family="sciworld", instruction=INSTRUCTION)
