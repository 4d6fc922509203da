"""Peak memory and time of the observed information (Louis' form) of a simulated 2PL bank.

    PYTHONPATH=src OPENBLAS_NUM_THREADS=1 python benchmarks/bench_se_memory.py [--n 10000]
        [--m 300] [--quadpts 61] [--repeat 3]

The information is taken at the generating parameters (its cost does not depend on where it
is taken); peak memory is tracemalloc's (NumPy reports its arrays to it) over the call, times
(wall and this process's CPU, the latter less disturbed by other jobs on a shared machine) the
medians of ``--repeat`` calls. Figures: ``benchmarks/results/se.md``.
"""
from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

import numpy as np

from atlascat.irt.information import binary_dlog_prob, binary_log_prob, observed_information
from atlascat.irt.quadrature import normal_quadrature


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--m", type=int, default=300)
    ap.add_argument("--quadpts", type=int, default=61)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    n, m = args.n, args.m
    a, d = rng.lognormal(0, 0.3, m), rng.normal(0, 1, m)
    theta = rng.normal(size=n)
    y = (rng.random((n, m)) < 1 / (1 + np.exp(-(a * theta[:, None] + d)))).astype(np.int64)
    params = np.column_stack([a, d, np.full(m, -np.inf), np.full(m, np.inf)])
    free = np.zeros(params.shape, dtype=bool)
    free[:, :2] = True
    quad = normal_quadrature(args.quadpts)
    times, cpus, peaks = [], [], []
    for _ in range(args.repeat):
        tracemalloc.start()
        t0, c0 = time.perf_counter(), time.process_time()
        info = observed_information(binary_log_prob, params, free, y, None, quad.nodes,
                                    quad.log_weights, dlog_prob=binary_dlog_prob)
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.stop()
    se = np.sqrt(np.diag(np.linalg.inv(info.matrix)))
    print(f"{n} x {m} 2PL, {args.quadpts} nodes, {len(info.index)} parameters: wall "
          f"{', '.join(f'{t:.2f}' for t in times)} s (median {statistics.median(times):.2f}), "
          f"CPU {', '.join(f'{t:.2f}' for t in cpus)} s (median {statistics.median(cpus):.2f}), "
          f"peak {max(peaks):.0f} MiB; SE of a1 of item 1 {se[0]:.10g}")


if __name__ == "__main__":
    main()
