"""Large numpy temporaries served from the heap, not from fresh pages each time.

glibc's malloc maps a block of 128 KiB or more (a second of 16 kHz audio as
float64, a recording's windows stacked for one encoder call) with an mmap of
its own and unmaps it when it is freed, and its heap gives memory back to the
kernel past 128 KiB free at its top: the next such block is mapped again and
every page of it faults in on first touch. Converting a recording's windows a
chunk at a time makes such blocks over and over, and on the machines we
measure a page fault costs more than the numpy work on the page:
benchmarks/writer_bench.py's speech corpus converted 0.62 s -> 0.42 s per
unit of 1,235 windows (the lean loop, whose blocks are smaller, 0.38 s).

`reuse_freed_memory` raises both thresholds (mallopt), so blocks up to
32 MiB come from the heap, freed ones are reused, and at most 64 MiB of free
heap is kept: memory stays flat, a little higher. Elsewhere than glibc it
does nothing.
"""

from __future__ import annotations

import ctypes
import functools

__all__ = ["reuse_freed_memory"]

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 << 20
_TRIM_THRESHOLD = 64 << 20


@functools.cache
def reuse_freed_memory() -> bool:
    """Sets this process's malloc to reuse large freed blocks (module
    docstring), once; whether it could (False where malloc is not glibc's)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
                and mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
