"""Fit the suite average's pair scale on the held-out pairs of tuning splits, check it on others.

``atlas compare-models`` combines two runs' intervals of the average in quadrature, times the
pair scale ``PAIR_SCALE["average"]`` (:mod:`atlascat.studies.paired`). Each run's interval is
calibrated for single models, so the plain combination (scale 1) covers more or less than 95% of
pairs depending on the split: 94.8-97.7% of the dense held-out pairs on four splits. This script
reads ``bench_suite.py``'s ``suite_scores.csv`` (predictions and the published average) of
the ``--fit`` splits, pools every pair of
their held-out models (whole population: the models users compare), and fits the factor that
covers 95% of them (``bench_paired.fit_scale``); then it reports, for each ``--check`` split,
the pairs' coverage, half-width and share told apart at the shipped scale and at the fitted
one, for the dense held-out models and the whole population.

    PYTHONPATH=src python benchmarks/bench_suite.py --seed 2 --cache DIR \\
        --no-baselines --no-union -o runs/suite2          # and --seed 3 -o runs/suite3
    PYTHONPATH=src python benchmarks/suite_pair_scale.py \\
        --fit runs/suite2 runs/suite3 --check runs/suite0 runs/suite1
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat.studies.paired import PAIR_SCALE
from bench_paired import evaluate_pairs, fit_scale, pair_arrays
from bench_suite import markdown

KEYS = ("true", "a", "lo_a", "hi_a", "b", "lo_b", "hi_b")


def split_pairs(run: Path, dense_only: bool) -> dict:
    """Every pair of one split's held-out models (``suite_scores.csv``)."""
    df = pd.read_csv(Path(run) / "suite_scores.csv")
    if "published_average" not in df:
        raise SystemExit(f"{run}: suite_scores.csv has no published_average column; rerun "
                         "bench_suite.py to write it")
    if dense_only:
        df = df[df["dense"].astype(bool)]
    return pair_arrays(df["published_average"].to_numpy(), df["average"].to_numpy(),
                       df["average_lo"].to_numpy(), df["average_hi"].to_numpy())


def pooled(runs, dense_only) -> dict:
    parts = [split_pairs(r, dense_only) for r in runs]
    return {k: np.concatenate([p[k] for p in parts]) for k in KEYS}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", nargs="+", required=True, help="bench_suite.py output folders")
    ap.add_argument("--check", nargs="*", default=[], help="bench_suite.py output folders")
    args = ap.parse_args(argv)
    scale = fit_scale(pooled(args.fit, False))
    dense = fit_scale(pooled(args.fit, True))
    shipped = PAIR_SCALE["average"]
    print(f"fitted on {', '.join(args.fit)}: {scale:.3f} (whole population; dense held-out "
          f"only: {dense:.3f}); shipped {shipped:.2f}")
    scales = {1.0: "plain", round(scale, 2): "fitted", shipped: "shipped"}  # shipped wins a tie
    rows = []
    for run in args.check:
        for name, only in (("dense held-out", True), ("whole population", False)):
            p = split_pairs(run, only)
            for s, label in scales.items():
                rows.append({"split": run, "models": name, "scale": f"{label} {s:.2f}"}
                            | evaluate_pairs(p, s))
    if rows:
        print(markdown(pd.DataFrame(rows), 3))


if __name__ == "__main__":
    main()
