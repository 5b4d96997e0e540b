"""`TextCraftEnv`: one crafting episode over the shared, read-only `RecipeBook`.

Per episode the env holds only the goal, the inventory and two flags, so reset and step
cost microseconds and nothing grows across resets. See the package docstring for the
observation, action grammar and reward.
"""

from __future__ import annotations

import functools
import random
import re
from typing import Any

from horizonrl.envs.core import StepResult, UnknownItemError, make_info, parse_item_id
from horizonrl.envs.textcraft.expert import TextCraftExpert
from horizonrl.envs.textcraft.recipes import Recipe, RecipeBook, get_book, normalize

FAMILY = "textcraft"
MAX_DISTRACTORS = 10
MAX_GET = 1000
"""Largest count one `get` may fetch (keeps inventories sane)."""

VALID_FORMS = (
    "Valid actions: 'get N item' (e.g. get 1 oak logs), "
    "'craft N item using N ingredient, N ingredient' (e.g. craft 4 stick using 2 oak planks), "
    "'inventory'."
)

_GET = re.compile(r"^get\s+(\S+)\s+(.+)$")
_CRAFT = re.compile(r"^craft\s+(.+?)\s+using\s+(.+)$")
_COUNT = re.compile(r"^(\d+)\s+(.+)$")
_SPLIT = re.compile(r"\s*,\s*|\s+and\s+")


def goal_of(item_id: str) -> str:
    """The goal item of `textcraft_<i>`: the i-th goal sorted by (depth, name)."""
    family, index = parse_item_id(item_id)
    goals = get_book().goals
    if family != FAMILY or index >= len(goals):
        raise UnknownItemError(
            f"unknown TextCraft item {item_id!r}: ids are {FAMILY}_0..{FAMILY}_{len(goals) - 1}"
        )
    return goals[index]


@functools.lru_cache(maxsize=65536)
def resolve_name(text: str) -> str | None:
    """Map what the agent wrote to an item or generic name of the book, leniently.

    Case, extra spaces, underscores, brackets and a `minecraft:` prefix are ignored; an
    exact name wins, else a plural is tried as singular ("sticks" -> "stick",
    "torches" -> "torch") and a singular as plural ("oak log" is its own item, so it
    stays; "coal" likewise). Returns None for an unknown name.
    """
    book = get_book()
    name = normalize(text)
    if name in book.names:
        return name
    for candidate in (name[:-1] if name.endswith("s") else "", name[:-2] if name.endswith("es") else ""):
        if candidate in book.names:
            return candidate
    return name + "s" if name + "s" in book.names else None


@functools.lru_cache(maxsize=4096)
def subgoals(goal: str) -> tuple[frozenset[str], int]:
    """`goal`'s sub-goals for `info["progress"]`: every item on its crafting tree (any alternative
    recipe or kind, the goal itself excluded), and N, the distinct items the shortest solution
    obtains before the final craft (the expert's plan on the tree's commands, less that craft)."""
    tree = get_book().tree(goal)
    items = {r.output for r in tree} | {name for r in tree for ing in r.inputs for name in ing.accepts}
    expert = TextCraftExpert()
    commands = "\n".join(r.command for r in tree)
    expert.reset("", f"Crafting commands:\n{commands}\n\nGoal: craft {goal}.", {})
    return frozenset(items - {goal}), max(1, len(expert.plan) - 1)


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


