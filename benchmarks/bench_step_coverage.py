"""Coverage of the benchmark predictor's 95% interval after each item, as a live run's step lines
and HTML trajectory show it (:meth:`atlascat.predict.session.PredictSession.trajectory`), on
held-out models: BenchPred's binary matrices (../shared/data/benchpred/) and LongBench's
continuous ones (../shared/data/longbench/), under BenchPred's protocol (the splits of
benchmarks/bench_benchpred.py: interpolation, a random 25% of the models the targets;
extrapolation, the strongest 30% the targets and the weakest 50% the source).

Per matrix, split and seed: the library path of bench_benchpred.py / bench_longbench.py
(Calibrator() on the source, with dispersion="auto" on LongBench as ``atlas build-bank``
calibrates continuous scores, cached as bench_longbench.py caches it;
BenchmarkPredictor(50, chance=C).fit(bank, source, rng=S), C the benchmark's chance level on
BenchPred), then every target asked 50 items by the sequential design from its own Generator
(:func:`atlascat.predict.session.subject_generator` (S + 1000, target): what ``atlas
simulate --seed S+1000`` and a live run seeded alike ask). After k = 1, 2, 3, 5, 10, 20, 50
answers the prediction from the first k draws (:meth:`BenchmarkPredictor.predict_draws`, as a
session's) with two intervals:

- ``plain``: D +- 1.96 SE_D widened to contain the prediction (Des Raj's variance alone);
- ``shown``: what a session shows (:func:`atlascat.predict.session.step_interval`: the
  small-sample interval before min(30, budget) answers, the plain one from there on).

Coverage: the share of targets whose full-benchmark score (the mean over all items) lies in the
interval, pooled over seeds and over the matrices of a family; width: its mean, in points.
Checks run on every matrix, split and seed: the 50-item prediction and interval equal
``replay(targets, seed=S+1000)``'s (to 1e-12: the final tables do not move), and on the first
target of seed 0 the vectorized trajectory equals a live PredictSession's ``trajectory()``.

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/bench_step_coverage.py [--seeds-binary 3]
        [--seeds-continuous 5] [--datasets v2_musr,narrativeqa] [--write-md]

writes benchmarks/results/step_coverage.csv (one row per matrix, split, seed, step, interval)
and, with --write-md, the tables of benchmarks/results/step_coverage.md.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_benchpred as bp  # noqa: E402
import bench_longbench as lb  # noqa: E402

from atlascat.irt.calibrate import Calibrator  # noqa: E402
from atlascat.predict import BenchmarkPredictor  # noqa: E402
from atlascat.predict import estimators as est  # noqa: E402
from atlascat.predict.session import PredictSession, step_interval, subject_generator  # noqa: E402
from atlascat.responses import ResponseMatrix  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "benchmarks" / "results" / "step_coverage.csv"
MD = ROOT / "benchmarks" / "results" / "step_coverage.md"
STEPS = (1, 2, 3, 5, 10, 20, 50)
BUDGET = 50


def fitted(family: str, name: str, split: str, seed: int):
    """(predictor, full matrix, target rows) of one matrix, split and seed."""
    if family == "binary":
        df = bp.load(name)
        full = df.to_numpy(float)
        src, tgt = bp.split_models(full, split, seed, df.index)
        source = ResponseMatrix(full[src], [f"m{i}" for i in src], [str(c) for c in df.columns])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bank = Calibrator().fit(source).bank_
        pred = BenchmarkPredictor(BUDGET, chance=bp.CHANCE[name]).fit(bank, source, rng=seed)
    else:
        df = lb.load(name)
        full = df.to_numpy(float)
        src, tgt = bp.split_models(full, split, seed)
        source = ResponseMatrix(full[src], [f"m{i}" for i in src], [str(c) for c in df.columns])
        bank = lb.cached_bank(name, df, split, seed)
        pred = BenchmarkPredictor(BUDGET).fit(bank, source, rng=seed)
    return pred, full, tgt


def trajectories(pred, y, ids, seed: int) -> dict:
    """{k: (predict_draws's dict, shown (lower, upper))} for every target row of ``y``."""
    tables, _, log_prior = pred._grid()
    gen = [subject_generator(seed + 1000, s) for s in ids]
    d = est.sequential_design(y, tables, log_prior, BUDGET, float(pred.mix), gen,
                              level=pred._level(), share=float(pred.share),
                              dispersion=getattr(pred, "dispersion_", None))
    if not d["valid"].all():
        raise SystemExit("a target lacks answers: the study needs complete rows")
    rows = np.arange(y.shape[0])[:, None]
    out = {}
    for k in STEPS:
        item = d["item"][:, :k]
        yk = np.full_like(y, np.nan)
        yk[rows, item] = y[rows, item]
        r = pred.predict_draws(yk, item, *(d[c][:, :k] for c in ("q", "f", "f_rest", "g",
                                                                    "g_rest")))
        out[k] = (r, step_interval(pred, yk, item, r, BUDGET))
    return out


def check_session(pred, y_row, subject, seed: int, traj: dict, row: int) -> None:
    """A live session of one target asks the same items and shows the same intervals."""
    s = PredictSession(pred, budget=BUDGET, rng=subject_generator(seed + 1000, subject))
    index = {str(i): j for j, i in enumerate(pred.item_ids_)}
    while not s.done:
        for item in s.next_items(1):
            s.record(item, y_row[index[item]])
    path = s.trajectory()
    for k, (r, (lo, hi)) in traj.items():
        got = path[k - 1]
        want = (float(r["score"][row]), float(lo[row]), float(hi[row]))
        if not np.allclose((got.score, got.lower, got.upper), want, rtol=0, atol=1e-9):
            raise SystemExit(f"session and vectorized trajectory differ at step {k}: "
                             f"{(got.score, got.lower, got.upper)} vs {want}")


def run_one(family, name, split, seed) -> list[dict]:
    pred, full, tgt = fitted(family, name, split, seed)
    ids = [f"m{i}" for i in tgt]
    y, truth = full[tgt], full[tgt].mean(axis=1)
    traj = trajectories(pred, y, ids, seed)
    rep = pred.replay(ResponseMatrix(y, ids, [str(i) for i in pred.item_ids_]), seed=seed + 1000)
    r50, shown50 = traj[BUDGET]
    for a, b in ((rep.score, r50["score"]), (rep.lower, shown50[0]), (rep.upper, shown50[1])):
        if not np.allclose(a.to_numpy(), np.asarray(b), rtol=0, atol=1e-12):
            raise SystemExit(f"{name} {split} {seed}: the 50-item prediction differs from replay")
    if seed == 0:
        check_session(pred, y[0], ids[0], seed, traj, 0)
    rows = []
    for k, (r, shown) in traj.items():
        for label, (lo, hi) in (("plain", (r["lower"], r["upper"])), ("shown", shown)):
            rows.append({"family": family, "matrix": name, "split": split, "seed": seed,
                         "k": k, "interval": label, "n_targets": len(tgt),
                         "hits": int(((lo <= truth) & (truth <= hi)).sum()),
                         "width": float(100 * np.mean(hi - lo)),
                         "mae": float(100 * np.mean(np.abs(r["score"] - truth)))})
    return rows


def pooled(res: pd.DataFrame, by) -> pd.DataFrame:
    g = res.groupby(by, sort=False).agg(hits=("hits", "sum"), n=("n_targets", "sum"),
                                        width=("width", "mean"), mae=("mae", "mean"))
    g["coverage"] = g.hits / g.n
    return g


def tables(res: pd.DataFrame) -> str:
    """The markdown tables of the results page: per family and split, and the lowest matrix."""
    g = pooled(res, ["family", "split", "k", "interval"])
    lines = ["| family | split | k | coverage plain | coverage shown | width plain | width shown "
             "| MAE |", "|---|---|---|---|---|---|---|---|"]
    for (fam, split, k), _ in g.groupby(level=[0, 1, 2], sort=False):
        a, b = g.loc[(fam, split, k, "plain")], g.loc[(fam, split, k, "shown")]
        lines.append(f"| {fam} | {split} | {k} | {a.coverage:.3f} ({int(a.hits)}/{int(a.n)}) | "
                     f"**{b.coverage:.3f}** ({int(b.hits)}/{int(b.n)}) | {a.width:.1f} | "
                     f"{b.width:.1f} | {a.mae:.2f} |")
    per = pooled(res, ["family", "matrix", "split", "k", "interval"])["coverage"]
    per = per.unstack("interval").reset_index()
    low = per.loc[per.groupby(["family", "split", "k"], sort=False)["shown"].idxmin()]
    lines += ["", "| family | split | k | lowest matrix (shown) | its plain |",
              "|---|---|---|---|---|"]
    for _, r in low.iterrows():
        lines.append(f"| {r.family} | {r.split} | {r.k} | {r.shown:.3f} ({r.matrix}) | "
                     f"{r.plain:.3f} |")
    return "\n".join(lines)


def write_md(text: str) -> None:
    """Replace the tables between the page's markers (the prose is written by hand)."""
    body = MD.read_text(encoding="utf-8")
    start, end = "<!-- tables -->", "<!-- /tables -->"
    head, rest = body.split(start, 1)
    MD.write_text(head + start + "\n" + text + "\n" + end + rest.split(end, 1)[1],
                  encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds-binary", type=int, default=3)
    ap.add_argument("--seeds-continuous", type=int, default=5)
    ap.add_argument("--datasets", default="", help="comma-separated matrices (default: all)")
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args(argv)
    todo = [("binary", n, args.seeds_binary) for n in bp.NAMES]
    todo += [("continuous", t, args.seeds_continuous) for t in lb.TASKS]
    if args.datasets:
        keep = set(args.datasets.split(","))
        todo = [t for t in todo if t[1] in keep]
    t0, rows = time.time(), []
    for family, name, seeds in todo:
        for split in ("interpolation", "extrapolation"):
            for seed in range(seeds):
                rows += run_one(family, name, split, seed)
        print(f"{name}: done ({time.time() - t0:.0f} s)", flush=True)
    res = pd.DataFrame(rows)
    text = tables(res)
    print(text)
    if not args.datasets:
        res.to_csv(CSV, index=False, float_format="%.4f")
        if args.write_md:
            write_md(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
