"""`release_memory`: a step's freed heap goes back to the system, and every step row says how much
the process holds."""

from __future__ import annotations

import ctypes
import sys

import pytest

from horizonrl.trainer.memory import _libc, keep_under, machine_memory_gb, release_memory, rss_gb

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or _libc() is None, reason="malloc_trim is glibc's"
)


@glibc
@pytest.mark.parametrize("how", ["release_memory", "keep_under"])
def test_freed_heap_pages_go_back_to_the_system(how):
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
        if how == "release_memory":
            after = release_memory()["memory/rss_gb"]
        else:  # it holds more than a tenth of a `9.9 * held` GB machine: trims
            out = keep_under(0.1, machine_gb=9.9 * held)
            after = out["memory/rss_gb"]
            assert out["memory/released_gb"] > 0.2
        assert after < held - 0.2  # the 256 MB left the process
    finally:
        libc.free(pin)


def test_the_report_names_now_and_peak():
    out = release_memory()
    assert out["memory/peak_rss_gb"] > 0
    if sys.platform.startswith("linux"):
        assert 0 < out["memory/rss_gb"] <= out["memory/peak_rss_gb"] + 0.01


def test_below_the_share_nothing_is_trimmed():
    held = rss_gb()
    if held is None:
        pytest.skip("no /proc: the resident size is unknown, so keep_under never trims")
    assert "memory/released_gb" not in keep_under(0.5, machine_gb=4 * held)  # holds a quarter
    assert "memory/released_gb" not in keep_under(1.0, machine_gb=held / 2)  # share 1: never
    assert "memory/released_gb" in keep_under(0.0, machine_gb=4 * held)  # share 0: always


def test_the_machine_is_its_ram_or_a_lower_container_limit(tmp_path):
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    ram = machine_memory_gb(())
    assert ram is not None and ram > 0.5
    v2.write_text("max\n")
    v1.write_text("9223372036854771712\n")  # cgroup v1's "no limit"
    assert machine_memory_gb((str(v2), str(v1))) == ram
    v2.write_text("2000000000\n")  # a 2 GB container
    assert machine_memory_gb((str(v2), str(v1), str(tmp_path / "absent"))) == 2.0