class TextCraftEnv:
    """Craft the goal item from raw materials; see the package docstring."""

    def __init__(self, max_distractors: int = MAX_DISTRACTORS) -> None:
        self.book: RecipeBook = get_book()
        self.max_distractors = max_distractors
        self.item_id: str | None = None
        self.goal = ""
        self.category = ""
        self.inventory: dict[str, int] = {}
        self.commands: list[str] = []
        self.success = False
        self.reached: set[str] = set()
        """Tree items obtained at least once this episode (progress counts each once)."""

    # ----------------------------------------------------------------- episode
    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        goal = goal_of(item_id)  # raises UnknownItemError
        seed = 0 if seed is None else int(seed)
        rng = random.Random(f"textcraft:{item_id}:{seed}")  # str seeds are hashed with sha512
        tree = [r.command for r in self.book.tree(goal)]
        pool = self.book.distractors(goal)
        commands = tree + rng.sample(pool, min(len(pool), self.max_distractors))
        rng.shuffle(commands)
        self.item_id, self.goal, self.commands = item_id, goal, commands
        self.category = f"depth {self.book.depth[goal]}"
        self.inventory = {}
        self.success = False
        self.reached = set()
        observation = "Crafting commands:\n{}\n\nGoal: craft {}.".format("\n".join(commands), goal)
        return observation, self._info()

    def step(self, action: str) -> StepResult:
        if self.item_id is None:
            raise RuntimeError("call reset() before step()")
        if self.success:
            return StepResult(
                f"The goal ({self.goal}) is already crafted; the episode is over.",
                0.0,
                True,
                False,
                self._info(),
            )
        before = dict(self.inventory)
        observation = self._act(str(action))
        solved = self.inventory.get(self.goal, 0) > 0
        self.success = solved
        # get and craft always change the inventory, so an unchanged one means the env refused
        rejected = self.inventory == before and not _is_inventory_query(str(action))
        info = self._info(invalid_action=rejected, progress=self._progress())
        return StepResult(observation, 1.0 if solved else 0.0, solved, False, info)

    def available_actions(self) -> list[str] | None:
        """None: actions are free-form commands with counts (see `VALID_FORMS`)."""
        return None

    def close(self) -> None:
        self.inventory = {}

    def _info(self, **extra: Any) -> dict[str, Any]:
        return make_info(
            self.success,
            1.0 if self.success else 0.0,
            self.category,
            goal=self.goal,
            state_key=";".join(f"{name}:{n}" for name, n in sorted(self.inventory.items())),
            **extra,
        )

    def _progress(self) -> float:
        """The share of the goal's sub-goals (`subgoals`) first obtained by the last action."""
        items, units = subgoals(self.goal)
        new = {name for name in self.inventory if name in items and name not in self.reached}
        self.reached |= new
        return min(len(new) / units, max(0.0, 1.0 - (len(self.reached) - len(new)) / units))

    # ----------------------------------------------------------------- actions
    def _act(self, action: str) -> str:
        text = " ".join(action.strip().lower().split()).rstrip(".")
        if _is_inventory_query(action):
            return self._show_inventory()
        if match := _GET.match(text):
            return self._get(match.group(1), match.group(2))
        if match := _CRAFT.match(text):
            return self._craft(match.group(1), match.group(2))
        if text.startswith(("get", "craft")):
            return f"Could not parse {_short(action.strip())!r}. {VALID_FORMS}"
        if not text:
            return f"Empty action. {VALID_FORMS}"
        return f"Unknown action {_short(action.strip())!r}. {VALID_FORMS}"

    def _show_inventory(self) -> str:
        if not self.inventory:
            return "Inventory: You are not carrying anything."
        return "Inventory: " + " ".join(f"[{name}] ({n})" for name, n in self.inventory.items())

    def _get(self, count_text: str, item_text: str) -> str:
        if not count_text.isdigit():
            example = resolve_name(f"{count_text} {item_text}") or "oak logs"
            return f"'get' needs a count before the item, e.g. 'get 1 {example}'."
        if not 1 <= int(count_text) <= MAX_GET:
            return f"Could not get {_short(item_text)!r}: the count must be a number from 1 to {MAX_GET}."
        name = resolve_name(item_text)
        if name is None:
            return f"Could not find {_short(item_text)!r}: no such item."
        if name in self.book.generics:
            kinds = ", ".join(sorted(self.book.generics[name])[:3])
            return f"Could not get {name}: it is a generic name; craft a specific kind (e.g. {kinds})."
        if self.book.is_craftable(name):
            return f"Could not get {name}: it is not a raw material; craft it with a crafting command."
        n = int(count_text)
        self.inventory[name] = self.inventory.get(name, 0) + n
        return f"Got {n} {name}"

    def _craft(self, target_text: str, inputs_text: str) -> str:
        count_match = _COUNT.match(target_text)
        wanted = int(count_match.group(1)) if count_match else None
        target = resolve_name(count_match.group(2) if count_match else target_text)
        if target is None:
            return f"Could not find {_short(target_text)!r}: no such item."
        if target in self.book.generics:
            kinds = ", ".join(sorted(self.book.generics[target])[:3])
            return f"Could not craft {target}: it is a generic name; craft a specific kind (e.g. {kinds})."
        recipes = self.book.recipes.get(target)
        if not recipes:
            return f"Could not craft {target}: it has no recipe; get it with 'get N {target}'."
        provided: list[tuple[str, int]] = []
        for part in _SPLIT.split(inputs_text.strip()):
            m = _COUNT.match(part)
            if not m:
                return f"Wrong ingredient format: {_short(part)!r}; write each ingredient as 'N item'."
            name = resolve_name(m.group(2))
            if name is None:
                return f"Could not find {_short(m.group(2))!r}: no such item."
            if name in self.book.generics:
                return self._explain_generic(name, m.group(1))
            provided.append((name, int(m.group(1))))

        times, recipe = next(((k, r) for r in recipes if (k := _applications(r, provided))), (0, None))
        if recipe is None:
            return self._explain_mismatch(target, recipes, provided)
        made = times * recipe.count
        if wanted is not None and not (wanted >= 1 and -(-wanted // recipe.count) == times):
            need = max(1, -(-max(wanted, 1) // recipe.count))
            return (
                f"Could not craft {wanted} {target}: these ingredients make {made} {target}. "
                f"One '{recipe.command}' makes {recipe.count}; {wanted} needs {need} times the ingredients."
            )
        missing = [(n, c, self.inventory.get(n, 0)) for n, c in provided if self.inventory.get(n, 0) < c]
        if missing:
            lacks = ", ".join(f"{c} {n} (you have {h})" for n, c, h in missing)
            return f"Could not find enough items to craft {target}: need {lacks}."
        for name, n in provided:
            left = self.inventory[name] - n
            if left:
                self.inventory[name] = left
            else:
                del self.inventory[name]
        self.inventory[target] = self.inventory.get(target, 0) + made
        return f"Crafted {made} {target}"

    def _explain_generic(self, name: str, count: str) -> str:
        kinds = sorted(self.book.generics[name])
        carried = [k for k in kinds if k in self.inventory]
        example = (carried or kinds)[0]
        return (
            f"{name} is a generic ingredient: name the specific kind you use "
            f"(any of {', '.join(kinds)}), as in '{count} {example}'."
        )

    def _explain_mismatch(
        self, target: str, recipes: tuple[Recipe, ...], provided: list[tuple[str, int]]
    ) -> str:
        listed = "; ".join(r.command for r in recipes[:3])
        used = ", ".join(f"{c} {n}" for n, c in provided)
        if any(_same_ingredients(r, provided) for r in recipes):
            return (
                f"Wrong ingredient counts for {target}: {used}. Each ingredient must be the recipe's "
                f"count times the same whole number. Recipes: {listed}."
            )
        return f"No recipe makes {target} from {used}. Recipes for {target}: {listed}."


def _is_inventory_query(action: str) -> bool:
    return " ".join(action.strip().lower().split()).rstrip(".") in ("inventory", "check inventory", "inv")


def _pairing(recipe: Recipe, provided: list[tuple[str, int]]) -> list[tuple[int, int]] | None:
    """Pair each recipe slot with one provided ingredient it accepts: [(slot count, given count)]."""
    if len(provided) != len(recipe.inputs):
        return None
    remaining = list(provided)
    pairs = []
    for slot in recipe.inputs:
        found = next((p for p in remaining if p[0] in slot.accepts), None)
        if found is None:
            return None
        remaining.remove(found)
        pairs.append((slot.count, found[1]))
    return pairs


def _same_ingredients(recipe: Recipe, provided: list[tuple[str, int]]) -> bool:
    return _pairing(recipe, provided) is not None


def _applications(recipe: Recipe, provided: list[tuple[str, int]]) -> int:
    """How many times `provided` applies `recipe` (the same multiple for every slot), else 0."""
    pairs = _pairing(recipe, provided)
    if not pairs:
        return 0
    times = {given // need if given % need == 0 else 0 for need, given in pairs}
    return times.pop() if len(times) == 1 else 0
