"""How close can a design-based estimate of a benchmark score get from 50 items? A floor, with
an oracle control variate, on BenchPred's protocol (../shared/data/benchpred, both splits).

Every design-unbiased estimator of a target's mean over N items from n drawn items carries the
sampling noise of the residuals y_i - g_i around its control variate g. Here g is an ORACLE no
method has: for target t, the other targets' mean answer on each item (how models like t do on
it, not the source models' view), shifted on the logit scale so that its mean over the items
equals t's true score,

    g_ti = expit(logit(mean_{s != t} y_si) + c_t),   (1/N) sum_i g_ti = (1/N) sum_i y_ti.

The draws, 50 items per target, R replays:

- ``srs``: a simple random sample, the plain mean (BenchPred's random sampling);
- ``srs + oracle``: the difference estimator mean(g) + mean over the sample of (y - g);
- ``pps + oracle (mix m)``: ATLAS's predictor's draw rule (sequential, without replacement,
  q_j = m s_j / sum s + (1 - m) / |R|, s = sqrt(g (1 - g)); atlascat.predict.estimators) with
  g fixed, Des Raj's estimator. m = 0.7 is the predictor's default (0.5 until 2026-11-26's
  evening); 0.9 draws almost only where the oracle is unsure.

Two control variates from the SOURCE models only, each given what no method has, the
target's every answer (so they bound what a control variate of their kind can do):

- ``pps + level, true c (mix 0.7)``: the predictor's level model (the strongest quarter of the
  source models' proportions correct, :func:`~atlascat.predict.estimators.level_logits`)
  shifted to the target's true score, where the predictor estimates the shift from the
  answers so far;
- ``pps + source PCs, fitted (mix 0.7)``: the least-squares fit of the target's answers on
  a constant, that level model and the first 20 principal components of the source models'
  answers (items as rows: any linear function of how the source models answer an item),
  clipped to 0.01-0.99; in-sample, so optimistic.

Reported: MAE in points (mean over targets, seeds and replays), beside the predictor's own
design part (benchmarks/results/benchpred/atlas.csv, ``design_mae``) and the acceptance bound
(the best BenchPred method's MAE, x1.1 in extrapolation; peers.csv). A row whose oracle floor
lies above the bound cannot be met by any design-based estimator with this budget; a
model-based estimator (its error is bias, not sampling noise) can.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_design_floor.py [--reps 100] [--seeds 5]

writes benchmarks/results/benchpred/design_floor.csv and prints a markdown table (about
half an hour on 2 shared cores).
"""
from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.special import expit, logit

from atlascat.predict import estimators as est

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "benchpred"
_spec = importlib.util.spec_from_file_location("bench_benchpred", HERE / "bench_benchpred.py")
bp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bp)


def oracle_control(yt: np.ndarray) -> np.ndarray:
    """g (T, N): the other targets' mean per item, logit-shifted to each target's own score."""
    t = yt.shape[0]
    others = np.clip((yt.sum(0)[None] - yt) / (t - 1), 0.01, 0.99)
    g = np.empty_like(others)
    for r in range(t):
        lo, mean = logit(others[r]), yt[r].mean()
        shift = brentq(lambda c: expit(lo + c).mean() - mean, -30.0, 30.0)
        g[r] = expit(lo + shift)
    return g


def source_controls(ys: np.ndarray, yt: np.ndarray, pcs: int = 20) -> dict:
    """The two source-only control variates of the module docstring, (T, N) each: the level
    model at each target's true score, and the in-sample fit on source PCs + that level."""
    x = est.level_logits(ys, np.nanmean(ys, axis=1))
    level = np.array([expit(x + est.level_start(x, mean)) for mean in yt.mean(1)])
    z = np.nan_to_num(ys - np.nanmean(ys, axis=1, keepdims=True)).T      # items x models
    u = np.linalg.svd(z - z.mean(0), full_matrices=False)[0][:, :pcs]
    fitted = np.empty_like(yt)
    for r in range(yt.shape[0]):
        design = np.column_stack([np.ones(yt.shape[1]), u, level[r]])
        coef = np.linalg.lstsq(design, yt[r], rcond=None)[0]
        fitted[r] = np.clip(design @ coef, 0.01, 0.99)
    return {"level, true c": level, "source PCs, fitted": fitted}


def srs_errors(y: np.ndarray, g: np.ndarray | None, n: int, rng) -> np.ndarray:
    """|estimate - truth| per row for one simple random sample of n items per row."""
    pick = np.argsort(rng.random(y.shape), axis=1)[:, :n]
    r = y if g is None else y - g
    return np.abs(np.take_along_axis(r, pick, 1).mean(1) - r.mean(1))


