"""Study (2026-11-29): one more attempt at LongBench's interpolation rows (issue 43), the
library path of ``bench_longbench.py --library`` with variants of the predictor that are not
in benchmarks/results/longbench.md's history. Nothing in src/ changes; each variant is a
subclass of BenchmarkPredictor here.

Variants (``--variant NAME``, several allowed; ``base`` is the shipped predictor):

- ``fixed<k>``: a certainty stratum. k items chosen on the source models (greedy forward
  selection of the items whose answers best predict the score, by the ridge regression's
  leave-one-out error, penalty chosen from regression.PENALTIES at every step) are asked of
  every target first, with inclusion probability 1; the other budget - k are drawn by the
  shipped sequential design from the remaining items. Des Raj's estimator then estimates the
  remaining items' total only (the stratum's total is known), so the design-based interval
  keeps its validity (known inclusion probabilities, t_k conditionally unbiased given the
  stratum and the earlier draws). The IRT posterior, M and the ridge part R use the stratum's
  answers as well: R becomes lasso-like, a regression on items chosen on the source models.
- ``cvw``: the model part's weight between the calibrated IRT prediction G_M and the
  calibrated ridge prediction G_R chosen per bank by the replays' squared error over the
  grid w in {0, .25, .5, .75, 1} (G = w G_M + (1 - w) G_R), with M's replays honest: each
  source model's M from a bank calibrated without it (5-fold cross-fitting).
- ``fixed<k>+cvw``: both.

Decision rule (fixed before measuring): a variant wins only if, with ``--replays 20``, (1) its
summed MAE over the 16 rows is below the shipped predictor's, (2) qmsum's or
passage_retrieval_en's interpolation moves to within its bound against the best peer's
expected MAE (peers_draws.csv: 0.53 PCA, 1.50 lasso) or lcc's interpolation does (2.16)
without another row crossing out of its bound, (3) no row worsens by more than 0.05 points
(2% where the row is below 2.5), (4) every row's coverage stays in 0.90-0.99.

    OPENBLAS_NUM_THREADS=1 nice .venv/bin/python benchmarks/study_longbench_interp.py \
        --variant base --variant fixed10 --replays 20 [--tasks qmsum] [--splits interpolation]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_benchpred import _metrics, replays_of, split_models  # noqa: E402
from bench_longbench import SPLITS, TASKS, cached_bank, load  # noqa: E402

from atlascat.predict import BenchmarkPredictor  # noqa: E402
from atlascat.predict import estimators as est  # noqa: E402
from atlascat.predict import regression  # noqa: E402
from atlascat.responses import ResponseMatrix  # noqa: E402

PEERS = Path(__file__).resolve().parent / "results" / "longbench" / "peers_draws.csv"


def press_ridge(X, s):
    """Min over regression.PENALTIES of the ridge fit's mean squared leave-one-out residual,
    per batch: X (B, S, n) answers, s (S) scores."""
    n_src = X.shape[1]
    Xc = X - X.mean(1, keepdims=True)
    sc = s - s.mean()
    U, d, _ = np.linalg.svd(Xc, full_matrices=False)
    Uy = np.einsum("bsk,s->bk", U, sc)
    d2 = d ** 2
    shrink = d2[:, None, :] / (d2[:, None, :] + regression.PENALTIES[None, :, None])
    fit = np.einsum("bsk,blk->bls", U, shrink * Uy[:, None, :])
    hat = np.einsum("bsk,blk->bls", U ** 2, shrink) + 1.0 / n_src
    resid = (sc[None, None, :] - fit) / np.maximum(1.0 - hat, 1e-9)
    return np.mean(resid ** 2, axis=2).min(axis=1)


def greedy_items(y, s, k):
    """k items by forward selection on the source models' answers y (S x N) and scores s."""
    y = np.where(np.isfinite(y), y, np.nanmean(y, axis=0)[None, :])
    chosen = []
    cand = np.flatnonzero(y.std(0) > 0)
    for _ in range(int(k)):
        rest = np.setdiff1d(cand, chosen)
        X = np.stack([y[:, chosen + [j]] for j in rest])          # (B, S, n)
        chosen.append(int(rest[np.argmin(press_ridge(X, s))]))
    return np.asarray(chosen, int)


