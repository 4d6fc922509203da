"""Time and peak memory of the once-per-fit passes of the K = 3 multidimensional 2PL.

``calibrate_multidim(y, 3, se=True)`` (EM fit, then the standard errors) and the EAP scores
(``score_multidim``, 15^3 nodes) on a seeded two-factor 2PL of 5000 x 30 (bench_multidim_em.py's data), each
run a fresh process (peak RSS); ``--src`` the source tree to import (e.g. an older commit's
``git archive`` for "before"); medians of ``--reps`` runs. Results (.npz) with ``--save``.
``--trace``: instead, each pass's own peak memory (tracemalloc) after a 20-iteration fit.

  OPENBLAS_NUM_THREADS=1 nice python benchmarks/bench_multidim_passes.py --reps 3 --src src
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def one(save):
    import warnings

    from bench_multidim_em import data

    from atlascat.irt.multidimcal import calibrate_multidim
    from atlascat.irt.multidimscore import score_multidim

    y = data()
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = calibrate_multidim(y, 3, se=True)
    fit = time.perf_counter() - t
    t = time.perf_counter()
    scores = score_multidim(y, cal.bank, quadpts=15)   # the fit's grid (the older code refuses 31^3)
    score = time.perf_counter() - t
    ru = resource.getrusage(resource.RUSAGE_SELF)
    if save:
        np.savez(save, cov=cal.se.covariance, theta=scores.theta, scov=scores.cov,
                 A=cal.bank.loadings)
    print(json.dumps({"total": fit, "se": cal.settings["se_seconds"], "score": score,
                      "n_iter": cal.n_iter, "rss_mb": ru.ru_maxrss / 1024}))


def trace():
    import tracemalloc
    import warnings

    from bench_multidim_em import data

    from atlascat.irt.multidim import product_grid
    from atlascat.irt.multidimcal import calibrate_multidim
    from atlascat.irt.multidimscore import score_multidim
    from atlascat.irt.multidimse import multidim_standard_errors

    y = data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bank = calibrate_multidim(y, 3, max_iter=20).bank
        nodes, logw = product_grid(3, 15)
        for name, f in (("se", lambda: multidim_standard_errors(bank, y, None, nodes, logw,
                                                                prior_a_sd=3.0, prior_d_sd=5.0)),
                        ("eap", lambda: score_multidim(y, bank, quadpts=15))):
            tracemalloc.start()
            f()
            print(f"{name} pass peak {tracemalloc.get_traced_memory()[1] / 2**20:.1f} MB")
            tracemalloc.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--src", default="src")
    ap.add_argument("--save")
    ap.add_argument("--one", action="store_true")
    ap.add_argument("--trace", action="store_true")
    a = ap.parse_args()
    if a.trace:
        sys.path[:0] = [os.path.abspath(a.src), os.path.dirname(os.path.abspath(__file__))]
        return trace()
    if a.one:
        return one(a.save)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(a.src) + os.pathsep + os.path.dirname(__file__))
    runs = []
    for rep in range(a.reps):
        cmd = [sys.executable, __file__, "--one"] + (["--save", a.save] if a.save and rep == 0 else [])
        runs.append(json.loads(subprocess.check_output(cmd, env=env)))
        print(json.dumps(runs[-1]), file=sys.stderr)
    med = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
    print(f"| {a.src} | {med['total']:.1f} | {med['se']:.2f} | {med['score']:.2f} | "
          f"{med['rss_mb']:.0f} | {med['n_iter']:.0f} |")


if __name__ == "__main__":
    main()
