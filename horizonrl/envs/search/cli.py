"""`horizonrl index build` and `horizonrl data make-search` (argument parsing lives in horizonrl/cli.py).

horizonrl index build --corpus corpus.jsonl --out idx/ [--kind bm25|dense] [--model PATH]
horizonrl data make-search --seed 1 --out worlds/s1 [--entities 600]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def index_build_main(args: argparse.Namespace) -> int:
    """Build a BM25 or dense index of a corpus JSONL, with progress bars; print a JSON summary."""
    from horizonrl.envs.search.retrieval import build_index

    start = time.perf_counter()
    out = build_index(args.corpus, args.out, kind=args.kind, model=args.model, progress=True)
    meta = json.loads((out / "meta.json").read_text())
    summary = {
        "index": str(out),
        "kind": meta["kind"],
        "n_docs": meta["n_docs"],
        "seconds": round(time.perf_counter() - start, 2),
        "bytes": _dir_size(out),
    }
    print(json.dumps(summary))
    return 0


def make_search_main(args: argparse.Namespace) -> int:
    """Generate a synthetic multi-hop world (corpus + train/test questions) into `--out`."""
    from horizonrl.envs.search.world import generate_world, write_world

    kwargs = {"entities": args.entities} if args.entities else {}
    world = generate_world(args.seed, **kwargs)
    out = write_world(world, args.out)
    print(
        json.dumps(
            {
                "world": str(out),
                "seed": args.seed,
                "passages": len(world.passages),
                "test": len(world.test),
                "train": len(world.train),
            }
        )
    )
    print(
        f'use it with: horizonrl serve search --env-kwargs \'{{"world": "{out}"}}\'  '
        f'(or HORIZONRL_SEARCH=\'{{"world": "{out}"}}\' for every command)'
    )
    return 0
