"""A bank folder from a small source population, checked on held-out models (issue 27, Deliver 3).

For each ``../shared/data/benchpred`` matrix and source size N: N models drawn at random
(seeded) are the source, every other model is a target. :func:`atlascat.bankdir.build_bank`
builds the folder from the source models' matrix (defaults: size-chosen calibration, link
fitted for 50-item tests, 5-fold cross-fitted interval); each target takes the adaptive test
``atlas simulate --max-items 50`` takes (SE <= 0.1 after 30 items, at most 50, randomesque 5,
the link's floor / ceiling stops) on its real answers, and
:func:`atlascat.bankdir.predict_scores` predicts its score, the mean over all items of the
matrix. Reported per N: mean absolute error (points), 95% interval coverage and median width
(points), pooled over seeds; and the same for the folder's benchmark predictor (what
``atlas simulate --bank DIR TARGETS --max-items 50`` runs by default: exactly 50 items of its
design, :func:`atlascat.bankdir.replay_predictor`).

Matrices with a model listed twice keep its first row.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_bank_small_n.py \\
        --data helm_mmlu helm_med_qa v2_arc_challenge --n 20 40 --seeds 3
"""
from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "benchpred"


def read_matrix(name: str):
    from atlascat.responses import ResponseMatrix

    df = pd.read_csv(DATA / f"{name}.csv.gz")
    df = df.drop_duplicates(df.columns[0]).set_index(df.columns[0])
    return ResponseMatrix(df.to_numpy(float), list(map(str, df.index)), list(df.columns),
                          on_empty="drop")


def one_split(rm, n: int, seed: int, budget: int = 50) -> dict:
    from atlascat.bankdir import build_bank, predict_scores, replay_predictor
    from atlascat.cat.config import CATConfig
    from atlascat.cat.simulate import simulate_cat

    idx = np.random.default_rng([seed, n]).permutation(rm.n_subjects)
    src, tgt = idx[:n], idx[n:]
    targets = rm.subset(subjects=tgt)
    truth = np.nanmean(rm.values[tgt], axis=1)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = Path(tmp) / "source.csv"
        rm.subset(subjects=src).write(path)
        folder = build_bank(path, Path(tmp) / "bank", seed=seed, budget=budget)
        pr = replay_predictor(folder, targets, budget=budget, seed=seed + 1000)
    ps, plo, phi = (pr[c].to_numpy(float) for c in ("score", "score_lo",
                                                     "score_hi"))
    cfg = CATConfig(se_stop=0.1, min_items=30, max_items=budget, randomesque=5)
    stops = dict(folder.link.stop_settings(0.02))
    stops.pop("min_items", None)
    cfg = cfg.replace(**stops)
    y = targets.aligned_values(folder.bank.item_ids, extra="ignore")
    res = simulate_cat(folder.bank, cfg, responses=y, rng=np.random.default_rng(seed))
    persons = res.persons.copy()
    ids = np.asarray(targets.subject_ids, dtype=object)
    persons["subject_id"] = ids
    adm = res.administered.copy()
    if adm["subject_id"].dtype != object:
        adm["subject_id"] = ids[adm["subject_id"].astype(int).to_numpy()]
    p = predict_scores(folder, persons, adm)
    s, lo, hi = (p[c].to_numpy(float) for c in ("score", "score_lo",
                                                  "score_hi"))
    return {"err": np.abs(s - truth), "cover": (lo <= truth) & (truth <= hi),
            "width": hi - lo, "items": res.persons["n_items"].to_numpy(),
            "factor": folder.manifest["cross_fit"]["factor"],
            "p_err": np.abs(ps - truth), "p_cover": (plo <= truth) & (truth <= phi),
            "p_width": phi - plo}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=["helm_mmlu", "helm_med_qa",
                                                  "v2_arc_challenge"])
    ap.add_argument("--n", nargs="+", type=int, default=[20, 40])
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    print("| data | source models | MAE (points) | 95% coverage | median width (points) | "
          "max items | interval factor | predictor: MAE / coverage / median width |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.data:
        rm = read_matrix(name)
        for n in args.n:
            runs = [one_split(rm, n, seed) for seed in range(args.seeds)]
            cat = {k: np.concatenate([r[k] for r in runs])
                   for k in ("err", "cover", "width", "items", "p_err", "p_cover", "p_width")}
            print(f"| {name} ({rm.n_subjects} x {rm.n_items}) | {n} | "
                  f"{100 * cat['err'].mean():.2f} | {cat['cover'].mean():.3f} | "
                  f"{100 * np.median(cat['width']):.1f} | {int(cat['items'].max())} | "
                  + ", ".join(f"{r['factor']:.2f}" for r in runs) + " | "
                  f"{100 * cat['p_err'].mean():.2f} / {cat['p_cover'].mean():.3f} / "
                  f"{100 * np.median(cat['p_width']):.1f} |", flush=True)


if __name__ == "__main__":
    main()
