"""A suite run's member benchmarks compared two at a time: which pair scale covers 95%.

``atlas compare-models`` on two suite runs gives each benchmark's difference with the two
member intervals combined in quadrature. A shipped bank's ``PAIR_SCALE`` (0.72-0.85) was fitted
on two single-bank adaptive tests, whose intervals cover 97% of single models; a suite member's
cover about 95% (``bench_suite.py``'s per-benchmark table). This script reads
``bench_suite.py``'s ``suite_scores.csv`` of each split, forms every pair of its held-out models
(whole population) per benchmark, and reports the pairs' coverage and median half-width at the
bank's scale and at 1.0, and the scale that would cover 95% (``bench_paired.fit_scale``).

    PYTHONPATH=src python benchmarks/bench_suite.py --seed 0 --cache DIR \\
        --no-baselines --no-union -o runs/suite0          # and --seed 1 -o runs/suite1
    PYTHONPATH=src python benchmarks/suite_member_pairs.py runs/suite0 runs/suite1
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat.live.build_bank import load_published_scores
from atlascat.studies.paired import PAIR_SCALE
from bench_paired import evaluate_pairs, fit_scale, pair_arrays
from bench_suite import markdown
from build_suite import DATA

BENCHMARKS = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")


def member_rows(run: Path) -> list[dict]:
    df = pd.read_csv(Path(run) / "suite_scores.csv")
    rows = []
    for b in BENCHMARKS:
        s = load_published_scores(DATA / "leaderboard_scores.csv.gz", b)
        s = s.reindex(df["subject_id"].astype(str)).to_numpy(float)
        s = s / 100 if np.nanmax(s) > 1.5 else s
        m = np.isfinite(s)
        p = pair_arrays(s[m], *(df[c].to_numpy()[m] for c in (b, f"{b}_lo", f"{b}_hi")))
        bank, plain = evaluate_pairs(p, PAIR_SCALE[b]), evaluate_pairs(p, 1.0)
        ok = (p["sd_a"] > 0) | (p["sd_b"] > 0)   # two intervals of width 0: no ratio
        fitted = fit_scale({k: v[ok] for k, v in p.items()})
        rows.append({"split": Path(run).name, "benchmark": b, "pairs": bank["pairs"],
                     "bank scale": PAIR_SCALE[b], "coverage": bank["coverage"],
                     "half-width": bank["median_halfwidth"], "coverage at 1.0": plain["coverage"],
                     "half-width at 1.0": plain["median_halfwidth"], "95% scale": fitted})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="bench_suite.py output folders")
    args = ap.parse_args(argv)
    print(markdown(pd.DataFrame([r for run in args.runs for r in member_rows(run)]), digits=3))


if __name__ == "__main__":
    main()
