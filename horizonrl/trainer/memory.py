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
steps reuse what the last one freed, so they trim only once the process holds more than
`trainer.release_memory_above` of the machine's memory (`keep_under`): over a long run the held
heap creeps with the longest batches seen (150 steps of the default model: 6.9 -> 16.2 GB, and
19.0 GB by step 84 on longer demos, on a 23 GB machine), and a trim takes it back to ~3 GB.

    metrics |= memory_report()    # {"memory/rss_gb": ..., "memory/peak_rss_gb": ...}
    metrics |= release_memory()   # the same, after handing the free pages back
    metrics |= keep_under(0.5)    # release_memory() if over half the machine (+ memory/released_gb)
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os
import resource
import sys
from functools import cache
from pathlib import Path
from typing import Any

CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""Where a container's memory limit is written (cgroup v2, v1); "max" or a huge number: none."""


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


def machine_memory_gb(cgroup_limits: tuple[str, ...] = CGROUP_LIMITS) -> float | None:
    """The memory this process may fill (GB): the machine's RAM, or the container's cgroup limit
    when that is lower; None where neither can be read."""
    sizes: list[float] = []
    with contextlib.suppress(AttributeError, OSError, ValueError):  # no sysconf names (Windows)
        sizes.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 1e9)
    for path in cgroup_limits:
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            sizes.append(int(text) / 1e9)  # v1 writes ~9.2e18 for "no limit": the RAM is then lower
    return min(sizes) if sizes else None


def keep_under(share: float, machine_gb: float | None = None) -> dict[str, float]:
    """`memory_report()`; when the process holds more than `share` of the machine's memory
    (`machine_memory_gb()` unless given), `release_memory()` first, and `memory/released_gb` says
    how much the trim handed back. share 0 trims every call, 1 never (nothing holds more than all)."""
    report = memory_report()
    machine_gb = machine_memory_gb() if machine_gb is None else machine_gb
    held = report.get("memory/rss_gb")
    if held is None or machine_gb is None or share >= 1 or held <= share * machine_gb:
        return report
    after = release_memory()
    return after | {"memory/released_gb": held - after.get("memory/rss_gb", held)}
