"""Scoring and fit timings (medians of repeated runs; prints one line per figure).

- EAP, WLE, MAP, ML for 5000 subjects x 1000 items of a simulated 3PL bank (target: EAP < 1 s);
- the same with 30% of the answers missing;
- M2 (with the null model for CFI/TLI) on a 100-item 3PL bank, 5000 subjects;
- S-X2 for the 100 items, and for 1000 items.

Run: ``.venv/bin/python benchmarks/bench_ability.py [--repeat 5]``.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from atlascat.irt.ability import estimate_ability
from atlascat.irt.bank import ItemBank
from atlascat.irt.fit import m2, sx2


def median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), float(np.min(times))


def make(rng, n_items, n_subjects, missing=0.0):
    bank = ItemBank([f"i{k}" for k in range(n_items)], rng.lognormal(0.3, 0.4, n_items),
                    rng.normal(0, 1.5, n_items), rng.uniform(0, 0.3, n_items))
    theta = rng.normal(size=n_subjects)
    y = (rng.random((n_subjects, n_items)) < bank.probability(theta)).astype(float)
    if missing:
        y[rng.random(y.shape) < missing] = np.nan
    return bank, y


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"cpus: {os.cpu_count()}, repeat: {args.repeat} (median / min seconds)")
    bank, y = make(rng, 1000, 5000)
    for method in ("eap", "wle", "map", "ml"):
        med, best = median_time(lambda: estimate_ability(y, bank, method), args.repeat)
        print(f"{method.upper():4s} 5000 x 1000 dense        {med:7.3f}  {best:7.3f}")
    bank_m, y_m = make(rng, 1000, 5000, missing=0.3)
    for method in ("eap", "wle"):
        med, best = median_time(lambda: estimate_ability(y_m, bank_m, method), args.repeat)
        print(f"{method.upper():4s} 5000 x 1000, 30% missing {med:7.3f}  {best:7.3f}")
    bank100, y100 = make(rng, 100, 5000)
    r = max(1, args.repeat // 2)
    med, best = median_time(lambda: m2(y100, bank100, estimated="3pl"), r)
    print(f"M2   100 items (5050 moments), 5000  {med:7.3f}  {best:7.3f}")
    med, best = median_time(lambda: sx2(y100, bank100), args.repeat)
    print(f"S-X2 100 items, 5000 subjects        {med:7.3f}  {best:7.3f}")
    med, best = median_time(lambda: sx2(y, bank), r)
    print(f"S-X2 1000 items, 5000 subjects       {med:7.3f}  {best:7.3f}")


if __name__ == "__main__":
    main()
