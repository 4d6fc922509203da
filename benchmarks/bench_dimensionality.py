"""The dimensionality check every calibration runs (:mod:`atlascat.irt.dimensionality`):
false alarms, detection, verdicts on the shared real matrices, and its cost.

- ``false``: one-trait 2PL data (theta ~ N(0, 1)), per size, the share of seeded replicates
  the check stays silent on (goal >= 95%); two item sets: "typical" (a ~ lognormal(0, 0.5),
  b ~ N(0, 1)) and "spread" (a ~ lognormal(0.4, 0.5), b ~ N(0, 2): the wide difficulties of
  LLM benchmarks, where phi correlations show difficulty factors);
- ``detect``: the share it fires on: random answers (each item its own rate in [0.2, 0.8]) and
  two traits of equal item halves, correlation 0 and 0.3 (also 0.5, and a 20% second half);
- ``real``: the verdict on every matrix of ../shared/data (openllm tiny_/dense_, benchpred,
  longbench), calibrated as ``atlas calibrate`` does (model auto);
- ``cost``: the check's seconds against the calibration's, 3000 x 1000 binary and the real
  matrices (one BLAS thread: OPENBLAS_NUM_THREADS=1).

Run: ``OPENBLAS_NUM_THREADS=1 nice .venv/bin/python benchmarks/bench_dimensionality.py
[false|detect|real|cost|all] [--reps N]`` (markdown tables on stdout;
benchmarks/results/dimensionality.md).
"""
from __future__ import annotations

import argparse
import glob
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat import calibrate
from atlascat.irt.dimensionality import Dimensionality, of_calibration

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SIZES = [(25, 40), (50, 40), (50, 100), (100, 100), (300, 100), (1000, 300)]


def one_trait(n, p, rng, spread=False):
    a = np.exp(rng.normal(0.4 if spread else 0.0, 0.5, p))
    b = rng.normal(0, 2.0 if spread else 1.0, p)
    th = rng.standard_normal(n)
    return (rng.random((n, p)) < 1 / (1 + np.exp(-a * (th[:, None] - b)))).astype(float)


def two_traits(n, p, rng, r=0.3, share=0.5):
    th = rng.standard_normal((n, 2)) @ np.linalg.cholesky([[1, r], [r, 1]]).T
    a, b = np.exp(rng.normal(0, 0.5, p)), rng.normal(0, 1, p)
    f = (np.arange(p) >= int(share * p)).astype(int)
    return (rng.random((n, p)) < 1 / (1 + np.exp(-a * (th[:, f] - b)))).astype(float)


def noise(n, p, rng):
    return (rng.random((n, p)) < rng.uniform(0.2, 0.8, p)).astype(float)