def pps_errors(y: np.ndarray, g: np.ndarray, n: int, mix: float, rng) -> np.ndarray:
    """|Des Raj estimate - truth| per row for one sequential draw of n items (the predictor's
    rule with the fixed control variate g)."""
    rows_n, n_items = y.shape
    rows = np.arange(rows_n)
    remaining = np.ones(y.shape, dtype=bool)
    cols = {k: np.zeros((rows_n, n)) for k in ("q", "f", "f_rest", "y")}
    for k in range(n):
        q = est.draw_probabilities(g, remaining, mix)
        j = est.draw_items(q, remaining, rng)
        cols["q"][:, k], cols["f"][:, k], cols["y"][:, k] = q[rows, j], g[rows, j], y[rows, j]
        cols["f_rest"][:, k] = np.where(remaining, g, 0.0).sum(1)
        remaining[rows, j] = False
    total, _ = est.des_raj(cols["y"], cols["q"], cols["f"], cols["f_rest"])
    return np.abs(total / n_items - y.mean(1))


def floor_rows(name: str, split: str, seeds: int, reps: int, budget: int) -> dict:
    full = bp.load(name).to_numpy(float)
    errs = {"srs": [], "srs + oracle": [], "pps + oracle (mix 0.5)": [],
            "pps + oracle (mix 0.7)": [], "pps + oracle (mix 0.9)": [],
            "pps + level, true c (mix 0.7)": [], "pps + source PCs, fitted (mix 0.7)": []}
    for seed in range(seeds if split == "interpolation" else 1):  # extrapolation: one split
        src, tgt = bp.split_models(full, split, seed)
        y = full[tgt]
        g = oracle_control(y)
        sources = source_controls(full[src], y)
        rng = np.random.default_rng([seed, 77])
        for _ in range(reps):
            errs["srs"].append(srs_errors(y, None, budget, rng))
            errs["srs + oracle"].append(srs_errors(y, g, budget, rng))
        yy, gg = np.tile(y, (reps, 1)), np.tile(g, (reps, 1))   # the replays as extra rows
        errs["pps + oracle (mix 0.5)"].append(pps_errors(yy, gg, budget, 0.5, rng))
        errs["pps + oracle (mix 0.7)"].append(pps_errors(yy, gg, budget, 0.7, rng))
        errs["pps + oracle (mix 0.9)"].append(pps_errors(yy, gg, budget, 0.9, rng))
        for label, cv in sources.items():
            errs[f"pps + {label} (mix 0.7)"].append(
                pps_errors(yy, np.tile(cv, (reps, 1)), budget, 0.7, rng))
    return {k: 100 * float(np.mean(np.concatenate(v))) for k, v in errs.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--datasets", default=",".join(bp.NAMES))
    a = ap.parse_args(argv)
    peers = pd.read_csv(OUT / "peers.csv")
    best = peers.loc[peers.groupby(["dataset", "split"]).mae.idxmin()].set_index(
        ["dataset", "split"])
    atlas_csv = OUT / "atlas.csv"
    atlas = pd.read_csv(atlas_csv) if atlas_csv.exists() else None
    rows = []
    for name in a.datasets.split(","):
        for split in ("interpolation", "extrapolation"):
            row = {"dataset": name, "split": split,
                   **floor_rows(name, split, a.seeds, a.reps, a.budget)}
            if atlas is not None:
                d = atlas[(atlas.dataset == name) & (atlas.split == split)
                          & (atlas.design == "predictor")]
                row["predictor design part"] = float(d.design_mae.mean())
            b = best.loc[(name, split)]
            row["bound"] = float(b.mae) * (1.0 if split == "interpolation" else 1.1)
            row["bound method"] = bp.PEER_LABEL.get(b.method, b.method)
            rows.append(row)
            print(name, split, {k: round(v, 2) for k, v in row.items()
                                if isinstance(v, float)}, flush=True)
    res = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    res.round(4).to_csv(OUT / "design_floor.csv", index=False)
    cols = [c for c in res.columns if c not in ("dataset", "split", "bound method")]
    print("| data | split | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for _, r in res.iterrows():
        cells = [f"{r[c]:.2f}" for c in cols[:-1]] + [f"{r['bound']:.2f} ({r['bound method']})"]
        print(f"| {r.dataset} | {r.split} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
