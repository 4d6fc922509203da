"""Answer counts of a matrix of 0/1 answers (NaN = missing), per item and per subject.

One pass over blocks of rows with one-byte masks (no full-size temporary): per item j the
answers n_j = #{i: y_ij observed} and right answers r_j = #{i: y_ij = 1}; per subject i the
same over the items, K_i and T_i (the total score). Every count is an integer, so the sums are
exact whatever their order. The constant-item check (r_j = 0 or r_j = n_j), the
identification checks (:mod:`atlascat.irt.defaults`) and the classical start values
(:mod:`atlascat.irt.start`) share them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

__all__ = ["BinaryCounts", "binary_counts", "map_row_chunks"]

#: cells per block of rows (one-byte masks of 2 MiB: cache-sized)
BLOCK_CELLS = 1 << 21
#: cells per chunk of rows handed to one thread; the chunks depend on the shape only, so
#: sums over them, added in chunk order, are the same whatever the number of threads
CHUNK_CELLS = 1 << 24
#: at most this many threads (the passes are bound by memory bandwidth beyond)
MAX_THREADS = 8


def map_row_chunks(fn, n: int, m: int, chunk_cells: int | None = None,
                   blas: bool = False) -> list:
    """``[fn(start, stop) for each chunk of rows]`` of an ``n x m`` matrix, the chunks
    (``chunk_cells`` cells each) in order, run by up to :data:`MAX_THREADS` threads (NumPy
    releases the GIL on large arrays); ``blas``: ``fn`` makes matrix products, BLAS is held
    at one thread meanwhile (a process-wide setting: only from the thread that owns it)."""
    rows = max(1, int(CHUNK_CELLS if chunk_cells is None else chunk_cells) // max(1, m))
    bounds = [(s, min(s + rows, n)) for s in range(0, n, rows)]
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:     # not Linux
        cores = os.cpu_count() or 1
    workers = min(len(bounds), cores, int(MAX_THREADS))
    if workers <= 1:
        return [fn(a, b) for a, b in bounds]
    import contextlib
    from concurrent.futures import ThreadPoolExecutor

    from .._blas import one_thread

    with one_thread() if blas else contextlib.nullcontext(), \
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="atlas-rows") as pool:
        return list(pool.map(lambda ab: fn(*ab), bounds))


@dataclass
class BinaryCounts:
    """Integer counts of a 0/1 matrix (int64): ``seen`` / ``right`` per item (column),
    ``row_seen`` / ``row_right`` per subject (row)."""

    seen: np.ndarray
    right: np.ndarray
    row_seen: np.ndarray
    row_right: np.ndarray

    @property
    def has_missing(self) -> bool:
        """Whether a cell is missing (some subject lacks an answer)."""
        return bool(np.any(self.seen < len(self.row_seen)))

    def constant(self) -> np.ndarray:
        """Items answered, and answered the same way by every subject who saw them (the
        test ``nanmin == nanmax`` of the column)."""
        return (self.seen > 0) & ((self.right == 0) | (self.right == self.seen))

    def without(self, drop: np.ndarray, values: np.ndarray) -> "BinaryCounts":
        """The counts of ``values[:, ~drop]``: the dropped columns' answers taken off each
        subject's counts (read from those columns of ``values`` only)."""
        cols = np.take(values, np.flatnonzero(drop), axis=1)
        row_seen = self.row_seen - np.count_nonzero(cols == cols, axis=1)
        row_right = self.row_right - np.count_nonzero(cols == 1.0, axis=1)
        return BinaryCounts(self.seen[~drop], self.right[~drop], row_seen, row_right)


def binary_counts(values, cells: int = BLOCK_CELLS) -> BinaryCounts | None:
    """The :class:`BinaryCounts` of a float64 NumPy matrix whose cells are all 0, 1 or NaN,
    else None (other scores, another dtype or array type)."""
    if not isinstance(values, np.ndarray) or values.ndim != 2 or values.dtype != np.float64:
        return None
    n, m = values.shape
    row_seen = np.empty(n, np.int64)
    row_right = np.empty(n, np.int64)
    rows = max(1, int(cells) // max(1, m))

    def chunk(a, b):
        seen = np.zeros(m, np.int64)
        right = np.zeros(m, np.int64)
        for s in range(a, b, rows):
            e = min(s + rows, b)
            blk = values[s:e]
            obs = np.equal(blk, blk)             # observed: False at NaN only
            one = np.equal(blk, 1.0)
            zero = np.equal(blk, 0.0)
            o8, r8 = obs.view(np.uint8), one.view(np.uint8)
            rs = np.add.reduce(o8, axis=1, dtype=np.int64)
            if int(rs.sum()) != int(np.count_nonzero(one)) + int(np.count_nonzero(zero)):
                return None                      # a score other than 0 and 1
            row_seen[s:e] = rs
            row_right[s:e] = np.add.reduce(r8, axis=1, dtype=np.int64)
            seen += np.add.reduce(o8, axis=0, dtype=np.int64)
            right += np.add.reduce(r8, axis=0, dtype=np.int64)
        return seen, right

    parts = map_row_chunks(chunk, n, m)
    if any(p is None for p in parts):
        return None
    return BinaryCounts(sum(p[0] for p in parts), sum(p[1] for p in parts), row_seen, row_right)
