"""Training items: which item ids a run trains on, and in what order.

Items come from the families' splits (or Data-ID files), optionally filtered by category.
The order is a seeded permutation per epoch, and the sampler's only state is a cursor (items
handed out so far), so the batch at any step is a pure function of (items, seed, cursor):
a resumed run draws exactly the batches the uninterrupted run would have drawn.
"""

from __future__ import annotations

import random
from typing import Any

from horizonrl.config import DataConfig
from horizonrl.envs.registry import family_of, get_family, read_item_file


def load_items(
    families: list[str],
    split: str,
    *,
    files: list[str] | None = None,
    categories: list[str] | None = None,
    limit: int | None = None,
) -> list[str]:
    """Item ids of `split` of each family in order (or of the Data-ID `files`), filtered.

    `limit` keeps the first items per family (all of them from files) after filtering.
    """
    groups: list[list[str]]
    if files:
        groups = [[i for f in files for i in read_item_file(f)]]
    else:
        groups = [get_family(name).split(split) for name in families]
    wanted = set(categories or [])
    out: list[str] = []
    for ids in groups:
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
            cfg.families, cfg.split, files=cfg.train_files, categories=cfg.categories, limit=cfg.max_items
        )
        return cls(items, seed=seed, shuffle=cfg.shuffle)

    def _epoch_order(self, epoch: int) -> list[str]:
        order = list(self.items)
        if self.shuffle:
            random.Random(f"{self.seed}:{epoch}").shuffle(order)
        return order

    def next_batch(self, k: int) -> list[str]:
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
        if int(state["num_items"]) != len(self.items):
            raise ValueError(
                f"checkpoint was trained on {state['num_items']} items, this config selects {len(self.items)}"
            )
        self.cursor = int(state["cursor"])
