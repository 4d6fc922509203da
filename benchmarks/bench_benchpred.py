"""BenchPred's protocol (Zhang, Dorner, Hardt 2025) on every matrix of ../shared/data/benchpred
through atlascat.predict, beside BenchPred's own methods (benchmarks/results/benchpred/peers.csv,
run from their public code in a scratch environment; see the README there).

Protocol: budget 50 items; interpolation = a random 25% of the models are the targets (numpy
RandomState(seed).permutation, as their main.py), the rest the source; extrapolation = the
source is the weakest 50% of models by full accuracy, the targets the strongest 30%; seeds 0-4.
Per seed: calibrate the source with the library defaults (Calibrator()), fit BenchmarkPredictor
(budget 50) on the source, replay every target's real answers (a fresh random sample of 50 items
per target, Generator(seed + 1000)). The truth is each target's mean over all items.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_benchpred.py [--seeds 5] [--write-docs]

writes benchmarks/results/benchpred/atlas.csv (one row per dataset, split, seed) and, with
--write-docs, the table of docs/your_benchmark.md's section "## Study: models unlike the
source models". A few minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat.irt.calibrate import Calibrator
from atlascat.predict import BenchmarkPredictor
from atlascat.responses import ResponseMatrix

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "benchpred"
OUT = ROOT / "benchmarks" / "results" / "benchpred"
DOC = ROOT / "docs" / "your_benchmark.md"
NAMES = ["v2_ifeval", "v2_musr", "v2_arc_challenge", "helm_mmlu", "helm_med_qa"]
SECTION = "## Study: models unlike the source models"
PEER_LABEL = {"random_sampling": "random", "random_sampling_and_learn": "random + ridge",
              "aipw": "AIPW", "anchor_points_weighted": "anchor points (weighted)",
              "anchor_points_predictor": "anchor points (predictor)", "pca": "PCA"}


def load(name: str) -> pd.DataFrame:
    df = pd.read_csv(DATA / f"{name}.csv.gz", index_col=0)
    return df[df.mean(axis=1) > 1e-8]          # as BenchPred's get_scores


def split_models(full: np.ndarray, split: str, seed: int):
    """BenchPred's main.py: source and target row indices."""
    n = len(full)
    if split == "interpolation":
        tgt = np.random.RandomState(seed).permutation(n)[: int(0.25 * n)]
        return np.setdiff1d(np.arange(n), tgt), tgt
    order = np.argsort(full.mean(axis=1), kind="stable")
    return order[: int(0.5 * n)], order[-int(0.3 * n):]


def run_one(df: pd.DataFrame, split: str, seed: int, budget: int) -> dict:
    full = df.to_numpy(float)
    ids = [str(c) for c in df.columns]
    src, tgt = split_models(full, split, seed)
    # row numbers as ids: a few model names repeat in the v2 matrices
    source = ResponseMatrix(full[src], [f"m{i}" for i in src], ids)
    targets = ResponseMatrix(full[tgt], [f"m{i}" for i in tgt], ids)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bank = Calibrator().fit(source).bank_
    pred = BenchmarkPredictor(budget).fit(bank, source, rng=seed)
    r = pred.replay(targets, rng=seed + 1000)
    truth = r.full_score.to_numpy()
    return {"mae": 100 * np.abs(r.score - truth).mean(),
            "coverage": ((truth >= r.lower) & (truth <= r.upper)).mean(),
            "width": 100 * (r.upper - r.lower).mean(),
            "items_max": int(r.n_items.max()), "items_mean": float(r.n_items.mean()),
            "design_mae": 100 * np.abs(r.design_score - truth).mean(),
            "model_mae": 100 * np.abs(r.model_score - truth).mean(),
            "outside": float((r.method == "design").mean()), "n_targets": len(r),
            "n_source": len(src), "n_hits": int(((truth >= r.lower) & (truth <= r.upper)).sum())}


def table(res: pd.DataFrame, peers: pd.DataFrame) -> str:
    best = peers.loc[peers.groupby(["dataset", "split"]).mae.idxmin()].set_index(["dataset", "split"])
    g = res.groupby(["dataset", "split"], sort=False)
    agg = g.agg(mae=("mae", "mean"), hits=("n_hits", "sum"), n=("n_targets", "sum"),
                items=("items_max", "max"), design=("design_mae", "mean"),
                model=("model_mae", "mean"), outside=("outside", "mean"), width=("width", "mean"))
    lines = ["| data | split | ATLAS MAE | 95% coverage | width | items (max) | design part only | "
             "IRT only | best BenchPred method | ATLAS vs best |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (name, split), row in agg.iterrows():
        b = best.loc[(name, split)]
        ratio = row.mae / b.mae
        bound = 1.0 if split == "interpolation" else 1.1
        verdict = "meets" if ratio <= bound else f"**loses** (x{ratio:.2f}; bound x{bound:.1f})"
        lines.append(f"| {name} | {split} | {row.mae:.2f} | {row.hits / row.n:.3f} | "
                     f"{row.width:.1f} | {row['items']} | {row.design:.2f} | {row.model:.2f} | "
                     f"{b.mae:.2f} ({PEER_LABEL.get(b.method, b.method)}) | {verdict} |")
    return "\n".join(lines)


def write_docs(text: str) -> None:
    body = DOC.read_text(encoding="utf-8") if DOC.exists() else "# Your own benchmark\n"
    head = body.split(SECTION)[0].rstrip() + "\n\n"
    DOC.write_text(head + SECTION + "\n\n" + text + "\n", encoding="utf-8")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--datasets", default=",".join(NAMES))
    ap.add_argument("--write-docs", action="store_true")
    a = ap.parse_args(argv)
    rows = []
    for name in a.datasets.split(","):
        df = load(name)
        for split in ("interpolation", "extrapolation"):
            t0 = time.time()
            for seed in range(a.seeds):
                rows.append({"dataset": name, "split": split, "seed": seed,
                             **run_one(df, split, seed, a.budget)})
            last = pd.DataFrame(rows[-a.seeds:])
            print(f"{name:17s} {split:13s} MAE {last.mae.mean():5.2f}  coverage "
                  f"{last.n_hits.sum() / last.n_targets.sum():.3f}  items <= {last.items_max.max()}"
                  f"  ({time.time() - t0:.0f}s)", flush=True)
    res = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    res.round(4).to_csv(OUT / "atlas.csv", index=False)
    text = table(res, pd.read_csv(OUT / "peers.csv"))
    print(text)
    if a.write_docs:
        (OUT / "table.md").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
