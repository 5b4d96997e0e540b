"""ScienceWorld's task table, the `sciworld_<i>` item mapping, categories and splits.

Everything here is plain data, so listing items, splits and categories never starts a
JVM. The table is ScienceWorld 1.2.3's own (`getTaskMaxVariations`, `getVariationsTrain`
/ `Dev` / `Test`, whose splits are contiguous ranges of variation indices);
`tests/envs/test_sciworld_env.py` checks it against the running simulator.

Item mapping (the reference's, so `sciworld_<i>` names the same episode in both): walk the
task table in ScienceWorld's order (task ids "1-1", "1-2", ...), skip the tasks in
`EXCLUDED_TASKS`, and list each task's variations 0..max-1; `sciworld_<i>` is entry `i`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from horizonrl.envs.core import UnknownItemError, parse_item_id

FAMILY = "sciworld"

EXCLUDED_TASKS = frozenset({"5-1", "5-2", "9-1", "9-2", "9-3", "10-1", "10-2"})
"""Left out by the reference (grow plant/fruit, inclined planes, Mendelian genetics)."""

CATEGORY_OF_TOPIC = {
    "1": "matter",
    "2": "measurement",
    "3": "electricity",
    "4": "classification",
    "6": "chemistry",
    "7": "life science",
    "8": "life science",
}
"""Six groups of the 23 kept tasks, by the leading number of the task id: ScienceWorld's
own topics, with its two kept Biology topics (7 lifespans, 8 life stages) as one group."""

CATEGORIES = ("matter", "measurement", "electricity", "classification", "chemistry", "life science")

TEST_SIZE = 200
"""Size of the `test` split, as in the reference's SciWorld test set."""


@dataclass(frozen=True)
class TaskInfo:
    task_id: str
    """ScienceWorld's id, e.g. "1-1"."""
    name: str
    """ScienceWorld's task name, what `load` takes, e.g. "boil"."""
    max_variations: int
    train_end: int
    """Variations [0, train_end) are ScienceWorld's train split."""
    dev_end: int
    """Variations [train_end, dev_end) are its dev split, [dev_end, max_variations) its test split."""

    @property
    def category(self) -> str | None:
        return None if self.task_id in EXCLUDED_TASKS else CATEGORY_OF_TOPIC[self.task_id.split("-")[0]]

    def split_of(self, variation: int) -> str:
        if variation < self.train_end:
            return "train"
        return "dev" if variation < self.dev_end else "test"


TASKS: tuple[TaskInfo, ...] = (
    TaskInfo("1-1", "boil", 30, 14, 21),
    TaskInfo("1-2", "melt", 30, 14, 21),
    TaskInfo("1-3", "freeze", 30, 14, 21),
    TaskInfo("1-4", "change-the-state-of-matter-of", 30, 14, 21),
    TaskInfo("2-1", "use-thermometer", 540, 270, 405),
    TaskInfo("2-2", "measure-melting-point-known-substance", 436, 218, 327),
    TaskInfo("2-3", "measure-melting-point-unknown-substance", 300, 150, 225),
    TaskInfo("3-1", "power-component", 20, 10, 15),
    TaskInfo("3-2", "power-component-renewable-vs-nonrenewable-energy", 20, 10, 15),
    TaskInfo("3-3", "test-conductivity", 900, 450, 675),
    TaskInfo("3-4", "test-conductivity-of-unknown-substances", 600, 300, 450),
    TaskInfo("4-1", "find-living-thing", 300, 150, 225),
    TaskInfo("4-2", "find-non-living-thing", 300, 150, 225),
    TaskInfo("4-3", "find-plant", 300, 150, 225),
    TaskInfo("4-4", "find-animal", 300, 150, 225),
    TaskInfo("5-1", "grow-plant", 126, 62, 93),
    TaskInfo("5-2", "grow-fruit", 126, 62, 93),
    TaskInfo("6-1", "chemistry-mix", 32, 16, 24),
    TaskInfo("6-2", "chemistry-mix-paint-secondary-color", 36, 18, 27),
    TaskInfo("6-3", "chemistry-mix-paint-tertiary-color", 36, 18, 27),
    TaskInfo("7-1", "lifespan-longest-lived", 125, 62, 93),
    TaskInfo("7-2", "lifespan-shortest-lived", 125, 62, 93),
    TaskInfo("7-3", "lifespan-longest-lived-then-shortest-lived", 125, 62, 93),
    TaskInfo("8-1", "identify-life-stages-1", 14, 6, 9),
    TaskInfo("8-2", "identify-life-stages-2", 10, 4, 6),
    TaskInfo("9-1", "inclined-plane-determine-angle", 168, 84, 126),
    TaskInfo("9-2", "inclined-plane-friction-named-surfaces", 1386, 692, 1038),
    TaskInfo("9-3", "inclined-plane-friction-unnamed-surfaces", 162, 80, 120),
    TaskInfo("10-1", "mendelian-genetics-known-plant", 120, 60, 90),
    TaskInfo("10-2", "mendelian-genetics-unknown-plant", 480, 240, 360),
)