def design_fixed(y, tables, log_prior, fixed, budget, mix, rng, level, share, dispersion):
    """est.sequential_design after the ``fixed`` items are asked (posterior, level model and
    the 'asked before' sums start from them; they are never drawn)."""
    p, log_p, log_q = tables
    n_rows = y.shape[0]
    yv = np.nan_to_num(y)
    rows = np.arange(n_rows)
    fx = np.broadcast_to(fixed[None, :], (n_rows, len(fixed)))
    fvalid = np.isfinite(y[:, fixed])
    lp = np.tile(log_prior, (n_rows, 1))
    yf = yv[:, fixed]
    lp += np.where(fvalid, yf, 0.0) @ log_p[:, fixed].T + np.where(fvalid, 1 - yf, 0.0) @ \
        log_q[:, fixed].T
    remaining = np.isfinite(y)
    remaining[:, fixed] = False
    n = int(min(budget - len(fixed), remaining.sum(1).max()))
    out = {k: np.zeros((n_rows, n)) for k in ("q", "f", "f_rest", "g", "g_rest")}
    out["item"] = np.zeros((n_rows, n), dtype=int)
    out["valid"] = np.zeros((n_rows, n), dtype=bool)
    for k in range(n):
        live = remaining.any(1)
        f = est.posterior(lp) @ p
        g = f
        if level is not None:
            done = np.concatenate([fx, out["item"][:, :k]], axis=1)
            ok = np.concatenate([fvalid, out["valid"][:, :k]], axis=1)
            g = est.level_prediction(level, done, yv[rows[:, None], done], ok)
        q = est.draw_probabilities(f, remaining, mix, None if level is None else g, share,
                                   dispersion)
        j = est.draw_items(q, remaining, rng)
        out["item"][:, k] = j
        out["q"][:, k] = np.where(live, q[rows, j], 1.0)
        for name, pred in (("f", f), ("g", g)):
            out[name][:, k] = np.where(live, pred[rows, j], 0.0)
            out[name + "_rest"][:, k] = np.where(remaining, pred, 0.0).sum(1)
        out["valid"][:, k] = live
        remaining[rows, j] = False
        yj = yv[rows, j][:, None]
        lp += np.where(live[:, None], yj * log_p[:, j].T + (1.0 - yj) * log_q[:, j].T, 0.0)
    out["log_post"] = lp
    return out


class Study(BenchmarkPredictor):
    """The shipped predictor with a certainty stratum (n_fixed) and / or the cvw weight."""

    n_fixed = 0
    cvw = False

    def fit(self, bank, source, scores=None, *, rng=None):
        y = source.values
        truth = np.nanmean(y, axis=1)
        self.fixed_ = greedy_items(y, truth, self.n_fixed) if self.n_fixed else None
        self._bank, self._source = bank, source
        super().fit(bank, source, scores, rng=rng)
        return self

    def _replay_arrays(self, y, rng, budget=None, loo_rows=None):
        if self.fixed_ is None:
            return super()._replay_arrays(y, rng, budget, loo_rows)
        budget = int(self.budget if budget is None else budget)
        fixed = self.fixed_
        tables, nodes, log_prior = self._grid()
        level = self._level()
        d = design_fixed(y, tables, log_prior, fixed, budget, float(self.mix), rng, level,
                         float(self.share), getattr(self, "dispersion_", None))
        n_rows = y.shape[0]
        rows = np.broadcast_to(np.arange(n_rows)[:, None], d["item"].shape)
        avail = np.isfinite(y)
        asked = np.zeros(y.shape, dtype=bool)
        asked[rows[d["valid"]], d["item"][d["valid"]]] = True
        fvalid = avail[:, fixed]
        asked[:, fixed] = fvalid
        yv = np.nan_to_num(y)
        y_drawn = np.take_along_axis(yv, d["item"], axis=1)
        g = g_rest = None
        if level is not None:
            g, g_rest = d["g"], d["g_rest"]
        total_b, se_total = est.des_raj(y_drawn, d["q"], d["f"], d["f_rest"], d["valid"], g,
                                        g_rest)
        total = total_b + np.where(fvalid, yv[:, fixed], 0.0).sum(1)
        n_avail = np.maximum(avail.sum(1), 1)
        model, theta = est.model_prediction(y, asked, avail, tables, nodes, d["log_post"])
        design, se = total / n_avail, np.minimum(se_total / n_avail, 1.0)
        items = np.concatenate([np.broadcast_to(fixed[None, :], (n_rows, len(fixed))),
                                d["item"]], axis=1)
        valid = np.concatenate([fvalid, d["valid"]], axis=1)
        out = dict(model=model, design=design, se=se, theta=theta, n=asked.sum(1),
                   item=items, valid=valid)
        if self.ridge_answers_ is not None:
            y_items = np.take_along_axis(yv, items, axis=1)
            out["ridge"] = regression.ridge_scores(
                self._ridge_design(), self.ridge_scores_, items, valid,
                None if loo_rows is not None else y_items, loo_rows)
        return out


