"""Would two models asked the SAME items compare more sharply? A study of a paired design for
the benchmark predictor (docs/your_benchmark.md, "Two models on the same items").

`atlas compare-models` takes two separate runs: each model's predicted score and 95% interval,
combined in quadrature (atlascat.studies.paired; pair scale 1 on a bank folder). The design
studied here asks the second model exactly the items drawn for the first, in their order, with
their draw probabilities q_k (which depend on the first model's earlier answers only), and
estimates the difference of the two totals by Des Raj's estimator on the per-draw differences

    d_k = t_k(A) - t_k(B),
    t_k(X) = sum_{asked before k} y_X + sum_{R_k} h_X + (y_Xj - h_Xj) / q_j,

h_X each model's own control variate (the predictor's IRT and level models, mixed as in
atlascat.predict.estimators.des_raj_terms, from its own earlier answers): unbiased for the
difference whatever the models, with the variance sum (d_k - mean)^2 / (n (n - 1))
(estimators.terms_mean), valid by design. It gains over separate runs where the two models
answer most items alike (checkpoints, merges).

Protocol: each benchpred matrix (v2 matrices: a duplicated model keeps its first row), the
interpolation split of seed 0 (a random 25% of the models are the targets), the predictor
fitted on the rest (`BenchmarkPredictor(50)`, the benchmark's chance level); every pair of
targets whose full scores lie within 5 points (at most 1,000 pairs, drawn at random); 3
replays. Reported per matrix: how many close pairs there are, and how many of them answer at
least 90% of the items alike; the pairs' median agreement (share of items answered alike),
the median 95% half-width and MAE of the difference (points) and its coverage, for separate
runs and for the same items.

    OPENBLAS_NUM_THREADS=1 python benchmarks/study_paired_same_items.py

(about a minute on 2 shared cores; prints a markdown table).
"""
from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np

from atlascat.irt.calibrate import Calibrator
from atlascat.predict import BenchmarkPredictor
from atlascat.predict import estimators as est
from atlascat.responses import ResponseMatrix

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_benchpred", HERE / "bench_benchpred.py")
bp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bp)


def follow(pred, y, items, valid):
    """The control variates f, g and their sums over the items not asked yet, for rows ``y``
    asked the given item sequence (each row from its own earlier answers)."""
    (p, log_p, log_q), _, log_prior = pred._grid()
    rows = np.arange(y.shape[0])
    lp = np.tile(log_prior, (y.shape[0], 1))
    remaining = np.ones(y.shape, dtype=bool)
    out = {k: np.zeros(items.shape) for k in ("f", "f_rest", "g", "g_rest")}
    for k in range(items.shape[1]):
        f = est.posterior(lp) @ p
        done = items[:, :k]
        g = est.level_prediction(pred._level(), done, y[rows[:, None], done], valid[:, :k])
        j = items[:, k]
        for name, h in (("f", f), ("g", g)):
            out[name][:, k] = h[rows, j]
            out[name + "_rest"][:, k] = np.where(remaining, h, 0.0).sum(1)
        remaining[rows, j] = False
        lp += np.where(y[rows, j][:, None] > 0.5, log_p[:, j].T, log_q[:, j].T)
    return out


def study(name: str, reps: int = 3, max_pairs: int = 1000) -> dict:
    df = bp.load(name)
    full, ids = df.to_numpy(float), [str(c) for c in df.columns]
    src, tgt = bp.split_models(full, "interpolation", 0)
    source = ResponseMatrix(full[src], [f"m{i}" for i in src], ids)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bank = Calibrator().fit(source).bank_
    pred = BenchmarkPredictor(50, chance=bp.CHANCE[name]).fit(bank, source, rng=0)
    targets = ResponseMatrix(full[tgt], [f"t{i}" for i in tgt], ids)
    y = targets.aligned_values(pred.item_ids_, extra="ignore")
    truth = full[tgt].mean(1)
    a, b = np.triu_indices(len(tgt), 1)
    close = np.flatnonzero(np.abs(truth[a] - truth[b]) <= 0.05)
    alike = np.nanmean(y[a[close]] == y[b[close]], axis=1)
    n_close, n_alike = len(close), int((alike >= 0.9).sum())
    rng = np.random.default_rng(0)
    if len(close) > max_pairs:
        close = np.sort(rng.choice(close, max_pairs, replace=False))
    a, b = a[close], b[close]
    diff = truth[a] - truth[b]
    agree = np.nanmean(y[a] == y[b], axis=1)
    tables, _, log_prior = pred._grid()
    n_items = np.isfinite(y).sum(1)
    sep, same = {"hw": [], "err": [], "cov": []}, {"hw": [], "err": [], "cov": []}
    for r in range(reps):
        one = pred.replay(targets, rng=[r, 1])
        score, sd = one["score"].to_numpy(), (one["score_hi"] - one["score_lo"]).to_numpy() / 3.92
        sd_d = np.sqrt(sd[a] ** 2 + sd[b] ** 2)
        err = score[a] - score[b] - diff
        sep["hw"].append(1.96 * sd_d), sep["err"].append(err)
        sep["cov"].append(np.abs(err) <= 1.96 * sd_d)
        d = est.sequential_design(y[a], tables, log_prior, pred.budget, pred.mix,
                                  np.random.default_rng([r, 2]), level=pred._level(),
                                  share=pred.share)
        items, q, valid = d["item"], d["q"], d["valid"]
        ya = np.nan_to_num(np.take_along_axis(y[a], items, 1))
        yb = np.nan_to_num(np.take_along_axis(y[b], items, 1))
        cb = follow(pred, y[b], items, valid)
        dk = (est.des_raj_terms(ya, q, d["f"], d["f_rest"], valid, d["g"], d["g_rest"])
              - est.des_raj_terms(yb, q, cb["f"], cb["f_rest"], valid, cb["g"], cb["g_rest"]))
        est_d, se = est.terms_mean(dk / n_items[a][:, None], valid)
        err = est_d - diff
        same["hw"].append(1.96 * se), same["err"].append(err)
        same["cov"].append(np.abs(err) <= 1.96 * se)
    out = {"data": name, "close pairs": n_close, "of them alike on 90%": n_alike,
           "pairs": len(a), "agreement": float(np.median(agree))}
    for label, res in (("separate", sep), ("same items", same)):
        out[f"{label}: half-width"] = 100 * float(np.median(np.concatenate(res["hw"])))
        out[f"{label}: MAE"] = 100 * float(np.mean(np.abs(np.concatenate(res["err"]))))
        out[f"{label}: coverage"] = float(np.mean(np.concatenate(res["cov"])))
    return out


def main() -> None:
    rows = [study(name) for name in bp.NAMES]
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c])
                                for c in cols) + " |")


if __name__ == "__main__":
    main()
