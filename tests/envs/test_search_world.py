"""The synthetic multi-hop world generator: determinism, structure, files and CLI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from horizonrl.cli import main
from horizonrl.envs.search.world import HOP_CATEGORIES, World, generate_world, write_world

_DIGEST = (
    "import hashlib, json\n"
    "from horizonrl.envs.search.world import generate_world\n"
    "w = generate_world(11, entities=150, n_test=5, n_train=5)\n"
    "print(hashlib.sha256(json.dumps([w.passages, w.test, w.train]).encode()).hexdigest())\n"
)


def _digest(w: World) -> str:
    return hashlib.sha256(json.dumps([w.passages, w.test, w.train]).encode()).hexdigest()


def test_same_seed_same_world_different_seed_different_world() -> None:
    a = generate_world(11, entities=150, n_test=5, n_train=5)
    b = generate_world(11, entities=150, n_test=5, n_train=5)
    c = generate_world(12, entities=150, n_test=5, n_train=5)
    assert _digest(a) == _digest(b)
    assert _digest(a) != _digest(c)


def test_world_does_not_depend_on_hash_seed() -> None:
    repo = Path(__file__).resolve().parents[2]
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(repo)}
        out = subprocess.run(
            [sys.executable, "-c", _DIGEST], env=env, capture_output=True, text=True, check=True
        )
        digests.add(out.stdout.strip())
    assert digests == {_digest(generate_world(11, entities=150, n_test=5, n_train=5))}


@pytest.fixture(scope="module")
def world() -> World:
    return generate_world(3, entities=300, n_test=20, n_train=30)


def test_splits_have_the_requested_questions_per_hop_and_are_disjoint(world: World) -> None:
    assert Counter(q["category"] for q in world.test) == {c: 20 for c in HOP_CATEGORIES}
    assert Counter(q["category"] for q in world.train) == {c: 30 for c in HOP_CATEGORIES}
    # Any prefix covers every hop count (hop counts alternate).
    assert [q["category"] for q in world.test[:4]] == list(HOP_CATEGORIES)
    assert not {q["question"] for q in world.test} & {q["question"] for q in world.train}
    assert len({q["id"] for q in world.test}) == len(world.test)


def test_titles_are_unique_and_distractors_share_name_parts(world: World) -> None:
    titles = [p["title"] for p in world.passages]
    assert len(set(titles)) == len(titles)
    words = Counter(word for t in titles for word in set(t.split()))
    shared = [t for t in titles if len(t.split()) > 1 and all(words[w] > 1 for w in t.split())]
    assert len(shared) > len(titles) // 10, "few names share parts with other names: no distractors"


def test_each_hop_is_written_in_the_passage_of_the_previous_entity(world: World) -> None:
    text = {p["title"]: p["text"] for p in world.passages}
    for q in world.test + world.train:
        chain = q["chain"]
        assert len(chain) == q["hops"] == len(q["path"]) + 1
        assert len(set(chain)) == len(chain), "an entity repeats along the chain"
        for here, nxt in zip(chain, chain[1:], strict=False):
            assert nxt in text[here], f"{q['question']}: {here}'s passage does not name {nxt}"
        assert q["answers"][0] in text[chain[-1]], f"{q['question']}: answer not in the last passage"
        assert q["question"].startswith(("In ", "What ", "Which ")) and q["question"].endswith("?")
        assert chain[0] in q["question"]
        for later in chain[1:]:
            assert later not in q["question"], "the question gives away an intermediate entity"


def test_write_world_and_make_search_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w"
    assert main(["data", "make-search", "--seed", "2", "--out", str(out), "--entities", "120"]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[0])
    corpus = [json.loads(line) for line in (out / "corpus.jsonl").read_text().splitlines()]
    test = [json.loads(line) for line in (out / "test.jsonl").read_text().splitlines()]
    assert summary["passages"] == len(corpus) == 120
    assert summary["test"] == len(test) > 0
    assert set(corpus[0]) == {"id", "title", "text"}
    assert {"id", "question", "answers", "category"} <= set(test[0])
    assert json.loads((out / "world.json").read_text())["categories"] == list(HOP_CATEGORIES)
    # Writing the same world again over the folder gives the same files.
    before = (out / "corpus.jsonl").read_bytes()
    write_world(generate_world(2, entities=120), out)
    assert (out / "corpus.jsonl").read_bytes() == before