@dataclass(frozen=True)
class Item:
    index: int
    task: TaskInfo
    variation: int

    @property
    def item_id(self) -> str:
        return f"{FAMILY}_{self.index}"

    @property
    def category(self) -> str:
        category = self.task.category
        assert category is not None  # excluded tasks have no items
        return category


@functools.cache
def all_items() -> tuple[Item, ...]:
    """Every item, in index order (4639 with ScienceWorld 1.2.3)."""
    pairs = [(t, v) for t in TASKS if t.task_id not in EXCLUDED_TASKS for v in range(t.max_variations)]
    return tuple(Item(i, t, v) for i, (t, v) in enumerate(pairs))


def item_of(item_id: str) -> Item:
    """The (task, variation) of `sciworld_<i>`; raise `UnknownItemError` for anything else."""
    family, index = parse_item_id(item_id)
    items = all_items()
    if family != FAMILY:
        raise UnknownItemError(f"item {item_id!r} does not belong to family {FAMILY!r}")
    if index >= len(items):
        raise UnknownItemError(f"unknown item {item_id!r}: sciworld items are sciworld_0..{len(items) - 1}")
    return items[index]


def category_of(item_id: str) -> str:
    return item_of(item_id).category


def _spread(total: int, capacities: list[int]) -> list[int]:
    """Share `total` as evenly as possible over bins of the given capacities (first bins first)."""
    quota = [0] * len(capacities)
    left = min(total, sum(capacities))
    while left:
        open_bins = [i for i, cap in enumerate(capacities) if quota[i] < cap]
        share = max(1, left // len(open_bins))
        for i in open_bins:
            take = min(share, capacities[i] - quota[i], left)
            quota[i] += take
            left -= take
            if not left:
                break
    return quota


def _evenly(start: int, stop: int, k: int) -> list[int]:
    """`k` variations spread evenly over [start, stop)."""
    n = stop - start
    return [start + (j * n) // k for j in range(k)]


def load_splits() -> dict[str, list[str]]:
    """`train` / `dev`: every item whose variation is in ScienceWorld's train / dev split.
    `test`: 200 items among ScienceWorld's test variations, spread evenly over the six
    categories, then over the tasks of each category, then over each task's test variations
    (no randomness: the same list on every machine). `test_all`: every test-variation item."""
    by_split: dict[str, list[Item]] = {"train": [], "dev": [], "test_all": []}
    for item in all_items():
        split = item.task.split_of(item.variation)
        by_split["test_all" if split == "test" else split].append(item)

    test: list[Item] = []
    tasks_of = {c: [t for t in TASKS if t.category == c] for c in CATEGORIES}
    capacity = {c: sum(t.max_variations - t.dev_end for t in tasks_of[c]) for c in CATEGORIES}
    per_category = _spread(TEST_SIZE, [capacity[c] for c in CATEGORIES])
    for category, quota in zip(CATEGORIES, per_category, strict=True):
        tasks = tasks_of[category]
        per_task = _spread(quota, [t.max_variations - t.dev_end for t in tasks])
        for task, k in zip(tasks, per_task, strict=True):
            wanted = set(_evenly(task.dev_end, task.max_variations, k))
            test += [i for i in by_split["test_all"] if i.task is task and i.variation in wanted]
    test.sort(key=lambda i: i.index)
    return {
        "train": [i.item_id for i in by_split["train"]],
        "test": [i.item_id for i in test],
        "dev": [i.item_id for i in by_split["dev"]],
        "test_all": [i.item_id for i in by_split["test_all"]],
    }
