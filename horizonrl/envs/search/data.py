"""Question sets of the search family: generated worlds and the reference's seven QA sets.

A `SearchDataset` holds the test questions then the train questions; item `search_<i>`
is the i-th of that concatenation, so test ids come first, as in the reference (test ids
0-51712 = NQ, TriviaQA, PopQA, HotpotQA, 2Wiki, MuSiQue, Bamboogle; train ids 51713-221327
= NQ, HotpotQA train).

QA files hold one JSON object per line, `{"id","question","answers":[...]}`; FlashRAG's
`golden_answers` is read as `answers`. `load_reference_qa(DIR)` finds the seven sets in
FlashRAG's layout (`DIR/nq/test.jsonl`, `DIR/hotpotqa/dev.jsonl`, ...; a set without a
test file uses its dev file, as Search-R1 does) or flat (`DIR/nq_test.jsonl`, `DIR/nq.jsonl`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from horizonrl.envs.core import UnknownItemError

# (category name, FlashRAG folder name), in the reference's id order.
REFERENCE_TEST_SETS = (
    ("NQ", "nq"),
    ("TriviaQA", "triviaqa"),
    ("PopQA", "popqa"),
    ("HotpotQA", "hotpotqa"),
    ("2Wiki", "2wikimultihopqa"),
    ("MuSiQue", "musique"),
    ("Bamboogle", "bamboogle"),
)
REFERENCE_TRAIN_SETS = (("NQ", "nq"), ("HotpotQA", "hotpotqa"))


@dataclass(frozen=True)
class QAItem:
    question: str
    answers: tuple[str, ...]
    category: str
    record: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """The whole source line (generated worlds keep the hop chain here, for the expert)."""


@dataclass(frozen=True)
class SearchDataset:
    test: tuple[QAItem, ...]
    train: tuple[QAItem, ...]
    categories: tuple[str, ...]
    family: str = "search"

    def __len__(self) -> int:
        return len(self.test) + len(self.train)

    def item(self, index: int) -> QAItem:
        if 0 <= index < len(self.test):
            return self.test[index]
        if len(self.test) <= index < len(self):
            return self.train[index - len(self.test)]
        raise UnknownItemError(f"{self.family}_{index} is out of range: this data set has {len(self)} items")

    def splits(self) -> dict[str, list[str]]:
        n_test = len(self.test)
        return {
            "train": [f"{self.family}_{n_test + i}" for i in range(len(self.train))],
            "test": [f"{self.family}_{i}" for i in range(n_test)],
        }


def read_qa(path: str | Path, category: str | None = None) -> list[QAItem]:
    """Read a QA JSONL; `category` overrides each line's own `category` field."""
    items = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            if not line.strip():
                continue
            record = json.loads(line)
            answers = record.get("answers", record.get("golden_answers"))
            if "question" not in record or answers is None:
                raise ValueError(f"{path}:{n + 1}: a QA line needs 'question' and 'answers'")
            if isinstance(answers, str):
                answers = [answers]
            cat = category or record.get("category")
            if not cat:
                raise ValueError(f"{path}:{n + 1}: no category (give the QA set a name)")
            items.append(QAItem(str(record["question"]), tuple(str(a) for a in answers), str(cat), record))
    return items


def load_world_dataset(world_dir: str | Path) -> SearchDataset:
    """The questions of a generated world (`horizonrl data make-search`); categories = hop counts."""
    world = Path(world_dir)
    meta = json.loads((world / "world.json").read_text())
    return SearchDataset(
        test=tuple(read_qa(world / "test.jsonl")),
        train=tuple(read_qa(world / "train.jsonl")),
        categories=tuple(meta["categories"]),
    )


def load_qa_sets(
    test: Mapping[str, str | Path], train: Mapping[str, str | Path] | None = None
) -> SearchDataset:
    """QA sets by category name, in the given order (test sets first, then train sets)."""
    if not test:
        raise ValueError("at least one test QA set is needed")
    test_items = [item for name, path in test.items() for item in read_qa(path, name)]
    train_items = [item for name, path in (train or {}).items() for item in read_qa(path, name)]
    categories = list(dict.fromkeys([*test, *(train or {})]))
    return SearchDataset(test=tuple(test_items), train=tuple(train_items), categories=tuple(categories))


def _find(qa_dir: Path, key: str, splits: tuple[str, ...]) -> Path | None:
    for split in splits:
        for candidate in (qa_dir / key / f"{split}.jsonl", qa_dir / f"{key}_{split}.jsonl"):
            if candidate.is_file():
                return candidate
    flat = qa_dir / f"{key}.jsonl"
    return flat if "test" in splits and flat.is_file() else None


def reference_qa_files(qa_dir: str | Path) -> tuple[dict[str, Path], dict[str, Path]]:
    """`(test, train)` files of the reference's QA sets found in `qa_dir`, in reference order."""
    root = Path(qa_dir)
    test = {name: p for name, key in REFERENCE_TEST_SETS if (p := _find(root, key, ("test", "dev")))}
    train = {name: p for name, key in REFERENCE_TRAIN_SETS if (p := _find(root, key, ("train",)))}
    if not test:
        keys = ", ".join(key for _, key in REFERENCE_TEST_SETS)
        raise FileNotFoundError(f"{root}: no QA test set found (looked for {keys} as <name>/test.jsonl etc.)")
    return test, train


@functools.cache
def load_reference_qa(qa_dir: str) -> SearchDataset:
    """The reference's QA sets found in `qa_dir`; ids follow its ranges when all seven are there."""
    test, train = reference_qa_files(qa_dir)
    return load_qa_sets(test, train)
