"""CAT engine speed: batched simulation on the HellaSwag bank and one live session step.

    python benchmarks/bench_cat.py

Targets (issue 5): 5600-item HellaSwag bank, its 386 test models' thetas, tau = 0.1: total wall
time <= 5 s; one live next_item() + record() step at 5600 items <= 2 ms median.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from atlascat.cat.config import CATConfig
from atlascat.cat.session import CATSession
from atlascat.cat.simulate import simulate_cat
from atlascat.cat.tables import _TABLE_CACHE
from atlascat.catalogue import load_paper_bank as load_bank, load_test_thetas


def batched(bank, thetas, ids, repeats=5):
    config = CATConfig(se_stop=0.1)
    _TABLE_CACHE.clear()
    t0 = time.perf_counter()
    res = simulate_cat(bank, config, thetas=thetas, subject_ids=ids, rng=np.random.default_rng(0))
    cold = time.perf_counter() - t0
    warm = []
    for r in range(repeats):
        t0 = time.perf_counter()
        simulate_cat(bank, config, thetas=thetas, subject_ids=ids, rng=np.random.default_rng(r))
        warm.append(time.perf_counter() - t0)
    return res, cold, warm


def live_steps(bank, n_sessions=20):
    rng = np.random.default_rng(1)
    config = CATConfig(se_stop=0.1)
    CATSession(bank, config, rng=0)  # build the shared tables once, as a server would
    steps, first = [], []
    for i in range(n_sessions):
        truth = rng.normal()
        s = CATSession(bank, config, rng=rng.spawn(1)[0])
        p_all = bank.probability(truth)
        k = 0
        while True:
            t0 = time.perf_counter()
            item = s.next_item()
            if item is None:
                break
            y = float(rng.random() < p_all[bank.index_of([item])[0]])
            t1 = time.perf_counter()
            s.record(item, y)
            t2 = time.perf_counter()
            (first if k == 0 else steps).append((t1 - t0) + (t2 - t1))
            k += 1
    return steps, first


def main():
    bank = load_bank("hellaswag")
    th = load_test_thetas("hellaswag")
    res, cold, warm = batched(bank, th["theta"].to_numpy(), th["subject_id"])
    p = res.persons
    print(f"HellaSwag bank: {len(bank)} items, {len(p)} test thetas, tau = 0.1")
    print(f"  batched simulation: cold {cold:.2f} s (incl. building tables), "
          f"warm median {statistics.median(warm):.2f} s over {len(warm)} runs "
          f"(target <= 5 s)")
    print(f"  items mean {p['n_items'].mean():.1f}, MAE {p['error'].abs().mean():.4f}, "
          f"time per examinee {1000 * statistics.median(warm) / len(p):.2f} ms")
    steps, first = live_steps(bank)
    print(f"  live next_item()+record(): median {1000 * statistics.median(steps):.3f} ms, "
          f"p95 {1000 * np.quantile(steps, 0.95):.3f} ms over {len(steps)} steps "
          f"(first item: median {1000 * statistics.median(first):.3f} ms) (target <= 2 ms)")


if __name__ == "__main__":
    main()
