"""Calibration defaults chosen on held-out models (issue 13, item 4).

For every dense Open LLM matrix: a seeded 90/10 split of the models stratified by total score
(:func:`atlascat.filtering.stratified_split`, the benchmark protocol's step 1), every setting
calibrated on the train models only (no item filter: the comparison is about the estimator), and
the held-out models scored with each setting's bank:

- ``logloss``: held-out log-loss per response. Each held-out model's items are split at random
  into halves A and B (seeded); the posterior of theta given its answers on A (N(0, 1) prior,
  61 nodes on [-6, 6]) predicts each answer on B by the posterior predictive
  p_j = sum_q post_q P_j(theta_q) (theta integrated out, not plugged in), and vice versa;
  logloss = -mean[y log p + (1 - y) log(1 - p)] over all held-out responses. Lower is better.
- ``coverage``: the CAT (paper defaults: MFI, randomesque 5, EAP, SE <= 0.2 after >= 30 items,
  catR's information SE) replayed on the held-out models' real answers
  (:func:`atlascat.simulate_cat`); coverage = share of held-out models with
  |theta_CAT - theta_full| <= 1.96 SE_CAT, theta_full = EAP on every bank item. Nominal 0.95.
- ``a>5`` and ``c>0.5``: share of items with a slope above 5 / a lower asymptote above 0.5.

Run (about 10-20 minutes on one core for the default grid; heavier with mmlu):

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_calibration_defaults.py \
        --out benchmarks/results/calibration_defaults.csv

Prints a markdown table (one row per benchmark and setting) and the per-setting summary.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from atlascat.cat.config import CATConfig  # noqa: E402
from atlascat.cat.simulate import simulate_cat  # noqa: E402
from atlascat.filtering import stratified_split  # noqa: E402
from atlascat.irt.ability import grid_posterior  # noqa: E402
from atlascat.irt.calibrate import calibrate  # noqa: E402
from atlascat.irt.quadrature import normal_quadrature  # noqa: E402
from atlascat.responses import ResponseMatrix  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "openllm"
SETTINGS_BASELINE = "mirt 3PL"

# name -> (model, prior_a, prior_c[, prior_u]); "mirt" is mirt's default (3PL, no priors)
SETTINGS = {
    "mirt 3PL": ("3pl", None, None),
    "1PL": ("1pl", None, None),
    "2PL": ("2pl", None, None),
    "2PL a~LN(0,1)": ("2pl", "lognorm(0,1)", None),
    "3PL a~LN(0,1) c~B(2,8)": ("3pl", "lognorm(0,1)", "beta(2,8)"),
    "3PL a~LN(0,0.5) c~B(5,17)": ("3pl", "lognorm(0,0.5)", "beta(5,17)"),
    "3PL a~LN(0,0.3) c~B(10,40)": ("3pl", "lognorm(0,0.3)", "beta(10,40)"),
    "3PL a~LN(0,0.3) c~B(2,8)": ("3pl", "lognorm(0,0.3)", "beta(2,8)"),
    "3PL c~B(5,17)": ("3pl", None, "beta(5,17)"),
    "4PL a~LN(0,0.5) c~B(5,17)": ("4pl", "lognorm(0,0.5)", "beta(5,17)", None),
    "4PL a~LN(0,0.3) c~B(5,17) u~B(17,5)": ("4pl", "lognorm(0,0.3)", "beta(5,17)", "beta(17,5)"),
    "4PL a~LN(0,0.5) c~B(5,17) u~B(17,5)": ("4pl", "lognorm(0,0.5)", "beta(5,17)", "beta(17,5)"),
    "4PL a~LN(0,0.5) c~B(2,8) u~B(8,2)": ("4pl", "lognorm(0,0.5)", "beta(2,8)", "beta(8,2)"),
    "4PL a~LN(0,0.3) c~B(10,40) u~B(40,10)": ("4pl", "lognorm(0,0.3)", "beta(10,40)",
                                              "beta(40,10)"),
    "4PL (no priors)": ("4pl", None, None, None),
    "4PL c~B(5,17) u~B(17,5)": ("4pl", None, "beta(5,17)", "beta(17,5)"),
    "4PL a~LN(0,1) c~B(2,8) u~B(8,2)": ("4pl", "lognorm(0,1)", "beta(2,8)", "beta(8,2)"),
    "4PL a~LN(0.5,0.3) c~B(5,17) u~B(17,5)": ("4pl", "lognorm(0.5,0.3)", "beta(5,17)",
                                              "beta(17,5)"),
    "3PL a~LN(0.5,0.3) c~B(10,40)": ("3pl", "lognorm(0.5,0.3)", "beta(10,40)"),
    "4PL a~LN(0,0.2) c~B(10,40) u~B(40,10)": ("4pl", "lognorm(0,0.2)", "beta(10,40)",
                                              "beta(40,10)"),
    "4PL a~LN(1,0.5) c~B(5,17) u~B(17,5)": ("4pl", "lognorm(1,0.5)", "beta(5,17)", "beta(17,5)"),
    "4PL a~LN(1,0.3) c~B(5,17) u~B(17,5)": ("4pl", "lognorm(1,0.3)", "beta(5,17)", "beta(17,5)"),
    "4PL a~LN(0.5,0.7) c~B(5,17) u~B(17,5)": ("4pl", "lognorm(0.5,0.7)", "beta(5,17)",
                                              "beta(17,5)"),
    "4PL a~LN(0.7,0.4) c~B(5,17) u~B(17,5)": ("4pl", "lognorm(0.7,0.4)", "beta(5,17)",
                                              "beta(17,5)"),
    "4PL a~LN(1,0.5) c~B(10,40) u~B(40,10)": ("4pl", "lognorm(1,0.5)", "beta(10,40)",
                                              "beta(40,10)"),
    "4PL a~N(2,3) c~B(5,17) u~B(17,5)": ("4pl", "norm(2,3)", "beta(5,17)", "beta(17,5)"),
    "4PL a~LN(1.5,1) c~B(5,17) u~B(17,5)": ("4pl", "lognorm(1.5,1)", "beta(5,17)", "beta(17,5)"),
    "4PL c~B(2,8) u~B(8,2)": ("4pl", None, "beta(2,8)", "beta(8,2)"),
    "4PL c~B(10,40) u~B(40,10)": ("4pl", None, "beta(10,40)", "beta(40,10)"),
    "4PL a~LN(0,0.3) c~B(10,40)": ("4pl", "lognorm(0,0.3)", "beta(10,40)", None),
    "4PL a~LN(0,0.3) c~B(10,40) u~B(17,5)": ("4pl", "lognorm(0,0.3)", "beta(10,40)",
                                             "beta(17,5)"),
    "4PL a~N(1,1) c~B(5,17) u~B(17,5)": ("4pl", "norm(1,1)", "beta(5,17)", "beta(17,5)"),
    "4PL a~N(1.5,1) c~B(5,17) u~B(17,5)": ("4pl", "norm(1.5,1)", "beta(5,17)", "beta(17,5)"),
    "4PL a~N(2,1.5) c~B(5,17) u~B(17,5)": ("4pl", "norm(2,1.5)", "beta(5,17)", "beta(17,5)"),
    "4PL a~N(2,2) c~B(5,17) u~B(17,5)": ("4pl", "norm(2,2)", "beta(5,17)", "beta(17,5)"),
    "4PL a~N(1,0.7) c~B(5,17) u~B(17,5)": ("4pl", "norm(1,0.7)", "beta(5,17)", "beta(17,5)"),
    "4PL a~N(1,0.5) c~B(5,17) u~B(17,5)": ("4pl", "norm(1,0.5)", "beta(5,17)", "beta(17,5)"),
    "4PL a~N(1,0.3) c~B(5,17) u~B(17,5)": ("4pl", "norm(1,0.3)", "beta(5,17)", "beta(17,5)"),
    "4PL a~N(1,0.5) c~B(10,40) u~B(40,10)": ("4pl", "norm(1,0.5)", "beta(10,40)", "beta(40,10)"),
    "3PL a~N(1,1) c~B(5,17)": ("3pl", "norm(1,1)", "beta(5,17)"),
    "3PL a~N(1,0.5) c~B(10,40)": ("3pl", "norm(1,0.5)", "beta(10,40)"),
    "4PL a~N(1,0.6) c~B(6,20) u~B(17,5)": ("4pl", "norm(1,0.6)", "beta(6,20)", "beta(17,5)"),
    "4PL a~N(1,0.5) c~B(7,25) u~B(17,5)": ("4pl", "norm(1,0.5)", "beta(7,25)", "beta(17,5)"),
    "4PL a~N(1,0.7) c~B(7,25) u~B(17,5)": ("4pl", "norm(1,0.7)", "beta(7,25)", "beta(17,5)"),
    "4PL a~N(1,0.5) c~B(5,17) u~B(10,2)": ("4pl", "norm(1,0.5)", "beta(5,17)", "beta(10,2)"),
    "4PL a~N(1.2,0.6) c~B(5,17) u~B(17,5)": ("4pl", "norm(1.2,0.6)", "beta(5,17)", "beta(17,5)"),
}


def heldout_logloss(y: np.ndarray, bank, half: np.ndarray):
    """Two-fold within-model posterior-predictive log-loss: per-model sums and counts."""
    quad = normal_quadrature(61, (-6.0, 6.0))
    P = np.clip(bank.probability(quad.nodes), 1e-12, 1 - 1e-12)   # (q, J)
    total, count = np.zeros(y.shape[0]), np.zeros(y.shape[0])
    for a_side in (half, ~half):
        ya = np.where(a_side, y, np.nan)
        yb = np.where(~a_side, y, np.nan)
        post = grid_posterior(ya, bank, quad)                      # (n, q)
        pred = np.clip(post @ P, 1e-12, 1 - 1e-12)                 # (n, J)
        obs = ~np.isnan(yb)
        ll = np.where(obs, np.where(yb == 1, np.log(pred), np.log1p(-pred)), 0.0)
        total -= ll.sum(axis=1)
        count += obs.sum(axis=1)
    return total, count


def cat_coverage(test: ResponseMatrix, bank, seed: int, se_stop: float = 0.2) -> dict:
    y = test.aligned_values(bank.item_ids)
    quad = normal_quadrature(61, (-6.0, 6.0))
    post = grid_posterior(y, bank, quad)
    theta_full = post @ quad.nodes
    res = simulate_cat(bank, CATConfig(se_stop=se_stop), responses=y,
                       rng=np.random.default_rng(seed),
                       subject_ids=[str(s) for s in test.subject_ids])
    th = res.persons["theta"].to_numpy(float)
    se = res.persons["se"].to_numpy(float)
    n_items = res.persons["n_items"].to_numpy(float) if "n_items" in res.persons else np.nan
    cover = np.abs(th - theta_full) <= 1.96 * se
    return {"coverage": float(cover.mean()), "cat_items": float(np.mean(n_items)),
            "cat_mae_full": float(np.mean(np.abs(th - theta_full)))}


def run(benchmarks, settings, seed: int, test_size: float, se_stop: float,
        n_train: int | None = None, baseline: str = SETTINGS_BASELINE) -> pd.DataFrame:
    """Every setting on every benchmark; ``n_train``: calibrate on that many of the train
    models only (the size study's seeded subset), the held-out models unchanged. The paired
    difference ("vs mirt" columns) is taken against ``baseline`` when it is run first."""
    rows = []
    for bench in benchmarks:
        rm = ResponseMatrix.read(DATA / f"dense_{bench}.csv.gz")
        train, test = stratified_split(rm, test_size=test_size, rng=np.random.default_rng(seed))
        if n_train is not None and n_train < train.n_subjects:
            pick = np.random.default_rng(seed + 3).permutation(train.n_subjects)[:n_train]
            train = train.subset(subjects=np.sort(pick))
        per_model = {}
        for name in settings:
            model, prior_a, prior_c, *rest = SETTINGS[name]
            prior_u = rest[0] if rest else None
            t0 = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = calibrate(train, model, prior_a=prior_a, prior_c=prior_c,
                                    prior_u=prior_u, mirt_defaults=True)
            except Exception as exc:  # noqa: BLE001 - a failed setting is a result too
                print(f"{bench:11s} {name:28s} FAILED: {exc}", flush=True)
                rows.append({"benchmark": bench, "setting": name, "model": model,
                             "error": str(exc)[:200]})
                continue
            secs = time.perf_counter() - t0
            bank = res.bank
            test_b = test.subset(items=list(bank.item_ids))   # constant train items left out
            # the halves are drawn over the full item set, so every setting (whatever items it
            # left out) sees the same split
            half_full = np.random.default_rng(seed + 1).random(test.values.shape) < 0.5
            col = {str(i): k for k, i in enumerate(test.item_ids)}
            idx = np.array([col[str(i)] for i in bank.item_ids])
            tot, cnt = heldout_logloss(test.values[:, idx], bank, half_full[:, idx])
            per_model[name] = tot / np.maximum(cnt, 1)
            base = per_model.get(baseline)
            if base is not None:
                diff = per_model[name] - base
                d_mean, d_se = float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(diff.size))
            else:
                d_mean = d_se = float("nan")
            cov = cat_coverage(test_b, bank, seed + 2, se_stop)
            row = {"benchmark": bench, "setting": name, "model": model,
                   "n_train": train.n_subjects, "n_test": test.n_subjects,
                   "n_items": len(bank), "logloss": float(tot.sum() / cnt.sum()),
                   "d_logloss_vs_mirt": d_mean, "se_d_logloss": d_se, **cov,
                   "a_gt_5": float(np.mean(bank.a > 5)), "c_gt_0.5": float(np.mean(bank.c > 0.5)),
                   "min_u_minus_c": float(np.min(bank.u - bank.c)),
                   "extreme": float(np.mean((bank.a > 5) | (bank.c > 0.5))),
                   "converged": bool(res.converged), "n_iter": int(res.n_iter),
                   "train_loglik": float(res.loglik), "seconds": round(secs, 1)}
            rows.append(row)
            print(f"{bench:11s} {name:28s} logloss {row['logloss']:.4f} "
                  f"(vs mirt {d_mean:+.4f} +- {d_se:.4f}) coverage "
                  f"{row['coverage']:.3f} items {row['cat_items']:.0f} a>5 {row['a_gt_5']:.1%} "
                  f"c>.5 {row['c_gt_0.5']:.1%} {row['n_iter']} it {secs:.0f} s", flush=True)
    return pd.DataFrame(rows)


SIZE_SETTINGS = {
    "1PL": ("1pl", None, None),
    "2PL a~LN(0,1)": ("2pl", "lognorm(0,1)", None),
    "2PL (no prior)": ("2pl", None, None),
    "3PL default priors": ("3pl", "lognorm(0,0.3)", "beta(10,40)"),
    "mirt 3PL": ("3pl", None, None),
    "4PL a~N(1,0.5) c~B(5,17) u~B(10,2)": ("4pl", "norm(1,0.5)", "beta(5,17)", "beta(10,2)"),
}


def size_study(bench: str, sizes, seed: int, test_size: float) -> pd.DataFrame:
    """Held-out log-loss of each model family when only N train models are available: random
    subsets (seeded) of the train split, the same held-out models and halves for every N."""
    rm = ResponseMatrix.read(DATA / f"dense_{bench}.csv.gz")
    train, test = stratified_split(rm, test_size=test_size, rng=np.random.default_rng(seed))
    half_full = np.random.default_rng(seed + 1).random(test.values.shape) < 0.5
    col = {str(i): k for k, i in enumerate(test.item_ids)}
    rows = []
    for n in sizes:
        pick = np.sort(np.random.default_rng(seed + 3).permutation(train.n_subjects)[:n])
        sub = train.subset(subjects=pick)
        for name, (model, pa, pc, *rest) in SIZE_SETTINGS.items():
            t0 = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = calibrate(sub, model, prior_a=pa, prior_c=pc,
                                    prior_u=rest[0] if rest else None, mirt_defaults=True,
                                    max_iter=500)
            except Exception as exc:  # noqa: BLE001
                print(f"N={n:5d} {name:22s} FAILED: {exc}", flush=True)
                continue
            bank = res.bank
            idx = np.array([col[str(i)] for i in bank.item_ids])
            # items constant in the small train sample are not in the bank: score the others
            tot, cnt = heldout_logloss(test.values[:, idx], bank, half_full[:, idx])
            row = {"benchmark": bench, "n_train": int(n), "setting": name,
                   "n_items": len(bank), "logloss": float(tot.sum() / cnt.sum()),
                   "converged": bool(res.converged), "seconds": time.perf_counter() - t0}
            rows.append(row)
            print(f"N={n:5d} {name:22s} items {len(bank):4d} logloss {row['logloss']:.4f} "
                  f"{'converged' if res.converged else 'NOT converged'}", flush=True)
    return pd.DataFrame(rows)


def markdown(df: pd.DataFrame, baseline: str = SETTINGS_BASELINE) -> str:
    lines = ["| benchmark | setting | held-out log-loss | vs mirt (+- SE) | CAT coverage (95%) "
             "| CAT items | a > 5 | c > 0.5 | either |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in df.rename(columns={"c_gt_0.5": "c_gt_05"}).itertuples():
        if not np.isfinite(getattr(r, "logloss", np.nan)):
            lines.append(f"| {r.benchmark} | {r.setting} | failed | | | | | | |")
            continue
        vs = "" if r.setting == baseline else \
            f"{r.d_logloss_vs_mirt:+.4f} +- {r.se_d_logloss:.4f}"
        lines.append(f"| {r.benchmark} | {r.setting} | {r.logloss:.4f} | {vs} | {r.coverage:.3f} | "
                     f"{r.cat_items:.0f} | {r.a_gt_5:.1%} | {r.c_gt_05:.1%} | {r.extreme:.1%} |")
    return "\n".join(lines)


def summary(df: pd.DataFrame, baseline: str = "mirt 3PL") -> pd.DataFrame:
    df = df[np.isfinite(df["logloss"])]
    base = df[df.setting == baseline].set_index("benchmark")["logloss"]
    out = []
    for name, g in df.groupby("setting", sort=False):
        g = g.set_index("benchmark")
        out.append({"setting": name, "mean_logloss": g.logloss.mean(),
                    "beats_mirt": int((g.logloss < base.loc[g.index] - 1e-6).sum()),
                    "mean_coverage": g.coverage.mean(),
                    "min_coverage": g.coverage.min(),
                    "mean_extreme": g.extreme.mean(), "max_extreme": g.extreme.max()})
    return pd.DataFrame(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmarks", default="arc,gsm8k,hellaswag,truthfulqa,winogrande")
    ap.add_argument("--settings", default="all",
                    help="';'-separated setting names (see SETTINGS), or 'all'")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--test-size", type=float, default=0.1)
    ap.add_argument("--se-stop", type=float, default=0.2)
    ap.add_argument("--out", type=Path, default=None, help="CSV of the rows")
    ap.add_argument("--size-study", default=None, metavar="BENCH",
                    help="instead: held-out log-loss by number of train models on BENCH")
    ap.add_argument("--sizes", default="20,50,100,200,500,1000,2000")
    ap.add_argument("--n-train", type=int, default=None,
                    help="calibrate on this many train models (seeded subset), not all")
    ap.add_argument("--baseline", default=SETTINGS_BASELINE,
                    help="setting the paired log-loss difference is taken against (list it "
                         "first in --settings); the columns keep the name 'vs mirt'")
    args = ap.parse_args(argv)
    if args.size_study:
        df = size_study(args.size_study, [int(v) for v in args.sizes.split(",")], args.seed,
                        args.test_size)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            df.to_csv(args.out, index=False)
        print(df.pivot(index="n_train", columns="setting", values="logloss")
              .to_string(float_format=lambda v: f"{v:.4f}"))
        return
    settings = list(SETTINGS) if args.settings == "all" else \
        [s.strip() for s in args.settings.split(";") if s.strip()]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        ap.error(f"unknown settings {unknown}; known: {list(SETTINGS)}")
    df = run([b.strip() for b in args.benchmarks.split(",")], settings, args.seed,
             args.test_size, args.se_stop, args.n_train, args.baseline)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False)
    print()
    print(markdown(df, args.baseline))
    print()
    if SETTINGS_BASELINE in settings:
        print(summary(df).to_string(index=False, float_format=lambda v: f"{v:.4f}"))


if __name__ == "__main__":
    main()
