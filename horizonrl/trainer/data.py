"""Training items: which item ids a run trains on, and in what order.

Items come from the families' splits (or Data-ID files), optionally filtered by category.
The order is a seeded permutation per epoch, and the sampler's only state is a cursor (items
handed out so far), so the batch at any step is a pure function of (items, seed, cursor):
a resumed run draws exactly the batches the uninterrupted run would have drawn.

- `data.val_fraction`: `validation_items` is a fixed slice of each family's training items
  (the first by a hash of the item id, so it depends on nothing but the ids), held out: the
  samplers never draw them; the periodic eval plays them (`horizonrl.trainer.run`).
- `data.curriculum`: `CurriculumSampler` keeps one seeded `ItemSampler` per stage and draws each
  group of a step from the stage its schedule (`horizonrl.trainer.schedule`, values 1..stages)
  gives; its state is the stages' cursors and the schedule's state, so a resume is exact too.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from horizonrl.config import DataConfig
from horizonrl.envs.core import parse_item_id
from horizonrl.envs.registry import family_of, get_family, read_item_file
from horizonrl.trainer.schedule import TurnSchedule, make_schedule


def _item_groups(families: list[str], split: str, files: list[str] | None) -> list[list[str]]:
    """The item ids of each family's `split` (one group per family), or of the Data-ID `files`."""
    if files:
        return [[i for f in files for i in read_item_file(f)]]
    return [get_family(name).split(split) for name in families]


def held_out(ids: list[str], fraction: float) -> list[str]:
    """The validation slice of `ids`: `round(fraction * len(ids))` of them (at least one when
    `fraction > 0`), the first by SHA-256 of the item id; in `ids`' order."""
    if fraction <= 0 or not ids:
        return []
    k = max(1, round(fraction * len(ids)))
    chosen = set(sorted(ids, key=lambda i: hashlib.sha256(i.encode()).hexdigest())[:k])
    return [i for i in ids if i in chosen]


def validation_items(cfg: DataConfig) -> list[str]:
    """The held-out validation items of `data.val_fraction` (per family), in split order."""
    groups = _item_groups(cfg.families, cfg.split, cfg.train_files)
    return [i for ids in groups for i in held_out(ids, cfg.val_fraction)]


def load_items(
    families: list[str],
    split: str,
    *,
    files: list[str] | None = None,
    categories: list[str] | None = None,
    limit: int | None = None,
    exclude: set[str] | None = None,
) -> list[str]:
    """Item ids of `split` of each family in order (or of the Data-ID `files`), filtered.

    `exclude` drops items (the validation slice); `limit` keeps the first items per family (all
    of them from files) after filtering.
    """
    wanted = set(categories or [])
    out: list[str] = []
    for ids in _item_groups(families, split, files):
        if exclude:
            ids = [i for i in ids if i not in exclude]
        if wanted:
            ids = [i for i in ids if family_of(i).category_of(i) in wanted]
        out.extend(ids[:limit] if limit is not None else ids)
    if not out:
        where = f"files {files}" if files else f"split {split!r} of {families}"
        raise ValueError(f"no training items in {where} with categories {sorted(wanted) or 'any'}")
    return out


