"""Standard errors of the exploratory multidimensional 2PL: time of ATLAS's observed information
(Louis) on a 2000 x 12 two-factor set (tests/data/oblimin/corr2f.csv), beside mirt's
``mirt(dat, K, SE = TRUE)`` (benchmarks/results/se.md, "Multidimensional 2PL standard errors").

    PYTHONPATH=src OPENBLAS_NUM_THREADS=1 python benchmarks/bench_multidim_se.py
    Rscript benchmarks/bench_multidim_se.R
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from atlascat.irt.multidimcal import calibrate_multidim

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "oblimin" / "corr2f.csv"


def main(repeats: dict | None = None) -> None:
    y = pd.read_csv(DATA, index_col=0)
    for k, runs in (repeats or {2: 3}).items():
        for _ in range(runs):
            t0 = time.perf_counter()
            res = calibrate_multidim(y, k, prior_a_sd=None, prior_d_sd=None, se=True)
            total = time.perf_counter() - t0
            t1 = time.perf_counter()
            res.standard_errors("bank")
            bank = time.perf_counter() - t1
            print(f"K={k}: fit and SEs {total:.2f} s, of which the information "
                  f"{res.settings['se_seconds']:.2f} s; the bank's delta-method SEs {bank:.2f} s; "
                  f"{res.n_iter} EM iterations, loglik {res.loglik:.3f}")


if __name__ == "__main__":
    main()
