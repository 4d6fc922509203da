"""How often a live run's method flips between "design" and "combined" from one answer to the
next, the size of the jumps, and whether the final (50-item) prediction depends on it.

On held-out models of the five BenchPred matrices (../shared/data/benchpred/; interpolation
split, seeds 0-2): the library path of benchmarks/bench_step_coverage.py (Calibrator() on the
source, BenchmarkPredictor(50, chance=C).fit(bank, source, rng=S)), every target asked 50
items by the sequential design from its own Generator (subject_generator(S + 1000, target):
what ``atlas simulate --seed S+1000`` and a live run ask); after every k = 1..50 answers the
prediction from the first k draws (``predict_draws``, as a live session's trajectory).

Per matrix: flips per target (the method differs from the previous step's), the share of
targets with any flip, flips at steps k <= 10 / 11-30 / 31-50, the mean and largest jump of
the point prediction at a flip vs at a step without one (points), and the 50-item MAE and 95%
coverage of targets with and without a flip after step 30; per-step MAE and coverage of the
shown interval at k = 2, 5, 10, 20 and 50. ``--plain-z`` runs the outside test as before the
change (SE_D of Des Raj's variance at every step: the predictor's ``_combine`` without the
answers), for the comparison in benchmarks/results/method_flips.md.

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/study_method_flips.py [--seeds 3]
        [--datasets v2_musr] [--plain-z]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_benchpred as bp  # noqa: E402
import bench_step_coverage as sc  # noqa: E402

from atlascat.predict import estimators as est  # noqa: E402
from atlascat.predict.session import subject_generator  # noqa: E402

BUDGET = 50
AT = (2, 5, 10, 20, 50)


def steps(pred, y, ids, seed: int):
    """(score, outside, z, lower, upper, shown lo, shown hi): arrays targets x 50 steps."""
    tables, _, log_prior = pred._grid()
    gen = [subject_generator(seed + 1000, s) for s in ids]
    d = est.sequential_design(y, tables, log_prior, BUDGET, float(pred.mix), gen,
                              level=pred._level(), share=float(pred.share),
                              dispersion=getattr(pred, "dispersion_", None))
    rows = np.arange(y.shape[0])[:, None]
    cols = {c: [] for c in ("score", "outside", "z", "lower", "upper", "slo", "shi")}
    for k in range(1, BUDGET + 1):
        item = d["item"][:, :k]
        yk = np.full_like(y, np.nan)
        yk[rows, item] = y[rows, item]
        r = pred.predict_draws(yk, item, *(d[c][:, :k] for c in ("q", "f", "f_rest", "g",
                                                                    "g_rest")))
        lo, hi = pred.step_interval(yk, item, r)
        for c, v in (("score", r["score"]), ("outside", r["outside"]), ("z", r["z"]),
                     ("lower", r["lower"]), ("upper", r["upper"]), ("slo", lo),
                     ("shi", hi)):
            cols[c].append(np.asarray(v, float))
    return {c: np.stack(v, axis=1) for c, v in cols.items()}


def run_one(name: str, seed: int) -> pd.DataFrame:
    pred, full, tgt = sc.fitted("binary", name, "interpolation", seed)
    ids = [f"m{i}" for i in tgt]
    y, truth = full[tgt], full[tgt].mean(axis=1)
    s = steps(pred, y, ids, seed)
    out = s["outside"].astype(bool)
    flip = out[:, 1:] != out[:, :-1]                  # flip at step k = 2..50
    jump = 100 * np.abs(np.diff(s["score"], axis=1))
    k = np.arange(2, BUDGET + 1)
    fin, lo, hi = s["score"][:, -1], s["slo"][:, -1], s["shi"][:, -1]
    return pd.DataFrame({
        "matrix": name, "seed": seed, "target": ids,
        "flips": flip.sum(1), "flips_1_10": flip[:, k <= 10].sum(1),
        "flips_11_30": flip[:, (k > 10) & (k <= 30)].sum(1),
        "flips_31_50": flip[:, k > 30].sum(1),
        "outside_steps": out.sum(1), "outside_final": out[:, -1],
        "jump_flip_sum": np.where(flip, jump, 0).sum(1),
        "jump_flip_max": np.where(flip, jump, 0).max(1),
        "jump_noflip_sum": np.where(~flip, jump, 0).sum(1),
        "jump_noflip_max": np.where(~flip, jump, 0).max(1),
        "err50": 100 * np.abs(fin - truth), "hit50": (lo <= truth) & (truth <= hi),
        "z50": s["z"][:, -1],
        **{f"err{k}": 100 * np.abs(s["score"][:, k - 1] - truth) for k in AT},
        **{f"hit{k}": (s["slo"][:, k - 1] <= truth) & (truth <= s["shi"][:, k - 1]) for k in AT},
        **{f"design{k}": out[:, k - 1] for k in AT}})


def summary(res: pd.DataFrame) -> str:
    lines = ["| matrix | targets | flips / target | any flip | flips k<=10 / 11-30 / 31-50 "
             "| mean jump at flip | max jump at flip | mean jump otherwise | outside at 50 "
             "| MAE50 / cov50 (flip after 30) | MAE50 / cov50 (none after 30) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    groups = [(m, g) for m, g in res.groupby("matrix", sort=False)] + [("all", res)]
    for m, g in groups:
        nf = g.flips.sum()
        late = g.flips_31_50 > 0

        def mc(h):
            return (f"{h.err50.mean():.2f} / {h.hit50.mean():.3f} (n={len(h)})"
                    if len(h) else "-")
        lines.append(
            f"| {m} | {len(g)} | {g.flips.mean():.2f} | {(g.flips > 0).mean():.3f} | "
            f"{g.flips_1_10.sum()} / {g.flips_11_30.sum()} / {g.flips_31_50.sum()} | "
            f"{g.jump_flip_sum.sum() / max(nf, 1):.1f} | {g.jump_flip_max.max():.1f} | "
            f"{g.jump_noflip_sum.sum() / (len(g) * (BUDGET - 1) - nf):.2f} | "
            f"{g.outside_final.mean():.3f} | {mc(g[late])} | {mc(g[~late])} |")
    lines += ["", "| k | MAE | coverage (shown) | share outside |", "|---|---|---|---|"]
    lines += [f"| {k} | {res[f'err{k}'].mean():.2f} | {res[f'hit{k}'].mean():.3f} | "
              f"{res[f'design{k}'].mean():.3f} |" for k in AT]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--datasets", default=",".join(bp.NAMES))
    ap.add_argument("--plain-z", action="store_true")
    a = ap.parse_args(argv)
    if a.plain_z:
        from atlascat.predict import BenchmarkPredictor
        combine = BenchmarkPredictor._combine
        BenchmarkPredictor._combine = lambda self, arr, *rest: combine(self, arr)
    res = pd.concat([run_one(n, s) for n in a.datasets.split(",") for s in range(a.seeds)],
                    ignore_index=True)
    tag = "_plain_z" if a.plain_z else ""
    res.to_csv(Path(__file__).resolve().parent / "results" / f"method_flips{tag}.csv",
               index=False)
    print(summary(res))


if __name__ == "__main__":
    main()
