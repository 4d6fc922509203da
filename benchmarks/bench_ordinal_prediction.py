"""The predicted mean rating of an ordinal bank on held-out models, in range and stronger than
every source model: error and 95% coverage.

Per seed, a graded response model of 60 items with K categories (slopes U(0.8, 2), ordered
intercepts N(0, 2) shifted per item) rates N source models (theta ~ N(0, 1)); `calibrate
(--model graded --rating-range 1 K)` fits the bank from them; 300 held-out models in range
(theta ~ N(0, 1)) and 300 stronger than all but ~2% of the source population (theta ~ U(2,
3.5)) take the adaptive test on the bank (`simulate_ordinal_cat`, fixed length k, each item's
rating drawn from the true model). Each model's full-bank mean rating (over all 60 items, its
ratings drawn from the true model) is predicted with its 95% interval by:

- ``theta N(0,1)``: the mean rating expected over the bank at the test's EAP theta (prior N(0,
  1), the calibration population) and its values at theta -+ 1.96 SE;
- ``theta N(0,3^2)``: the same from the EAP under N(0, 3^2)
  (:data:`~atlascat.irt.defaults.PREDICTION_PRIOR_SD`), the interval's ends widened by the
  bounded chance of ratings an item never had (:meth:`PolyBank.mean_rating_interval`);
- ``default``: what ``atlas simulate`` and a live run give
  (:func:`atlascat.irt.polyscore.predict_mean_rating`): the asked items as rated, the others
  expected at that EAP, the interval adding their ratings' variance
  (:meth:`PolyBank.full_mean_rating`);
- ``+ calibration variance`` (``--calibration-variance``; measured, not kept): the default's
  interval widened by the calibration's variance, g' C g by the delta method, C the Oakes
  covariance of every item parameter (``calibrate_ordinal(se=True)``), g the numerical
  gradient of each model's predicted mean rating in them.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_ordinal_prediction.py [--seeds 3]
        [--settings 40:4,40:10,60:4,100:4]   # other (source models, categories)

About 15 s a seed on one core. Results: benchmarks/results/polytomous.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from atlascat.cat.config import CATConfig, Stopping  # noqa: E402
from atlascat.cat.ordinal import simulate_ordinal_cat  # noqa: E402
from atlascat.irt import polytomous as poly  # noqa: E402
from atlascat.irt.polybank import PolyBank  # noqa: E402
from atlascat.irt.polycal import calibrate_ordinal  # noqa: E402
from atlascat.irt.defaults import PREDICTION_PRIOR_SD  # noqa: E402
from atlascat.irt.polyscore import ordinal_codes, predict_mean_rating, score_ordinal  # noqa: E402

N_ITEMS, N_TARGETS, Z = 60, 300, 1.96
SETTINGS = ((30, 10), (100, 5), (300, 5))      # (source models, categories)
LENGTHS = (10, 20)


def calibration_sd(ratings, bank: PolyBank, cov, index, h: float = 1e-4) -> np.ndarray:
    """sqrt(g' C g) per model: g the central-difference gradient of its predicted mean rating
    in each free item parameter (``index``: (item, column) rows of C)."""
    grads = np.zeros((len(index), ratings.shape[0]))
    for r, (j, c) in enumerate(index):
        for sign in (1.0, -1.0):
            p = bank.params.copy()
            p[j, c] += sign * h
            moved = PolyBank(bank.item_ids, p, bank.models, bank.levels, scales=bank.scales)
            grads[r] += sign * predict_mean_rating(ratings, moved)[0] / (2 * h)
    return np.sqrt(np.clip(np.einsum("rn,rs,sn->n", grads, cov, grads), 0, None))


def one(seed: int, n_source: int, k_cat: int, cal_var: bool = False) -> list[dict]:
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.8, 2.0, N_ITEMS)
    d = (np.sort(rng.normal(0, 2.0, (N_ITEMS, k_cat - 1)), axis=1)[:, ::-1]
         - rng.normal(0, 1, (N_ITEMS, 1)))
    params = np.column_stack([a, d])
    cols = [f"q{j}" for j in range(N_ITEMS)]

    def draw(theta):
        return poly.sample("graded", params, theta, rng) + 1.0

    source = pd.DataFrame(draw(rng.normal(0, 1, n_source)), columns=cols)
    fit = calibrate_ordinal(source, "graded", value_range=(1, k_cat), se=cal_var)
    bank = fit.bank
    rows = []
    for targets, theta in (("in range", rng.normal(0, 1, N_TARGETS)),
                           ("stronger", rng.uniform(2.0, 3.5, N_TARGETS))):
        y = draw(theta)
        full = y.mean(axis=1)
        for k in LENGTHS:
            cfg = CATConfig(stopping=Stopping(min_items=k, max_items=k, se_stop=None))
            sim = simulate_ordinal_cat(bank, cfg, responses=pd.DataFrame(y, columns=cols),
                                       rng=seed)
            given = sim.administered
            ratings = np.full(y.shape, np.nan)
            ratings[given["subject_id"].astype(int).to_numpy(),
                    bank.index_of(given["item_id"].tolist())] = given["score"].to_numpy(float)
            t, s = sim.persons["theta"].to_numpy(), sim.persons["se"].to_numpy()
            lo0, mid0, hi0 = bank.mean_rating(np.stack([t - Z * s, t, t + Z * s]))
            t3, s3, _, _ = score_ordinal(ordinal_codes(ratings, bank), bank, "eap",
                                         prior_sd=PREDICTION_PRIOR_SD)
            methods = [("theta N(0,1)", (mid0, lo0, hi0)),
                       ("theta N(0,3^2)", bank.mean_rating_interval(t3, s3)),
                       ("default", predict_mean_rating(ratings, bank))]
            if cal_var:
                mid, lo, hi = methods[-1][1]
                sd = Z * calibration_sd(ratings, bank, fit.se.covariance, fit.se.info.index)
                methods.append(("+ calibration variance",
                                (mid, mid - np.hypot(mid - lo, sd), mid + np.hypot(hi - mid, sd))))
            for method, (mid, lo, hi) in methods:
                rows.append({"seed": seed, "source models": n_source, "categories": k_cat,
                             "items asked": k, "targets": targets, "method": method,
                             "MAE": np.mean(np.abs(mid - full)),
                             "coverage": np.mean((full >= lo) & (full <= hi)),
                             "width": np.mean(hi - lo)})
    return rows


def main(argv=None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--calibration-variance", action="store_true",
                    help="also the interval widened by the calibration's variance (~40 s a fit)")
    ap.add_argument("--settings", default=None,
                    help="source models:categories pairs, e.g. 40:4,40:10 (default: "
                    + ",".join(f"{n}:{k}" for n, k in SETTINGS) + ")")
    args = ap.parse_args(argv)
    settings = SETTINGS if args.settings is None else tuple(
        tuple(int(v) for v in pair.split(":")) for pair in args.settings.split(","))
    rows = [r for seed in range(1, args.seeds + 1) for n, k in settings
            for r in one(seed, n, k, args.calibration_variance)]
    df = pd.DataFrame(rows)
    table = (df.groupby(["source models", "categories", "targets", "items asked", "method"],
                        sort=False)[["MAE", "coverage", "width"]].mean().round(3))
    print(table.to_string())
    return df


if __name__ == "__main__":
    main()
