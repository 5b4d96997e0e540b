"""Search retrieval: index build time and size, load time, query latency, expert success at scale.

    python benchmarks/search_index.py --entities 100000 --out benchmarks/results/search.md

Steps (one process, this machine; `OMP_WAIT_POLICY=PASSIVE` as the package sets it):
1. Generate a synthetic world of `--entities` passages (`horizonrl data make-search`).
2. Build its BM25 index (`horizonrl index build`): wall time and bytes on disk.
3. Load it (memory-mapped): wall time and resident memory added.
4. Query latency, one query at a time: `--queries` entity names (what the expert sends)
   and as many whole questions (longer queries, what an untrained model sends); p50/p99.
5. The expert on the world's test split, locally, with BM25 (does retrieval still find
   the right passage among 100k with many near-duplicate names?).
6. With `--dense N`: a dense index (all-MiniLM-L6-v2 + faiss) of the first N passages:
   build time, size, and query latency (encoding included).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from horizonrl.envs.search import make_spec  # noqa: E402
from horizonrl.envs.search.retrieval import build_index, load_retriever  # noqa: E402
from horizonrl.envs.search.world import generate_world, write_world  # noqa: E402
from horizonrl.eval.metrics import success_summary  # noqa: E402
from horizonrl.eval.solve import solve_items  # noqa: E402


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def latency(retriever: Any, queries: list[str], k: int = 3) -> dict[str, float]:
    times = []
    for q in queries:
        start = time.perf_counter()
        retriever.search(q, k=k)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {
        "p50_ms": statistics.median(times),
        "p99_ms": times[min(len(times) - 1, int(0.99 * len(times)))],
        "mean_ms": statistics.fmean(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--dense", type=int, default=0, help="also build a dense index of this many passages")
    parser.add_argument(
        "--workdir", default=None, help="keep the world and indexes here (default: a temp dir)"
    )
    parser.add_argument("--out", default=None, help="write the Markdown table here")
    args = parser.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="search_bench_"))
    rows: list[tuple[str, str]] = []
    start = time.perf_counter()
    world = generate_world(args.seed, entities=args.entities)
    write_world(world, work / "world")
    rows.append(
        ("world generation + write", f"{time.perf_counter() - start:.1f} s ({len(world.passages)} passages)")
    )
    corpus_mb = (work / "world" / "corpus.jsonl").stat().st_size / 2**20
    rows.append(("corpus size", f"{corpus_mb:.1f} MiB"))

    start = time.perf_counter()
    build_index(work / "world" / "corpus.jsonl", work / "world" / "index-bm25", progress=False)
    rows.append(("BM25 index build", f"{time.perf_counter() - start:.1f} s"))
    rows.append(
        ("BM25 index size on disk (incl. passage store)", f"{dir_mb(work / 'world' / 'index-bm25'):.1f} MiB")
    )

    before = rss_mb()
    start = time.perf_counter()
    retriever = load_retriever(work / "world" / "index-bm25")
    rows.append(
        (
            "BM25 index load (mmap)",
            f"{(time.perf_counter() - start) * 1000:.0f} ms, +{rss_mb() - before:.0f} MiB RSS",
        )
    )

    rng = random.Random(0)
    names = [p["title"] for p in rng.sample(world.passages, min(args.queries, len(world.passages)))]
    questions = [q["question"] for q in rng.sample(world.train, min(args.queries, len(world.train)))]
    latency(retriever, names[:50])  # warm the page cache
    for label, queries in (("entity-name queries", names), ("whole-question queries", questions)):
        lat = latency(retriever, queries)
        rows.append((f"BM25 query latency, {label} (n={len(queries)}, k=3)",
                     f"p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms"))  # fmt: skip
    hits1 = sum(retriever.search(n, k=1)[0].title == n for n in names)
    rows.append(("BM25 top-1 = the named entity's passage", f"{hits1}/{len(names)}"))

    spec = make_spec(world=str(work / "world"))
    start = time.perf_counter()
    trajectories = solve_items(spec.make_env, spec, spec.split("test"))
    summary = success_summary(trajectories, spec.categories)
    by_cat = ", ".join(f"{c} {v['success_rate']:.2f}" for c, v in summary["by_category"].items())
    rows.append(
        (f"expert success, test split (n={summary['n']}), BM25", f"{summary['success_rate']:.3f} ({by_cat})")
    )
    rows.append(("expert wall time (local env, 1 worker)", f"{time.perf_counter() - start:.1f} s"))

    if args.dense:
        subset = work / "dense_corpus.jsonl"
        with subset.open("w") as f:
            for p in world.passages[: args.dense]:
                f.write(json.dumps(p) + "\n")
        start = time.perf_counter()
        build_index(subset, work / "index-dense", kind="dense", progress=False)
        rows.append(
            (
                f"dense index build ({args.dense} passages, MiniLM-L6, CPU)",
                f"{time.perf_counter() - start:.1f} s",
            )
        )
        rows.append(("dense index size on disk", f"{dir_mb(work / 'index-dense'):.1f} MiB"))
        dense = load_retriever(work / "index-dense")
        dense_names = [p["title"] for p in world.passages[: args.dense]][: min(200, args.dense)]
        latency(dense, dense_names[:10])
        lat = latency(dense, dense_names)
        rows.append((f"dense query latency incl. encoding (n={len(dense_names)})",
                     f"p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms"))  # fmt: skip

    cmd = "python benchmarks/search_index.py " + " ".join(sys.argv[1:])
    table = ["| measure | value |", "|---|---|", *[f"| {a} | {b} |" for a, b in rows]]
    text = "\n".join([f"`{cmd}` (CPU: {os.cpu_count()} cores, shared)", "", *table, ""])
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
