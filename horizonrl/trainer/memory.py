"""Host memory of the trainer process: what it holds after a step, and handing freed heap back.

A step on the CPU allocates and frees gigabytes of activations and logits whose sizes change with
every batch. glibc's allocator serves such blocks from its heaps once it has raised its mmap
threshold (it does after the first large free) and keeps what a step freed. Measured on
SmolLM2-135M SFT (bf16, batch 8, 2 cores; `benchmarks/sft_memory.py`, BENCHMARKS.md "Host memory
of long runs"): the process held 5.9 GB after step 1 and 9.8 GB after step 12, at a peak of
7.6-11.0 GB; with `malloc_trim` after every step it held 2.7-3.0 GB between steps at about the
same peak, ~2.6 s (11%) slower a step (the next step faults its pages back in).

So: every step row reports `memory_report()`; `release_memory()` (gc, then `malloc_trim`) runs
where something else needs the room next: after each RL step (the next rollout: vLLM beside the
trainer, or generation in this process), when a supervised phase's steps end (its eval, the RL
phase of a warm start), before AgentEvol explores, between the protocol's arms. Back-to-back SFT
steps do not trim: the next step reuses what the last one freed.

    metrics |= memory_report()    # {"memory/rss_gb": ..., "memory/peak_rss_gb": ...}
    metrics |= release_memory()   # the same, after handing the free pages back
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import resource
import sys
from functools import cache
from typing import Any


@cache
def _libc() -> Any:
    """glibc when this process runs on it (its `malloc_trim`), else None (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def rss_gb() -> float | None:
    """This process's resident memory now (GB, Linux `/proc`), None where there is no `/proc`."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * resource.getpagesize() / 1e9


def peak_rss_gb() -> float:
    """The most resident memory this process has held (GB; `ru_maxrss` is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e9 if sys.platform == "darwin" else peak * 1024 / 1e9


def memory_report() -> dict[str, float]:
    """The process's host memory: `memory/rss_gb` (resident now; Linux) and `memory/peak_rss_gb`."""
    out = {"memory/peak_rss_gb": peak_rss_gb()}
    now = rss_gb()
    if now is not None:
        out["memory/rss_gb"] = now
    return out


def release_memory() -> dict[str, float]:
    """Collect garbage, hand the heap's free pages back to the system (glibc's `malloc_trim`), and
    report what the process holds after that (`memory_report`)."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
    return memory_report()