def verdict(y, seed=0):
    """The calibration's dimensionality record (warnings silenced) and its seconds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = calibrate(y, random_state=seed)
    return res.settings["dimensionality"], res


def reps_for(n, reps):
    """Replicates per size: 4x at 50 models or fewer (where alarms happen), fewer where each
    fit takes seconds."""
    return 4 * reps if n <= 50 else reps if n <= 100 else max(10, reps // (4 if n <= 300 else 10))


def table_false(reps):
    print("| data | models x items | replicates | silent | noise alarm | two-trait alarm |")
    print("|---|---|---|---|---|---|")
    for spread in (False, True):
        for n, p in SIZES:
            k = reps_for(n, reps)
            out = []
            for s in range(k):
                d, _ = verdict(one_trait(n, p, np.random.default_rng([n, p, s, spread])), s)
                out.append((d["one_trait"], Dimensionality.from_dict(d).noise,
                            d["second_dimension"]))
            o = np.array(out, bool)
            print(f"| 2PL {'spread' if spread else 'typical'} | {n} x {p} | {k} | "
                  f"{o[:, 0].mean():.0%} | {o[:, 1].mean():.0%} | {o[:, 2].mean():.0%} |",
                  flush=True)


def table_detect(reps):
    cases = [("random answers", lambda n, p, g: noise(n, p, g), "noise"),
             ("two traits r=0, halves", lambda n, p, g: two_traits(n, p, g, 0.0), "two"),
             ("two traits r=0.3, halves", lambda n, p, g: two_traits(n, p, g, 0.3), "two"),
             ("two traits r=0.5, halves", lambda n, p, g: two_traits(n, p, g, 0.5), "two"),
             ("two traits r=0.3, 80/20", lambda n, p, g: two_traits(n, p, g, 0.3, 0.8), "two")]
    print("| data | models x items | replicates | fires | as noise | as two traits |")
    print("|---|---|---|---|---|---|")
    for name, make, _ in cases:
        for n, p in SIZES:
            k = max(10, reps_for(n, reps) // 4)
            out = []
            for s in range(k):
                d, _ = verdict(make(n, p, np.random.default_rng([n, p, s, 7, len(name)])), s)
                out.append((not d["one_trait"], Dimensionality.from_dict(d).noise,
                            d["second_dimension"]))
            o = np.array(out, bool)
            print(f"| {name} | {n} x {p} | {k} | {o[:, 0].mean():.0%} | {o[:, 1].mean():.0%} | "
                  f"{o[:, 2].mean():.0%} |", flush=True)


def real_files():
    pats = ["openllm/tiny_*.csv.gz", "openllm/dense_*.csv.gz", "benchpred/*.csv.gz",
            "longbench/longbench_*.csv.gz"]
    return [f for pat in pats for f in sorted(glob.glob(str(DATA / pat)))]


def check_seconds(y, res):
    """The check alone (what calibrate adds), median of 3."""
    ids = [str(i) for i in res.bank.item_ids]
    cols = [int(i[1:]) for i in ids]
    times = []
    for _ in range(3):
        t = time.perf_counter()
        of_calibration(y[:, cols], None, res.bank, res.theta, ids, rng=[0, 13])
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def labelled(y):
    return pd.DataFrame(y, columns=[f"q{j}" for j in range(y.shape[1])])


def table_real():
    print("| matrix | models x items | model | lambda1 / t1 | 2nd raw share | residual share | "
          "verdict | calibrate s | check s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in real_files():
        df = pd.read_csv(f, index_col=0)
        y = df.apply(pd.to_numeric, errors="coerce").to_numpy(float)
        rec, res = verdict(labelled(y))
        ids = [str(i) for i in res.bank.item_ids]
        # the calibration's check again, with the residuals' share recorded even where the
        # raw correlations show no second factor (same seed: the same verdict)
        d = of_calibration(y[:, [int(i[1:]) for i in ids]], None, res.bank, res.theta, ids,
                           rng=[0, 13], residuals="always")
        assert d.one_trait == rec["one_trait"], (f, d, rec)
        word = "one trait" if d.one_trait else "TWO TRAITS" if d.second_dimension else "NOISE"
        print(f"| {Path(f).name.split('.')[0]} | {y.shape[0]} x {y.shape[1]} | {res.model} | "
              f"{d.first / d.threshold:.2f} | {d.second_share:.2f} | {d.residual_share:.2f} | "
              f"{word} | {res.seconds:.2f} | {check_seconds(y, res):.3f} |", flush=True)


def table_cost():
    print("| data | calibrate s (check included) | check s | share |")
    print("|---|---|---|---|")
    y = one_trait(3000, 1000, np.random.default_rng(0))
    for model in ("2pl", "auto"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = calibrate(labelled(y), model=model)
        c = check_seconds(y, res)
        print(f"| 3000 x 1000 binary, {res.model} | {res.seconds:.2f} | {c:.3f} | "
              f"{c / res.seconds:.1%} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", nargs="?", default="all",
                    choices=["false", "detect", "real", "cost", "all"])
    ap.add_argument("--reps", type=int, default=100)
    args = ap.parse_args()
    for name, fn in (("false", lambda: table_false(args.reps)),
                     ("detect", lambda: table_detect(args.reps)),
                     ("real", table_real), ("cost", table_cost)):
        if args.what in (name, "all"):
            print(f"\n### {name}\n")
            fn()


if __name__ == "__main__":
    main()