def honest_model(pred, bank_fit, source, rng, folds=5):
    """Each source model's replayed M from a bank calibrated without it (cross-fitting)."""
    import warnings

    from atlascat.irt.calibrate import Calibrator

    y = source.values
    n = y.shape[0]
    fold = np.arange(n) % folds
    out = {}
    for f in range(folds):
        keep = fold != f
        sub = ResponseMatrix(y[keep], list(np.asarray(source.subject_ids)[keep]),
                             list(source.item_ids))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bank = Calibrator(dispersion="auto").fit(sub).bank_
        p = pred.__class__(pred.budget, ridge=False)
        p.n_fixed, p.cvw = pred.n_fixed, False
        p.fixed_ = pred.fixed_
        p.item_ids_ = pred.item_ids_
        from atlascat.predict.predictor import _full_params

        p.a_, p.b_, p.c_, p.u_ = _full_params(bank, list(pred.item_ids_), np.nanmean(y, 0))
        p.dispersion_ = pred.dispersion_
        p.level_x_, p.level_c0_ = pred.level_x_, pred.level_c0_
        p.score_map_ = None
        p.ridge_answers_ = None
        rows = np.repeat(np.flatnonzero(~keep), int(pred.n_replays))
        arr = p._replay_arrays(y[rows], rng)
        ridge = regression.ridge_scores(pred._ridge_design(), pred.ridge_scores_, arr["item"],
                                        arr["valid"], None, rows)
        out[f] = (rows, arr["model"], ridge)
    return tuple(np.concatenate([v[i] for v in out.values()]) for i in range(3))


def make(variant, budget, seed, bank, source):
    p = Study(budget)
    p.n_fixed = int(variant.split("+")[0][5:]) if variant.startswith("fixed") else 0
    p.cvw = variant.endswith("cvw")
    p.fit(bank, source, rng=seed)
    if p.cvw:
        from atlascat.predict.predictor import _line

        truth = np.nanmean(source.values, axis=1)
        rng = np.random.default_rng([seed, 7])
        rows, m_h, r_h = honest_model(p, bank, source, rng)
        t_h = truth[rows]
        reps = np.repeat(np.arange(source.n_subjects), int(p.n_replays))
        arr = p._replay_arrays(source.values[reps], np.random.default_rng([seed, 8]),
                               loo_rows=reps)
        a_m, b_m = _line(m_h, t_h)
        a_r, b_r = _line(r_h, t_h)
        gm, gr = a_m + b_m * m_h, a_r + b_r * r_h
        ws = np.linspace(0, 1, 5)
        err = [np.mean((w * gm + (1 - w) * gr - t_h) ** 2) for w in ws]
        w = float(ws[int(np.argmin(err))])
        # keep the shipped lines (in-sample M) but the chosen weight
        (am0, bm0), (ar0, br0) = _line(arr["model"], truth[reps]), _line(arr["ridge"],
                                                                           truth[reps])
        p.alpha_ = w * am0 + (1 - w) * ar0
        p.beta_, p.gamma_ = w * bm0, (1 - w) * br0
        g = p.alpha_ + p.beta_ * arr["model"] + p.gamma_ * arr["ridge"]
        p.tau2_ = float(max(np.mean((truth[reps] - g) ** 2), p.min_tau ** 2))
        p.cvw_w_ = w
    return p


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--out", default=None, help="CSV of the rows (task, split, variant)")
    a = ap.parse_args(argv)
    variants = a.variant or ["base"]
    rows = []
    t_all = time.time()
    for task in a.tasks.split(","):
        df = load(task)
        full = df.to_numpy(float)
        ids = [str(c) for c in df.columns]
        for split in a.splits.split(","):
            for v in variants:
                t0, parts, extra = time.time(), [], []
                for seed in range(a.seeds):
                    src, tgt = split_models(full, split, seed)
                    source = ResponseMatrix(full[src], [f"m{i}" for i in src], ids)
                    targets = ResponseMatrix(full[tgt], [f"m{i}" for i in tgt], ids)
                    bank = cached_bank(task, df, split, seed)
                    pred = make(v, 50, seed, bank, source)
                    _, p = replays_of(pred, targets, seed, a.replays)
                    truth = pd.Series(full[tgt].mean(axis=1), index=[f"m{i}" for i in tgt])
                    parts.append(_metrics(p, truth))
                    extra.append(getattr(pred, "cvw_w_", np.nan))
                d = pd.DataFrame(parts)
                r = {"task": task, "split": split, "variant": v, "mae": d.mae.mean(),
                     "coverage": d.n_hits.sum() / d.n_targets.sum(), "width": d.width.mean(),
                     "design_mae": d.design_mae.mean(), "model_mae": d.model_mae.mean(),
                     "outside": d.outside.mean(), "w": np.nanmean(extra) if v.endswith(
                         "cvw") else np.nan}
                rows.append(r)
                print(f"{task:21s} {split:13s} {v:12s} MAE {r['mae']:5.2f} cov "
                      f"{r['coverage']:.3f} D {r['design_mae']:5.2f} M {r['model_mae']:5.2f}"
                      f" w {r['w']:.2f} ({time.time() - t0:.0f}s)", flush=True)
    res = pd.DataFrame(rows)
    if a.out:
        res.round(4).to_csv(a.out, index=False)
    print(res.pivot_table(index=["task", "split"], columns="variant", values="mae",
                          sort=False).round(2).to_string())
    print(res.groupby("variant").mae.sum().round(2).to_string())
    print(f"total {time.time() - t_all:.0f}s")


if __name__ == "__main__":
    main()
