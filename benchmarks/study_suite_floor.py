"""The floor of the Open LLM Leaderboard suite (issue 18): how well can the answers to EVERY item
of the six banks predict the published scores at all?

The suite test's held-out MAE of the leaderboard average barely moves with more items (0.71 at
150 items, 0.69 at 200, seed 0), which points at the link from answers to published scores.
This study takes the seed-0 split of ``bench_suite.py`` (``split``: the dense held-out models,
those in all six dense matrices; calibration = every other model), the six banks of the rebuilt
suite (``--cache``, as ``bench_suite.py`` writes it; rebuilt here when missing), answers every
bank item (no adaptivity) and predicts the held-out models' published scores and their average
with predictors fitted on the calibration models only:

- ``line on bank accuracy``: per benchmark a straight line from the share of bank items right;
- ``link``: each member's ScoreLink at the whole-bank EAP theta (``predict_many``), without and
  with its answer corrections (all items asked: the ``anchors`` correction); the average is the
  mean of the six; ``link + joint stacking``: a :class:`SuiteLink` (the joint link's linear
  stacking) refitted on the calibration models' whole-bank link predictions;
- ``ridge answers``: per benchmark, ridge regression from the bank's 0/1 answer vector to its
  published score; for the average, ridge from the six banks' answers concatenated to the
  average directly (and the mean of the six per-benchmark ridges);
  ``ridge residual``: ridge of the link's residual (score - link curve) on the answer residuals
  y - P(theta) (a whole-bank answer correction);
- ``stack``: ridge on [six whole-bank thetas, six link predictions] (a small stacking).

Ridge penalties by 5-fold cross-validation on the calibration rows (log grid). Missing answers
(calibration rows; a few held-out ones) are imputed with the item's IRT probability at the
model's whole-bank EAP theta (``--impute model``, default) or the item's calibration mean
(``--impute mean``). A benchmark's calibration rows: models of the calibration set in its
matrix with >= 90% of the bank answered and a published score; the average's (and the
stacking's): those rows for all six benchmarks. Errors in points (0-100), MAE and RMSE on the
dense held-out models (and, for the average, a bootstrap 90% interval of the MAE).

``--all-dense-items`` adds an oracle beyond the banks: ridge from every item of the dense
matrices (more items than the banks hold), calibration on the dense-matrix models.

Run::

    PYTHONPATH=src:benchmarks OPENBLAS_NUM_THREADS=1 python benchmarks/study_suite_floor.py \
        --seed 0 --cache /tmp/suite_runs/cache
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat.irt.ability import eap
from atlascat.live.build_bank import BENCHMARKS
from atlascat.suite.link import SuiteLink
from bench_suite import (answers_for, markdown, populations_and_scores, rebuilt_suite, split,
                         training_responses)

ALPHAS = np.logspace(-2, 5, 29)


def ridge_cv(X, y, alphas=ALPHAS, folds=5, seed=0, standardize=False):
    """Ridge with the penalty chosen by k-fold CV (MSE); returns a predict function and the
    chosen alpha. Intercept unpenalized (centering); ``standardize`` scales columns to SD 1."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    mu, sd = X.mean(0), (X.std(0) if standardize else np.ones(X.shape[1]))
    sd = np.where(sd > 1e-12, sd, 1.0)
    Z = (X - mu) / sd
    fold = np.random.default_rng([seed, 99]).permutation(len(y)) % folds
    err = np.zeros(len(alphas))
    for f in range(folds):
        tr, te = fold != f, fold == f
        zm, ym = Z[tr].mean(0), y[tr].mean()
        U, s, Vt = np.linalg.svd(Z[tr] - zm, full_matrices=False)
        uy = U.T @ (y[tr] - ym)
        P = (Z[te] - zm) @ Vt.T
        for k, a in enumerate(alphas):
            pred = ym + P @ (s / (s ** 2 + a) * uy)
            err[k] += np.sum((y[te] - pred) ** 2)
    a = float(alphas[int(np.argmin(err))])
    ym = y.mean()
    U, s, Vt = np.linalg.svd(Z, full_matrices=False)
    w = Vt.T @ (s / (s ** 2 + a) * (U.T @ (y - ym)))
    return (lambda Xn: ym + ((np.asarray(Xn, float) - mu) / sd) @ w), a


