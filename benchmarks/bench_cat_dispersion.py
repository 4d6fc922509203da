"""The adaptive test on banks of continuous scores (LongBench): the Bernoulli posterior versus
the extended quasi-likelihood (each item's term and information divided by its dispersion).

For each task and seed, the 40 models are split (seeded) into 30 train and 10 held-out
models; banks are calibrated on the train models only:

- ``plain``: ``calibrate(train)`` (the Bernoulli quasi-likelihood; no dispersion column),
- ``extended``: ``calibrate(train, dispersion="auto")`` (the bank carries each item's
  dispersion; the CAT divides each answer's log-likelihood and information by it).

The CAT (default config, ``se_stop`` = tau, at most every item; a tau >= 1 is a fixed length of
that many items, to compare the two arms at equal length; a tau <= -1 is -tau items drawn at
random, to tell the selection's share of any under-coverage from the likelihood's) replays each held-out model's
real scores. Reported per arm: mean items used; coverage = share of held-out models with
|theta_CAT - theta_full| <= 1.96 SE_CAT, theta_full the EAP on every bank item under the same
likelihood; the full-score error = |p-IRT estimate of the mean score over all items (answered
items as scored, the rest P_j(theta_CAT)) - the true mean| in points (x 100).

    OPENBLAS_NUM_THREADS=1 nice .venv/bin/python benchmarks/bench_cat_dispersion.py \
        [--seeds 5] [--taus 0.3,0.2] [--out benchmarks/results/longbench/cat_dispersion.csv]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat.cat.config import CATConfig
from atlascat.cat.simulate import simulate_cat
from atlascat.cat.tables import _tables
from atlascat.irt.calibrate import calibrate
from atlascat.responses import ResponseMatrix
from atlascat.studies.reconstruction import pirt

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "longbench"
TASKS = ("gov_report", "hotpotqa", "lcc", "narrativeqa", "passage_retrieval_en", "qasper",
         "qmsum", "triviaqa")


def full_eap(y, bank, config):
    """EAP and posterior SD on every answered bank item, with the CAT's own tables."""
    tab = _tables(bank, config)
    seen = np.isfinite(y)
    yv = np.where(seen, y, 0.0)
    lpost = tab.log_prior + yv @ tab.lp_post + np.where(seen, 1.0 - yv, 0.0) @ tab.lq_post
    w = np.exp(lpost - lpost.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    th = w @ tab.nodes
    sd = np.sqrt((w * (tab.nodes[None, :] - th[:, None]) ** 2).sum(1))
    return th, sd


def run(task, seed, taus, variants=False):
    df = pd.read_csv(DATA / f"longbench_{task}.csv.gz", index_col=0)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(df))
    test_rows, train_rows = order[:10], order[10:]
    train = ResponseMatrix(df.iloc[train_rows].to_numpy(float), df.index[train_rows].astype(str),
                           df.columns.astype(str))
    y_test_all = df.iloc[test_rows]
    banks = {"plain": calibrate(train, random_state=seed).bank,
             "extended": calibrate(train, random_state=seed, dispersion="auto").bank}
    if variants:
        ext = banks["extended"]
        phi = ext.metadata["dispersion"].to_numpy(float)
        med = float(np.median(phi))
        for name, col in (("median", np.full_like(phi, med)),
                          ("shrunk", np.sqrt(phi * med))):
            banks[f"extended_{name}"] = ext.with_metadata(pd.DataFrame(
                {"item_id": ext.item_ids, "dispersion": col}))
    rows = []
    for arm, bank in banks.items():
        y = y_test_all[list(bank.item_ids)].to_numpy(float)
        truth = np.nanmean(y, axis=1)
        test = ResponseMatrix(y, y_test_all.index.astype(str), bank.item_ids)
        for tau in taus:
            if tau <= -1:    # int(-tau) items drawn at random (no adaptive selection)
                cfg = CATConfig().replace(se_stop=None, max_items=int(-tau),
                                          selection="random")
            elif tau >= 1:   # a fixed length of int(tau) items
                cfg = CATConfig().replace(se_stop=None, max_items=int(tau))
            else:
                cfg = CATConfig().replace(se_stop=tau, max_items=len(bank))
            th_full, sd_full = full_eap(y, bank, cfg)
            t0 = time.perf_counter()
            res = simulate_cat(bank, cfg, responses=test, rng=seed)
            secs = time.perf_counter() - t0
            p = res.persons
            adm = np.zeros(y.shape, bool)
            a = res.administered
            for i, sid in enumerate(test.subject_ids):
                adm[i, bank.index_of(a.loc[a.subject_id == sid, "item_id"].tolist())] = True
            est = pirt(np.where(adm, y, np.nan), bank, p.theta.to_numpy())
            phi = bank.metadata["dispersion"].to_numpy() if bank.metadata is not None else None
            rows.append({
                "task": task, "seed": seed, "arm": arm, "tau": tau, "model": bank.model,
                "median_a": float(np.median(bank.params[0])),
                "median_phi": np.nan if phi is None else float(np.median(phi)),
                "items": float(p.n_items.mean()),
                "stopped_by_se": float((p.se <= tau + 1e-12).mean()),
                "se_full": float(sd_full.mean()),
                "coverage": float((np.abs(p.theta - th_full) <= 1.96 * p.se).mean()),
                "abs_theta_err": float(np.abs(p.theta - th_full).mean()),
                "score_err": float(100 * np.abs(est - truth).mean()),
                "seconds": secs})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--taus", default="0.3,0.2",
                    help="SE thresholds; a value >= 1 is a fixed length (items), <= -1 that "
                         "many random items")
    ap.add_argument("--variants", action="store_true",
                    help="also the extended bank with every item at the median dispersion "
                         "(extended_median) and each item's shrunk halfway to it on the log "
                         "scale (extended_shrunk)")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--out", default="benchmarks/results/longbench/cat_dispersion.csv")
    args = ap.parse_args()
    taus = [float(t) for t in args.taus.split(",")]
    rows = []
    for task in args.tasks.split(","):
        for seed in range(args.seeds):
            rows += run(task, seed, taus, args.variants)
        print(pd.DataFrame([r for r in rows if r["task"] == task]).groupby(["arm", "tau"])[
            ["items", "coverage", "score_err", "se_full"]].mean().round(3).to_string(), flush=True)
    out = pd.DataFrame(rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(args.out, index=False)
    summary = out.groupby(["task", "arm", "tau"])[
        ["items", "stopped_by_se", "coverage", "abs_theta_err", "score_err", "se_full",
         "median_phi", "median_a"]].mean().round(3)
    print(summary.to_string())
    print(out.groupby(["arm", "tau"])[["items", "coverage", "score_err"]].mean().round(3))


if __name__ == "__main__":
    main()