class ItemSampler:
    """Seeded epochs over a fixed item list; `next_batch(k)` advances the cursor by k."""

    def __init__(self, items: list[str], *, seed: int, shuffle: bool = True) -> None:
        self.items = list(items)
        self.seed = seed
        self.shuffle = shuffle
        self.cursor = 0

    @classmethod
    def from_config(cls, cfg: DataConfig, seed: int) -> ItemSampler:
        items = load_items(
            cfg.families,
            cfg.split,
            files=cfg.train_files,
            categories=cfg.categories,
            limit=cfg.max_items,
            exclude=set(validation_items(cfg)),
        )
        return cls(items, seed=seed, shuffle=cfg.shuffle)

    def _epoch_order(self, epoch: int) -> list[str]:
        order = list(self.items)
        if self.shuffle:
            random.Random(f"{self.seed}:{epoch}").shuffle(order)
        return order

    def next_batch(self, k: int, step: int | None = None) -> list[str]:
        """The next `k` items (the order does not depend on `step`; a curriculum's does)."""
        n = len(self.items)
        batch: list[str] = []
        orders: dict[int, list[str]] = {}
        for pos in range(self.cursor, self.cursor + k):
            epoch = pos // n
            if epoch not in orders:
                orders[epoch] = self._epoch_order(epoch)
            batch.append(orders[epoch][pos % n])
        self.cursor += k
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {"cursor": self.cursor, "num_items": len(self.items)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "curriculum" in state:
            raise ValueError("the checkpoint was trained with data.curriculum; this config has none")
        if int(state["num_items"]) != len(self.items):
            raise ValueError(
                f"checkpoint was trained on {state['num_items']} items, this config selects {len(self.items)}"
            )
        self.cursor = int(state["cursor"])

    def update(self, step: int, success_rate: float) -> None:  # noqa: B027 (nothing to adapt)
        """The curriculum's hook; a plain sampler ignores it."""

    def stats(self, step: int) -> dict[str, float]:
        """Metrics of the items drawn at `step` (a curriculum logs its stage)."""
        return {}


def stage_items(cfg: DataConfig, index: int, exclude: set[str]) -> list[str]:
    """The training items of curriculum stage `index` (its categories' items and its item ids, in
    pool order, the held-out `exclude` left out); a clear error for anything it cannot find."""
    stage = cfg.curriculum.stages[index]
    where = f"data.curriculum.stages[{index}]"
    pool = load_items(cfg.families, cfg.split, files=cfg.train_files, exclude=exclude)
    known = {c for name in {parse_item_id(i)[0] for i in pool} for c in get_family(name).categories}
    unknown = [c for c in stage.categories if c not in known]
    if unknown:
        raise ValueError(f"{where}: unknown categories {unknown}; valid: {', '.join(sorted(known))}")
    in_pool = set(pool)
    missing = [i for i in stage.items if i not in in_pool]
    if missing:
        source = f"data.train_files {cfg.train_files}" if cfg.train_files else f"split {cfg.split!r}"
        held = " or held out for validation (data.val_fraction)" if exclude else ""
        raise ValueError(f"{where}: items {missing[:5]} are not training items of {source}{held}")
    cats, ids = set(stage.categories), set(stage.items)
    items = [i for i in pool if i in ids or family_of(i).category_of(i) in cats]
    if cfg.max_items is not None:
        items = items[: cfg.max_items]
    if not items:
        raise ValueError(f"{where} selects no training items (categories {stage.categories})")
    return items


class CurriculumSampler:
    """`data.curriculum`: one `ItemSampler` per stage; each group of a step is drawn from the stage
    the stage schedule gives it (see the module docstring). Same methods as `ItemSampler`."""

    def __init__(
        self, stages: list[list[str]], schedule: TurnSchedule, *, seed: int, shuffle: bool = True
    ) -> None:
        if len(schedule.rounds) != len(stages):
            raise ValueError(f"{len(stages)} stages but a schedule of {len(schedule.rounds)} values")
        self.schedule = schedule
        self.stages = [
            ItemSampler(items, seed=seed * 1009 + s, shuffle=shuffle) for s, items in enumerate(stages)
        ]

    @classmethod
    def from_config(cls, cfg: DataConfig, seed: int) -> CurriculumSampler:
        exclude = set(validation_items(cfg))
        stages = [stage_items(cfg, s, exclude) for s in range(len(cfg.curriculum.stages))]
        return cls(stages, make_schedule(cfg.curriculum.schedule(), seed), seed=seed, shuffle=cfg.shuffle)

    def stage(self, step: int) -> int:
        """The stage (1-based) of `step` (`curriculum/stage`); a mixed one draws some groups from the next."""
        return self.schedule.value(step)

    def next_batch(self, k: int, step: int | None = None) -> list[str]:
        assert step is not None, "a curriculum draws by step"
        return [self.stages[s - 1].next_batch(1)[0] for s in self.schedule.group_values(step, k)]

    def update(self, step: int, success_rate: float) -> None:
        """Record the success rate of `step` (an adaptive curriculum advances on it)."""
        self.schedule.update(step, success_rate)

    def stats(self, step: int) -> dict[str, float]:
        return {"curriculum/stage": float(self.stage(step))}

    def state_dict(self) -> dict[str, Any]:
        return {"curriculum": self.schedule.state_dict(), "stages": [s.state_dict() for s in self.stages]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "curriculum" not in state:
            raise ValueError("the checkpoint was trained without data.curriculum; this config has one")
        if len(state["stages"]) != len(self.stages):
            raise ValueError(
                f"the checkpoint's curriculum has {len(state['stages'])} stages, "
                f"this config {len(self.stages)}"
            )
        self.schedule.load_state_dict(state["curriculum"])
        for sampler, saved in zip(self.stages, state["stages"], strict=True):
            sampler.load_state_dict(saved)


def make_item_sampler(cfg: DataConfig, seed: int) -> ItemSampler | CurriculumSampler:
    """The RL trainer's sampler: a `CurriculumSampler` when `data.curriculum` has stages."""
    if cfg.curriculum.stages:
        return CurriculumSampler.from_config(cfg, seed)
    return ItemSampler.from_config(cfg, seed)
