"""Keep freed memory in the process during array-heavy loops (glibc only).

The EM's M-step and E-step create many short-lived (items x nodes) and (subjects x nodes)
arrays, 0.1-3 MB each, every iteration. With glibc's default malloc settings, freeing them
shrinks the heap (``M_TRIM_THRESHOLD``) or unmaps them (``M_MMAP_THRESHOLD``), so the next
iteration faults the same pages back in, zeroed by the kernel (one M-step derivative pass over
5257 items x 61 nodes: 51 ms that way, 15 ms with the memory kept; docs/calibration.md).

:func:`retained_heap` raises both thresholds (mmap: 32 MiB, glibc's own dynamic maximum;
trim: 256 MiB) for the duration of a fit; when it ends, the trim threshold becomes 64 MiB
(twice the mmap threshold, the pair glibc's dynamic rule would itself reach after freeing a
32 MiB array) and the retained memory is handed back with ``malloc_trim(0)``. Elsewhere than glibc (macOS, Windows, musl) it does nothing.
``ATLAS_KEEP_MALLOC=1`` turns it off.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys
import threading

__all__ = ["retained_heap"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 * 1024 * 1024
_TRIM_THRESHOLD = 256 * 1024 * 1024

_lock = threading.Lock()
_depth = 0
_libc = None


def _glibc():
    """glibc's handle when this process runs on glibc (else None); looked up once."""
    global _libc
    if _libc is None:
        _libc = False
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                lib.gnu_get_libc_version  # raises AttributeError on musl
                lib.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                lib.malloc_trim.argtypes = [ctypes.c_size_t]
                _libc = lib
            except (OSError, AttributeError):
                _libc = False
    return _libc or None


@contextlib.contextmanager
def retained_heap():
    """Within the block, freed memory stays in the process for reuse (see the module doc)."""
    global _depth
    lib = None if os.environ.get("ATLAS_KEEP_MALLOC") == "1" else _glibc()
    if lib is None:
        yield
        return
    with _lock:
        if _depth == 0:
            lib.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
            lib.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                # the trim threshold glibc's own dynamic rule pairs with this mmap threshold
                # (twice it), and the kept memory handed back
                lib.mallopt(_M_TRIM_THRESHOLD, 2 * _MMAP_THRESHOLD)
                lib.malloc_trim(0)
