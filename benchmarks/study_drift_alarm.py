"""Anchor-drift flags of `atlas link`: false alarms without drift, detection with injected drift.

A reference group ~ N(0, 1) and a new group ~ N(mu, 1) (mu 0 or 1.5) answer K common anchors
(K 10 or 40; b ~ N(mu/2, 1), a ~ lognormal(0, 0.3)) plus 15 unique items each; 2PL; N models
per group (200 or 1000). With drift, round(0.1 K) anchors' true b are shifted for the new
group by +-U(0.5, 1.5). Each group is calibrated alone and the new bank linked to the reference
bank (Stocking-Lord). "before": the old rule (robust z of the b gaps > 3 and 0.3 from the
median, read from the drift table's ``robust_z`` and ``d``); "after": the library's flags.
Per condition: the share of links flagging at least one sound anchor (false alarm per link)
and the share of drifted anchors flagged (detection).

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/study_drift_alarm.py [--reps 3] [--seed 0]
        [--detail] [--real] [--se]
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from atlascat import calibrate
from atlascat.irt.linking import link_banks

N_UNIQUE = 15


SE = False   # --se: banks with b_se (calibrate(se=True)), the SE-based z


def _fit(df):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = calibrate(df, "2pl", random_state=0, se=SE)
        return res.bank_with_standard_errors() if SE else res.bank


def cell(mu, k, n, drift, rng):
    m = k + 2 * N_UNIQUE
    a = rng.lognormal(0, 0.3, m)
    b = np.concatenate([rng.normal(mu / 2, 1, k), rng.normal(0, 1, N_UNIQUE),
                        rng.normal(mu, 1, N_UNIQUE)])
    b_new = b.copy()
    moved = rng.choice(k, int(round(0.1 * k)), replace=False) if drift else np.array([], int)
    b_new[moved] += rng.choice([-1, 1], len(moved)) * rng.uniform(0.5, 1.5, len(moved))
    ids = [f"i{j}" for j in range(m)]
    anchors = ids[:k]

    def answers(th, bb, cols):
        p = 1 / (1 + np.exp(-a * (th[:, None] - bb)))
        x = (rng.random(p.shape) < p).astype(float)
        return pd.DataFrame(x, columns=ids)[cols]

    ref = _fit(answers(rng.normal(0, 1, n), b, anchors + ids[k:k + N_UNIQUE]))
    new = _fit(answers(rng.normal(mu, 1, n), b_new, anchors + ids[k + N_UNIQUE:]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lk = link_banks(ref, new)
    t = lk.drift.reindex(anchors)   # an anchor the calibration dropped: not flagged
    before = ((t["robust_z"].abs() > 3) & ((t["d"] - t["d"].median()).abs() > 0.3)).to_numpy()
    after = t["flagged"].fillna(False).to_numpy(bool)
    bad = np.isin(np.arange(k), moved)
    return {"mu": mu, "K": k, "N": n, "drift": drift, "n_drifted": len(moved),
            "false_before": bool((before & ~bad).any()), "false_after": bool((after & ~bad).any()),
            "hit_before": int((before & bad).sum()), "hit_after": int((after & bad).sum()),
            "max_z_sound": float(t["drift_z"].abs()[~bad].max()),
            "min_z_drifted": float(t["drift_z"].abs()[bad].min()) if bad.any() else np.nan,
            "min_gap_drifted": float((t["d"] - t["d"].median()).abs()[bad].min())
            if bad.any() else np.nan}


def real(seed):
    """Real ARC / GSM8K (../shared/data/openllm/dense_*): the models split at random in two
    halves (equivalent groups) or by accuracy (soft: P(second) = logistic(1.5 z)); K anchors at
    random, the other items split between the halves; each half calibrated alone (2PL) and
    linked. No anchor is known to drift: the flags (old rule, new) count the alarms."""
    from pathlib import Path

    data = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "openllm"
    rows = []
    for bench in ("arc", "gsm8k"):
        df = pd.read_csv(data / f"dense_{bench}.csv.gz", index_col=0)
        df.columns = [str(c) for c in df.columns]
        acc = df.mean(axis=1).to_numpy()
        z = (acc - acc.mean()) / acc.std()
        for split in ("random", "soft"):
            for k in (10, 40):
                rng = np.random.default_rng([seed, k, split == "soft"])
                second = (rng.random(len(df)) < (0.5 if split == "random"
                                                 else 1 / (1 + np.exp(-1.5 * z))))
                items = rng.permutation(df.columns)
                anchors, rest = list(items[:k]), items[k:]
                own = [list(rest[: len(rest) // 2]), list(rest[len(rest) // 2:])]
                ref = _fit(df.loc[~second, anchors + own[0]])
                new = _fit(df.loc[second, anchors + own[1]])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t = link_banks(ref, new).drift
                old = (t["robust_z"].abs() > 3) & ((t["d"] - t["d"].median()).abs() > 0.3)
                rows.append({"bench": bench, "split": split, "K": k, "anchors": len(t),
                             "flagged_before": int(old.sum()),
                             "flagged_after": int(t["flagged"].sum())})
    return pd.DataFrame(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--detail", action="store_true", help="quantiles of the z statistics")
    ap.add_argument("--real", action="store_true", help="also the real ARC / GSM8K links")
    ap.add_argument("--se", action="store_true", help="banks with b_se: the SE-based z")
    o = ap.parse_args()
    global SE
    SE = o.se
    rng = np.random.default_rng(o.seed)
    t0 = time.time()
    rows = [cell(mu, k, n, drift, rng) for drift in (False, True) for mu in (0.0, 1.5)
            for k in (10, 40) for n in (200, 1000) for _ in range(o.reps)]
    df = pd.DataFrame(rows)
    g = df.groupby(["drift", "K"])
    out = pd.DataFrame({"links": g.size(),
                        "false_alarm_before": g["false_before"].mean(),
                        "false_alarm_after": g["false_after"].mean(),
                        "detect_before": g["hit_before"].sum() / g["n_drifted"].sum(),
                        "detect_after": g["hit_after"].sum() / g["n_drifted"].sum()})
    print(out.round(2).to_string())
    print(df.groupby(["drift", "K", "N", "mu"])[["false_before", "false_after"]].mean().round(2)
          .to_string())
    if o.detail:
        print(df.groupby(["drift", "K"])[["max_z_sound", "min_z_drifted", "min_gap_drifted"]]
              .quantile([0.5, 0.8, 0.9, 0.95]).round(2).to_string())
    print(f"{time.time() - t0:.0f} s")
    if o.real:
        t0 = time.time()
        print(real(o.seed).to_string(index=False))
        print(f"real: {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
