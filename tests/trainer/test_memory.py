"""`release_memory`: a step's freed heap goes back to the system, and every step row says how much
the process holds."""

from __future__ import annotations

import ctypes
import sys

import pytest

from horizonrl.trainer.memory import _libc, release_memory, rss_gb

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or _libc() is None, reason="malloc_trim is glibc's"
)


@glibc
def test_freed_heap_pages_go_back_to_the_system():
    # What a CPU step leaves: many heap blocks freed, one live block above them pinning the heap's top,
    # so glibc's free() cannot shrink the heap by itself and the freed pages stay resident.
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block, n = 64 * 1024, 4000  # 256 MB in blocks below the mmap threshold: they come from the heap
    blocks = [libc.malloc(block) for _ in range(n)]
    for b in blocks:
        ctypes.memset(b, 1, block)  # touched: resident
    pin = libc.malloc(block)
    before = rss_gb()
    for b in blocks:
        libc.free(b)
    held = rss_gb()
    try:
        assert before is not None and held is not None
        assert held > before - 0.05  # free() alone gave (almost) nothing back
        after = release_memory()["memory/rss_gb"]
        assert after < held - 0.2  # the 256 MB left the process
    finally:
        libc.free(pin)


def test_the_report_names_now_and_peak():
    out = release_memory()
    assert out["memory/peak_rss_gb"] > 0
    if sys.platform.startswith("linux"):
        assert 0 < out["memory/rss_gb"] <= out["memory/peak_rss_gb"] + 0.01
