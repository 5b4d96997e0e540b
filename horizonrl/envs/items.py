"""Items of a family from one JSON or JSONL file: the data behind `FamilySpec.from_items`.

    table = ItemTable.load("guess", "items.jsonl")
    table.splits()                 # {"train": ["guess_0", ...], "test": [...]}
    table.category_of("guess_3")   # "small"
    table.item("guess_3")          # the row: {"split": "test", "category": "small", "target": 7}

The file is a JSON list of objects or JSONL (one object per line; blank lines and lines starting
with `#` are skipped). Row i is item `<family>_<i>`. Two fields have a meaning here, the rest are
the env's to read:
- `split`: the split the item belongs to (default `train`);
- `category`: its sub-task for the per-category breakdown (default `default`); categories are
  reported in order of first appearance.
Every family needs a `train` and a `test` split, so a file without `test` rows is refused with
a message saying so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from horizonrl.envs.core import UnknownItemError, parse_item_id

DEFAULT_SPLIT = "train"
DEFAULT_CATEGORY = "default"


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The objects of a JSON list file or a JSONL file, with the line of any bad row named."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"cannot read items file {path}: {exc}") from None
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON: {exc}") from None
        if not all(isinstance(r, dict) for r in rows):
            raise ValueError(f"{path}: expected a JSON list of objects")
        return list(rows)
    out: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not valid JSON: {exc}") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
        out.append(row)
    return out


@dataclass(frozen=True, eq=False)  # hashed by identity: its `splits` is a cached loader
class ItemTable:
    """The rows of one family's items file, addressed by item id (see the module docstring)."""

    family: str
    rows: tuple[dict[str, Any], ...]
    source: str = ""
    """The file the rows came from (for messages)."""

    def __post_init__(self) -> None:
        if not self.rows:
            raise ValueError(f"{self.source or 'items'}: no items")
        splits = {str(r.get("split", DEFAULT_SPLIT)) for r in self.rows}
        missing = {"train", "test"} - splits
        if missing:
            raise ValueError(
                f"{self.source or 'items'}: no items in split(s) {sorted(missing)}; give rows "
                '"split": "train" and "split": "test"'
            )

    @classmethod
    def load(cls, family: str, path: str | Path) -> ItemTable:
        return cls(family, tuple(read_rows(path)), str(path))

    def index(self, item_id: str) -> int:
        family, index = parse_item_id(item_id)
        if family != self.family or index >= len(self.rows):
            raise UnknownItemError(
                f"unknown item {item_id!r}: items are {self.family}_0..{self.family}_{len(self.rows) - 1}"
            )
        return index

    def item(self, item_id: str) -> dict[str, Any]:
        """The row of `item_id` (a copy); raises `UnknownItemError` for an id not in the file."""
        return dict(self.rows[self.index(item_id)])

    def category_of(self, item_id: str) -> str:
        return str(self.rows[self.index(item_id)].get("category", DEFAULT_CATEGORY))

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(str(r.get("category", DEFAULT_CATEGORY)) for r in self.rows))

    def splits(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for i, row in enumerate(self.rows):
            out.setdefault(str(row.get("split", DEFAULT_SPLIT)), []).append(f"{self.family}_{i}")
        return out
