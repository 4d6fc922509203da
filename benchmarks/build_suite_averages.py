"""Write ``datasets/data/suites/<suite>_averages.csv``: the leaderboard models' published
averages (0-1) as 201 quantiles, for the percentile of a suite run's predicted average.

The average is the suite's weighted mean of the members' published scores (the Open LLM
Leaderboard v1: the mean of the six), over the models with a valid score on every member (the
same validity rule as the score links' populations). Run::

    PYTHONPATH=src python benchmarks/build_suite_averages.py [--suite openllm-v1]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat.live.build_bank import load_published_scores
from atlascat.suite import load_suite, suite_path

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "openllm"


def published_averages(suite, scores_path) -> pd.Series:
    cols = {m.source or m.name: m.weight for m in suite.members}
    frame = pd.concat({b: load_published_scores(scores_path, b) for b in cols}, axis=1).dropna()
    return frame[list(cols)] @ pd.Series(cols)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="openllm-v1")
    ap.add_argument("--scores", default=str(DATA / "leaderboard_scores.csv.gz"))
    args = ap.parse_args(argv)
    suite = load_suite(args.suite)
    avg = published_averages(suite, args.scores).to_numpy(float)
    q = np.quantile(avg, np.linspace(0, 1, 201))
    out = suite_path(args.suite).with_name(f"{suite.name}_averages.csv")
    pd.DataFrame({"level": np.linspace(0, 100, 201).round(1), "average": q.round(6)}).to_csv(
        out, index=False)
    print(f"{out}: {avg.size} models, median {np.median(avg):.4f}")


if __name__ == "__main__":
    main()