def load(seed, test_size, cache):
    populations, scores = populations_and_scores()
    t_dense, _, train_ids = split(seed, test_size, populations, scores)
    suite, _ = rebuilt_suite(seed, test_size, cache, training_responses(populations, train_ids),
                             scores)
    return populations, scores, t_dense, train_ids, suite.members


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--test-size", type=float, default=0.2)
    ap.add_argument("--cache", default=None, help="bench_suite.py's cache folder")
    ap.add_argument("--impute", choices=("model", "mean"), default="model")
    ap.add_argument("--all-dense-items", action="store_true")
    ap.add_argument("-o", "--output", default=None, help="write the tables (markdown) here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    populations, scores, t_dense, train_ids, members = load(args.seed, args.test_size,
                                                           args.cache)
    test = pd.Index(t_dense)
    train = pd.Index(train_ids)
    B = len(BENCHMARKS)
    truth_te = np.column_stack([scores[b].reindex(test).to_numpy(float) for b in BENCHMARKS])
    # per benchmark: calibration / held-out answers (imputed), theta, link predictions
    per = {}
    for m in members:
        rm = populations[m.name]
        d = {}
        for part, want in (("tr", train), ("te", test)):
            Y = answers_for(rm, m.bank, want)
            enough = np.isfinite(Y).mean(1) >= 0.9
            th, se = np.full(len(want), np.nan), np.full(len(want), np.nan)
            th[enough], se[enough] = eap(Y[enough], m.bank)
            P = np.full(Y.shape, np.nan)
            P[enough] = m.bank.probability(th[enough])
            d[part] = {"Y": Y, "ok": enough, "theta": th, "se": se, "P": P}
        colmean = np.nanmean(d["tr"]["Y"][d["tr"]["ok"]], 0)
        for part in ("tr", "te"):
            D = d[part]
            fill = D["P"] if args.impute == "model" else np.broadcast_to(colmean, D["Y"].shape)
            D["Yi"] = np.where(np.isfinite(D["Y"]), D["Y"], fill)
            ok = D["ok"]
            n = len(ok)
            for key in ("g", "gc"):
                D[key] = np.full(n, np.nan)
            asked = np.isfinite(D["Y"][ok])
            D["g"][ok] = m.link.predict_many(D["theta"][ok], D["se"][ok])[0]
            D["gc"][ok] = m.link.predict_many(D["theta"][ok], D["se"][ok], asked=asked,
                                              y=D["Y"][ok])[0]
        d["s_tr"] = scores[m.name].reindex(train).to_numpy(float)
        per[m.name] = d
    assert all(per[b]["te"]["ok"].all() for b in BENCHMARKS), "held-out rows lack answers"
    rows_all = np.all([per[b]["tr"]["ok"] & np.isfinite(per[b]["s_tr"]) for b in BENCHMARKS], 0)
    print(f"held-out {len(test)} dense models; calibration rows per benchmark "
          f"{[int((per[b]['tr']['ok'] & np.isfinite(per[b]['s_tr'])).sum()) for b in BENCHMARKS]}"
          f", with all six {int(rows_all.sum())}", flush=True)
    S_tr = np.column_stack([per[b]["s_tr"] for b in BENCHMARKS])
    avg_tr = S_tr.mean(1)
    preds, alphas = {}, {}

    def put(name, b, p):
        preds.setdefault(name, np.full(truth_te.shape, np.nan))[:, b] = p

    for j, b in enumerate(BENCHMARKS):
        tr, te = per[b]["tr"], per[b]["te"]
        r = tr["ok"] & np.isfinite(per[b]["s_tr"])
        s = per[b]["s_tr"][r]
        acc = lambda D: np.nanmean(D["Y"], 1)  # noqa: E731
        coef = np.polyfit(acc(tr)[r], s, 1)
        put("line on bank accuracy", j, np.polyval(coef, acc(te)))
        put("link (no corrections)", j, te["g"])
        put("link (answer corrections)", j, te["gc"])
        f, a = ridge_cv(tr["Yi"][r], s, seed=j)
        put("ridge answers", j, f(te["Yi"]))
        alphas[f"ridge answers {b}"] = a
        f, a = ridge_cv(tr["Yi"][r] - tr["P"][r], s - tr["g"][r], seed=j)
        put("ridge residual (link + whole-bank correction)", j, te["g"] + f(te["Yi"] - te["P"]))
        alphas[f"ridge residual {b}"] = a
    # the stacking models (rows with all six)
    feats = lambda part, key: np.column_stack(  # noqa: E731
        [per[b][part][key] for b in BENCHMARKS])
    G_tr, G_te = feats("tr", "g")[rows_all], feats("te", "g")
    joint = SuiteLink.fit(G_tr, np.zeros((len(G_tr), B, B)), S_tr[rows_all])
    preds["link + joint stacking (SuiteLink)"] = joint.apply(G_te)
    Gc_tr, Gc_te = feats("tr", "gc")[rows_all], feats("te", "gc")
    joint_c = SuiteLink.fit(Gc_tr, np.zeros((len(Gc_tr), B, B)), S_tr[rows_all])
    preds["link (corrections) + joint stacking"] = joint_c.apply(Gc_te)
    X_tr = np.hstack([feats("tr", "theta")[rows_all], G_tr, Gc_tr])
    X_te = np.hstack([feats("te", "theta"), G_te, Gc_te])
    avg_direct = {}
    for j, b in enumerate(BENCHMARKS):
        f, a = ridge_cv(X_tr, S_tr[rows_all, j], seed=10 + j, standardize=True)
        put("stack [theta, link, link+corr]", j, f(X_te))
    f, a = ridge_cv(X_tr, avg_tr[rows_all], seed=20, standardize=True)
    avg_direct["stack [theta, link, link+corr] -> average directly"] = f(X_te)
    alphas["stack average"] = a
    Yall_tr = np.hstack([per[b]["tr"]["Yi"] for b in BENCHMARKS])[rows_all]
    Yall_te = np.hstack([per[b]["te"]["Yi"] for b in BENCHMARKS])
    f, a = ridge_cv(Yall_tr, avg_tr[rows_all], seed=21)
    avg_direct["ridge all answers -> average"] = f(Yall_te)
    alphas["ridge all answers -> average"] = a
    f, a = ridge_cv(np.hstack([Yall_tr, X_tr]), avg_tr[rows_all], seed=22, standardize=True)
    avg_direct["ridge all answers + stack features -> average"] = f(np.hstack([Yall_te, X_te]))
    alphas["ridge all answers + stack -> average"] = a
    # residual of the mean link (with corrections) on all answers' residuals
    Eall_tr = np.hstack([per[b]["tr"]["Yi"] - per[b]["tr"]["P"] for b in BENCHMARKS])[rows_all]
    Eall_te = np.hstack([per[b]["te"]["Yi"] - per[b]["te"]["P"] for b in BENCHMARKS])
    base_tr, base_te = joint_c.apply(Gc_tr).mean(1), joint_c.apply(Gc_te).mean(1)
    f, a = ridge_cv(Eall_tr, avg_tr[rows_all] - base_tr, seed=23)
    avg_direct["joint stacking (corr.) + ridge of all answer residuals"] = base_te + f(Eall_te)
    alphas["joint + residual ridge"] = a
    if args.all_dense_items:
        from atlascat import catalogue
        tr_d, te_d, ok_d = [], [], np.ones(len(train), bool)
        for b in BENCHMARKS:
            rm = catalogue.load_responses(b)
            ids = pd.Index(rm.subject_ids.astype(str))
            v = rm.values.astype(float)
            cm = np.nanmean(v, 0)
            v = np.where(np.isfinite(v), v, cm)
            ptr, pte = ids.get_indexer(train), ids.get_indexer(test)
            assert (pte >= 0).all()
            ok_d &= ptr >= 0
            tr_d.append(np.where((ptr >= 0)[:, None], v[np.maximum(ptr, 0)], np.nan))
            te_d.append(v[pte])
        r = ok_d & np.isfinite(S_tr).all(1)
        Xd_tr, Xd_te = np.hstack(tr_d)[r], np.hstack(te_d)
        f, a = ridge_cv(Xd_tr, avg_tr[r], seed=24)
        avg_direct[f"oracle: ridge all dense-matrix items ({Xd_tr.shape[1]}) -> average"] = f(Xd_te)
        alphas["oracle dense"] = a
        print(f"dense-matrix oracle: {int(r.sum())} calibration models, {Xd_tr.shape[1]} items",
              flush=True)

    avg_te = truth_te.mean(1)
    rng = np.random.default_rng(0)
    boot = rng.integers(0, len(avg_te), (2000, len(avg_te)))

    def stats(p, t):
        e = 100 * np.abs(p - t)
        return float(np.mean(e)), float(np.sqrt(np.mean(e ** 2)))

    rows = []
    for name, P in list(preds.items()) + [(k, None) for k in avg_direct]:
        a = P.mean(1) if P is not None else avg_direct[name]
        mae, rmse = stats(a, avg_te)
        e = 100 * np.abs(a - avg_te)
        lo, hi = np.quantile(e[boot].mean(1), [0.05, 0.95])
        row = {"predictor": name, "avg_mae": mae, "avg_mae_90%": f"{lo:.2f}-{hi:.2f}",
               "avg_rmse": rmse}
        for j, b in enumerate(BENCHMARKS):
            row[f"{b}_mae"] = stats(P[:, j], truth_te[:, j])[0] if P is not None else np.nan
        for j, b in enumerate(BENCHMARKS):
            row[f"{b}_rmse"] = stats(P[:, j], truth_te[:, j])[1] if P is not None else np.nan
        rows.append(row)
    table = pd.DataFrame(rows)
    short = table[["predictor", "avg_mae", "avg_mae_90%", "avg_rmse"]
                  + [f"{b}_mae" for b in BENCHMARKS]]
    rm_t = table[["predictor"] + [f"{b}_rmse" for b in BENCHMARKS]]
    text = (f"seed {args.seed}, {len(test)} dense held-out models, impute={args.impute}\n\n"
            + markdown(short) + "\n" + markdown(rm_t) + "\nridge penalties: "
            + ", ".join(f"{k}={v:.3g}" for k, v in alphas.items()) + "\n")
    print(text.replace("nan", "-"))
    print(f"{time.perf_counter() - t0:.0f} s")
    if args.output:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"floor_seed{args.seed}_{args.impute}.md").write_text(text.replace("nan", "-"))
        table.to_csv(out / f"floor_seed{args.seed}_{args.impute}.csv", index=False)


if __name__ == "__main__":
    main()
