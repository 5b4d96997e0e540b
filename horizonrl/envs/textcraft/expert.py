"""The TextCraft expert: reads the goal and crafting commands from the first observation
and plays a short plan — one `get` per raw material, then one `craft` per intermediate
item, deepest first, each with its counts aggregated over the whole tree.

It works from the observation text (so it plays a remote env over HTTP as well as a local
one); from the recipe database it takes only which specific kinds a generic ingredient
such as "planks" accepts. Among alternative recipes and kinds it picks the one with the
fewest actions (ties: alphabetical), so its plans are deterministic and near-minimal.

`detour` gives the wrong moves `horizonrl solve --detours` plays before some of its moves, so
that demos show the env's rejection and a recovery that says what it taught.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Any

from horizonrl.envs.registry import Detour
from horizonrl.envs.textcraft.recipes import get_book

_GOAL = re.compile(r"^Goal: craft (.+?)\.?\s*$", re.MULTILINE)
_COMMAND = re.compile(r"^craft (\d+) (.+?) using (.+)$", re.MULTILINE)
_GET_ACTION = re.compile(r"^get (\d+) (.+)$")
WORKED_MAX_CHARS = 100
"""The longest worked thought (`TextCraftExpert(worked=True)`): with its action, a reply SmolLM2's
tokenizer keeps within the quickstart's 48-token reply cap (all 619 on depth-1-2 goals, tested; 3
of 737 on all goals exceed it); longer ones, mostly depth 3-4 chains, keep the plain thought."""


@dataclass(frozen=True)
class _Shown:
    count: int
    inputs: tuple[tuple[str, int], ...]
    command: str


def _fmt(inputs: list[tuple[str, int]]) -> str:
    return ", ".join(f"{n} {name}" for name, n in inputs)


def _parse(inputs: str) -> list[tuple[str, int]]:
    """`"1 oak logs, 2 stick"` -> `[("oak logs", 1), ("stick", 2)]` (what `_fmt` writes)."""
    return [(name, int(n)) for n, name in (p.strip().split(" ", 1) for p in inputs.split(","))]


class TextCraftExpert:
    """Scripted player; `reset` plans from the first observation, `act` replays the plan.

    `worked`: each `get`'s thought works its count out along the recipes from the goal down ("1
    blue ice needs 9 packed ice; 9 packed ice need 9×9 = 81 ice.") instead of stating it ("I need
    81 ice"); a raw material that more than one craft uses, or a worked thought longer than
    `WORKED_MAX_CHARS`, keeps the plain thought."""

    def __init__(self, worked: bool = False) -> None:
        self.book = get_book()
        self.worked = worked
        self.plan: list[tuple[str, str]] = []

    def reset(self, item_id: str, observation: str, info: dict[str, Any]) -> None:
        goal_match = _GOAL.search(observation)
        if goal_match is None:
            self.plan = []
            return
        self.goal = goal_match.group(1).strip()
        self.shown: dict[str, list[_Shown]] = {}
        for count, output, inputs in _COMMAND.findall(observation):
            self.shown.setdefault(output, []).append(
                _Shown(int(count), tuple(_parse(inputs)), f"craft {count} {output} using {inputs}")
            )
        for recipes in self.shown.values():
            recipes.sort(key=lambda r: r.command)
        self._cost: dict[str, float] = {}
        self.plan = self._make_plan()

    def act(self, observation: str) -> tuple[str, str]:
        if not self.plan:
            return "I have no plan left; check what I am carrying.", "inventory"
        return self.plan.pop(0)

    # ------------------------------------------------------------------ planning
    def _kinds(self, name: str) -> list[str]:
        """The concrete items that can fill a slot named `name` (itself unless generic)."""
        kinds = self.book.group_kinds.get(name)  # the kinds the original TextCraft accepts too
        if kinds is None:
            return [name]
        usable = [k for k in kinds if k in self.shown] or [k for k in kinds if self.book.is_raw(k)]
        return sorted(usable) or [name]

    def _cost_of(self, name: str, visiting: frozenset[str] = frozenset()) -> float:
        """Actions to make a batch of `name` from nothing (shared sub-items counted again)."""
        if name in self._cost:
            return self._cost[name]
        if name in visiting:
            return math.inf
        visiting = visiting | {name}
        if name in self.book.generics:
            cost = min(self._cost_of(k, visiting) for k in self._kinds(name))
        elif name not in self.shown:
            cost = 1.0
        else:
            cost = min(1 + sum(self._cost_of(i, visiting) for i, _ in r.inputs) for r in self.shown[name])
        self._cost[name] = cost
        return cost

    def _recipe(self, name: str) -> _Shown:
        return min(self.shown[name], key=lambda r: (sum(self._cost_of(i) for i, _ in r.inputs), r.command))

    def _kind(self, name: str) -> str:
        return min(self._kinds(name), key=lambda k: (self._cost_of(k), k))

    def _make_plan(self) -> list[tuple[str, str]]:
        # Longest distance from the goal: every ingredient sits deeper than what it makes.
        level: dict[str, int] = {}
        uses: dict[str, list[tuple[str, int]]] = {}  # item -> concrete [(ingredient, count)]

        def visit(item: str, depth: int, path: frozenset[str]) -> None:
            if item in path or level.get(item, -1) >= depth:
                return
            level[item] = depth
            if item in self.shown:
                recipe = self._recipe(item)
                uses[item] = [(self._kind(i), n) for i, n in recipe.inputs]
                for ingredient, _ in uses[item]:
                    visit(ingredient, depth + 1, path | {item})

        visit(self.goal, 0, frozenset())
        demand = dict.fromkeys(level, 0)
        demand[self.goal] = 1
        times: dict[str, int] = {}
        for item in sorted(level, key=lambda i: (level[i], i)):
            if item in uses:
                times[item] = math.ceil(demand[item] / self._recipe(item).count)
                for ingredient, n in uses[item]:
                    demand[ingredient] += times[item] * n

        raws = sorted((i for i in level if i not in uses), key=lambda i: (-level[i], i))
        crafts = sorted(uses, key=lambda i: (-level[i], i))
        plan: list[tuple[str, str]] = []
        for k, raw in enumerate(raws):
            first = f"To craft {self.goal} I first gather raw materials. " if k == 0 else ""
            thought = f"{first}I need {demand[raw]} {raw}; get it."
            links = _links(raw, uses, demand, times) if self.worked else []
            if links and len(worked := "; ".join(links) + ".") <= WORKED_MAX_CHARS:
                thought = worked
            plan.append((thought, f"get {demand[raw]} {raw}"))
        for item in crafts:
            made = times[item] * self._recipe(item).count
            inputs = [(i, times[item] * n) for i, n in uses[item]]
            if item == self.goal:
                thought = f"I have everything for the goal; craft {item} using {_fmt(inputs)}."
            else:
                thought = f"I need {demand[item]} {item}; craft {made} using {_fmt(inputs)}."
            plan.append((thought, f"craft {made} {item} using {_fmt(inputs)}"))
        return plan


def _links(
    raw: str, uses: dict[str, list[tuple[str, int]]], demand: dict[str, int], times: dict[str, int]
) -> list[str]:
    """The counts from the goal down to `raw`, one link per recipe ("9 packed ice need 9×9 = 81
    ice"); [] unless each item on the way is used by exactly one craft."""
    links: list[str] = []
    item = raw
    while True:
        users = [(p, n) for p, inputs in uses.items() for i, n in inputs if i == item]
        if not users:
            return links
        if len(users) > 1:
            return []
        (parent, n), need = users[0], demand[users[0][0]]
        amount = f"{n} {item}" if times[parent] == 1 else f"{times[parent]}×{n} = {times[parent] * n} {item}"
        links.insert(0, f"{need} {parent} {'needs' if need == 1 else 'need'} {amount}")
        item = parent


def detour(task: str, action: str, rng: random.Random) -> Detour | None:
    """A wrong move in place of the expert's `action`, of the kinds the SFT policy's first
    rejections are (`benchmarks/failure_modes.py`): crafting a raw material instead of getting it;
    instead of a craft, getting the crafted item, giving every ingredient twice over (a wrong
    multiple), or — for an intermediate item — skipping it: crafting what `task`'s commands make
    from it straight from its own ingredients (the policy's most common first rejection, "No recipe
    makes ..."). The env rejects each one and changes nothing; None for any other action."""
    if get := _GET_ACTION.match(action):
        count, raw = get.groups()
        return Detour(
            f"I need {count} {raw}; craft it.",
            f"craft {count} {raw} using {count} {raw}",
            f"{raw} has no recipe; I get it.",
        )
    if craft := _COMMAND.match(action):
        count, item, inputs = craft.groups()
        parent = _made_from(task, item)
        if parent is not None and rng.random() < 0.5:
            made, name = parent
            return Detour(
                f"I have everything; craft {name} using {inputs}.",
                f"craft {made} {name} using {inputs}",
                f"{name} takes {item}; craft it first.",
            )
        if rng.random() < 0.5:
            lesson = f"{item} is not raw; I craft it."
            return Detour(f"I need {count} {item}; get it.", f"get {count} {item}", lesson)
        doubled = _fmt([(name, 2 * n) for name, n in _parse(inputs)])
        return Detour(
            f"I need {count} {item}; craft {count} using {doubled}.",
            f"craft {count} {item} using {doubled}",
            f"Too many; {count} {item} takes {inputs}.",
        )
    return None


def _made_from(task: str, item: str) -> tuple[str, str] | None:
    """The crafting command of `task` that makes a step of its goal's tree from `item` (or from a
    generic slot `item` fills), as (count, output); None when no such command is shown."""
    kinds = get_book().group_kinds
    commands = [(count, output, _parse(inputs)) for count, output, inputs in _COMMAND.findall(task)]
    goal = _GOAL.search(task)
    tree = {goal.group(1).strip()} if goal else set()
    grew = True
    while grew:  # the goal and everything a shown command makes it from
        fills = {i for _, output, inputs in commands if output in tree for i, _ in inputs}
        fills |= {k for name in fills for k in kinds.get(name, ())}
        grew, tree = not fills <= tree, tree | fills
    for count, output, inputs in commands:
        if output in tree and any(name == item or item in kinds.get(name, ()) for name, _ in inputs):
            return count, output
    return None
