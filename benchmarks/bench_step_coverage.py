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
- ``shown``: what a session shows (``BenchmarkPredictor.step_interval``: the small-sample
  interval before SMALL_SAMPLE_DRAWS = 30 answers, the plain one from there on).

Coverage: the share of targets whose full-benchmark score (the mean over all items) lies in the
interval, pooled over seeds and over the matrices of a family; width: its mean, in points.
Checks run on every matrix, split and seed: the 50-item prediction and interval equal
``replay(targets, seed=S+1000)``'s (to 1e-12: the final tables do not move), and on the first
target of seed 0 the vectorized trajectory equals a live PredictSession's ``trajectory()``.

With ``--budgets 5,10,20`` the study is instead the final interval of a short run (``atlas
simulate --max-items B`` on a bank folder: ``replay(targets, budget=B, seed=S+1000)`` of the
same 50-item predictor): ``shown`` replay's interval, ``plain`` D +- 1.96 SE_D on the same draws
(``_combine`` of the replay's arrays); checked: the point predictions agree, and on the first
target of seed 0 replay's interval equals a live session's with budget B.

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/bench_step_coverage.py [--seeds-binary 3]
        [--seeds-continuous 5] [--datasets v2_musr,narrativeqa] [--budgets 5,10,20]
        [--write-md]

writes benchmarks/results/step_coverage.csv (one row per matrix, split, seed, step, interval;
with --budgets step_coverage_budgets.csv, one row per budget) and, with --write-md, the tables
of benchmarks/results/step_coverage.md (with --budgets, those between its budget markers).
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
from atlascat.predict.session import PredictSession, subject_generator  # noqa: E402
from atlascat.responses import ResponseMatrix  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "benchmarks" / "results" / "step_coverage.csv"
CSV_BUDGETS = ROOT / "benchmarks" / "results" / "step_coverage_budgets.csv"
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
        out[k] = (r, pred.step_interval(yk, item, r))
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
    for a, b in ((rep.score, r50["score"]), (rep.score_lo, shown50[0]), (rep.score_hi, shown50[1])):
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


def run_budgets(family, name, split, seed, budgets) -> list[dict]:
    """The final interval of a replay with each budget (module docstring, ``--budgets``)."""
    pred, full, tgt = fitted(family, name, split, seed)
    ids = [f"m{i}" for i in tgt]
    y, truth = full[tgt], full[tgt].mean(axis=1)
    targets = ResponseMatrix(y, ids, [str(i) for i in pred.item_ids_])
    rows = []
    for budget in budgets:
        rep = pred.replay(targets, budget=budget, seed=seed + 1000)
        gen = [subject_generator(seed + 1000, s) for s in ids]
        arr = pred._replay_arrays(y, gen, budget)   # the point as replay combines it
        score, plo, phi, *_ = pred._combine(arr, y, arr["valid"], np.isfinite(y))
        if not np.array_equal(rep.score.to_numpy(), score):
            raise SystemExit(f"{name} {split} {seed}: replay's point prediction moved")
        if seed == 0:
            s = PredictSession(pred, budget=budget, rng=subject_generator(seed + 1000, ids[0]))
            index = {str(i): j for j, i in enumerate(pred.item_ids_)}
            while not s.done:
                for item in s.next_items(1):
                    s.record(item, y[0][index[item]])
            end = s.prediction()
            if not np.allclose((end.lower, end.upper), (rep.score_lo[0], rep.score_hi[0]), rtol=0,
                               atol=1e-9):
                raise SystemExit(f"{name} {split} budget {budget}: session and replay differ")
        for label, (lo, hi) in (("plain", (plo, phi)),
                                ("shown", (rep.score_lo.to_numpy(), rep.score_hi.to_numpy()))):
            rows.append({"family": family, "matrix": name, "split": split, "seed": seed,
                         "k": budget, "interval": label, "n_targets": len(tgt),
                         "hits": int(((lo <= truth) & (truth <= hi)).sum()),
                         "width": float(100 * np.mean(hi - lo)),
                         "mae": float(100 * np.mean(np.abs(score - truth)))})
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


def write_md(text: str, marker: str = "tables") -> None:
    """Replace the tables between the page's markers (the prose is written by hand)."""
    body = MD.read_text(encoding="utf-8")
    start, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    head, rest = body.split(start, 1)
    MD.write_text(head + start + "\n" + text + "\n" + end + rest.split(end, 1)[1],
                  encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds-binary", type=int, default=3)
    ap.add_argument("--seeds-continuous", type=int, default=5)
    ap.add_argument("--datasets", default="", help="comma-separated matrices (default: all)")
    ap.add_argument("--budgets", default="",
                    help="comma-separated budgets: the final interval of a short replay")
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args(argv)
    try:
        budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    except ValueError:
        ap.error(f"--budgets must be comma-separated integers, got {args.budgets!r}")
    if any(b < 2 or b > BUDGET for b in budgets):
        ap.error(f"--budgets must lie in 2-{BUDGET}, got {args.budgets!r}")
    todo = [("binary", n, args.seeds_binary) for n in bp.NAMES]
    todo += [("continuous", t, args.seeds_continuous) for t in lb.TASKS]
    if args.datasets:
        keep = set(args.datasets.split(","))
        todo = [t for t in todo if t[1] in keep]
    t0, rows = time.time(), []
    for family, name, seeds in todo:
        for split in ("interpolation", "extrapolation"):
            for seed in range(seeds):
                rows += (run_budgets(family, name, split, seed, budgets) if budgets
                         else run_one(family, name, split, seed))
        print(f"{name}: done ({time.time() - t0:.0f} s)", flush=True)
    res = pd.DataFrame(rows)
    text = tables(res)
    if budgets:
        text = text.replace("| k |", "| budget |")
    print(text)
    if not args.datasets:
        res.to_csv(CSV_BUDGETS if budgets else CSV, index=False, float_format="%.4f")
        if args.write_md:
            write_md(text, "budget tables" if budgets else "tables")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
