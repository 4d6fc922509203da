"""LongBench's continuous per-item scores (../shared/data/longbench/: F1, ROUGE-L, edit
similarity, retrieval hits in [0, 1]; 40 named models) under BenchPred's protocol, through the
commands users run, ``atlas build-bank`` and ``atlas simulate`` with their defaults, beside
BenchPred's own methods run on the same matrices (longbench/peers_best.csv, peers_per_seed.csv).

Protocol (as benchmarks/bench_benchpred.py): budget 50 items; interpolation = a random 25% of
the models are the targets (numpy RandomState(seed).permutation), the rest the source;
extrapolation = the source is the weakest 50% of the models by their task mean, the targets
the strongest 30%; seeds 0-4. Per task, split and seed, in a temporary folder:

    atlas build-bank SOURCE.csv -o BANK --seed S
    atlas simulate --bank BANK TARGETS.csv --max-items 50 --seed S+1000 -o RUN

RUN/person_scores.csv gives the predicted task score and its 95% interval; the truth is each
target's mean over all items of the task. MAE in points (mean over seeds), coverage pooled
over seeds. The acceptance (issue 43): interpolation MAE at most the best peer's, extrapolation
at most 1.1 x, coverage 0.90-0.99 per task and split.

``--library``: the library path instead (Calibrator(dispersion="auto") on the source, as
``atlas build-bank`` calibrates, cached per task, split
and seed under /tmp, then BenchmarkPredictor(50, **--set).fit(bank, source, rng=S).replay(
targets, seed=S+1000), each target's own Generator as atlas simulate's; --replays K adds
replay(targets, rng=[S+1000, k]) for k = 1 .. K-1): a study of the predictor's settings, nothing written but the printout.

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/bench_longbench.py [--tasks narrativeqa,lcc]
        [--seeds 5] [--write-md] [--library [--set NAME=VALUE ...] [--replays K]]

writes benchmarks/results/longbench/atlas.csv (one row per task, split, seed; a run of some
--tasks replaces only their rows) and, with
--write-md, the table of benchmarks/results/longbench.md.
"""
from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_benchpred import PEER_LABEL as BENCHPRED_LABEL  # noqa: E402
from bench_benchpred import (_cli, _metrics, _write, read_matrix, replays_of,  # noqa: E402
                             split_models, write_rows)

from atlascat.irt.calibrate import Calibrator  # noqa: E402
from atlascat.predict import BenchmarkPredictor  # noqa: E402
from atlascat.responses import ResponseMatrix  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "longbench"
OUT = ROOT / "benchmarks" / "results" / "longbench"
MD = ROOT / "benchmarks" / "results" / "longbench.md"
CACHE = Path(tempfile.gettempdir()) / "atlas_longbench_cache"
TASKS = ["narrativeqa", "qasper", "hotpotqa", "gov_report", "qmsum", "triviaqa", "lcc",
         "passage_retrieval_en"]
SPLITS = ("interpolation", "extrapolation")
PEER_LABEL = {**BENCHPRED_LABEL, "lasso": "lasso"}


def load(task: str) -> pd.DataFrame:
    return read_matrix(DATA / f"longbench_{task}.csv.gz")


def run_cli(df: pd.DataFrame, split: str, seed: int, budget: int, tmp: Path) -> dict:
    """One seed through build-bank and simulate with their defaults."""
    full = df.to_numpy(float)
    src, tgt = split_models(full, split, seed)
    truth = pd.Series(full[tgt].mean(axis=1), index=[f"m{i}" for i in tgt])
    source, targets = _write(df, src, tmp / "SOURCE.csv"), _write(df, tgt, tmp / "TARGETS.csv")
    bank, run = tmp / f"BANK_{split}_{seed}", tmp / f"RUN_{split}_{seed}"
    _cli(["build-bank", source, "-o", bank, "--seed", seed])
    _cli(["simulate", "--bank", bank, targets, "--max-items", budget, "--seed", seed + 1000,
          "-o", run])
    p = pd.read_csv(run / "person_scores.csv")
    return {"n_source": len(src), **_metrics(p, truth)}


def cached_bank(task: str, df: pd.DataFrame, split: str, seed: int):
    """Calibrator()'s bank on the source models of (task, split, seed), cached on disk."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{task}_{split}_{seed}_eql.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    full = df.to_numpy(float)
    src, _ = split_models(full, split, seed)
    source = ResponseMatrix(full[src], [f"m{i}" for i in src], [str(c) for c in df.columns])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bank = Calibrator(dispersion="auto").fit(source).bank_     # as atlas build-bank
    path.write_bytes(pickle.dumps(bank))
    return bank


def run_library(task, df, split, seed, budget, settings, replays=1) -> dict:
    full = df.to_numpy(float)
    ids = [str(c) for c in df.columns]
    src, tgt = split_models(full, split, seed)
    source = ResponseMatrix(full[src], [f"m{i}" for i in src], ids)
    targets = ResponseMatrix(full[tgt], [f"m{i}" for i in tgt], ids)
    bank = cached_bank(task, df, split, seed)
    pred = BenchmarkPredictor(budget, **settings).fit(bank, source, rng=seed)
    _, p = replays_of(pred, targets, seed, replays)
    truth = pd.Series(full[tgt].mean(axis=1), index=[f"m{i}" for i in tgt])
    return {"n_source": len(src), **_metrics(p, truth)}


def table(res: pd.DataFrame, peers: pd.DataFrame) -> str:
    best = peers.set_index(["dataset", "split"])
    lines = ["| task | split | ATLAS MAE | best BenchPred method | ATLAS / best | 95% coverage "
             "| width | design part only | IRT only | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    g = res.groupby(["task", "split"], sort=False)
    agg = g.agg(mae=("mae", "mean"), hits=("n_hits", "sum"), n=("n_targets", "sum"),
                width=("width", "mean"), design_mae=("design_mae", "mean"),
                model_mae=("model_mae", "mean"))
    for (task, split), row in agg.iterrows():
        b = best.loc[(f"longbench_{task}", split)]
        ratio = row.mae / b.best_peer_mae
        bound = 1.0 if split == "interpolation" else 1.1
        cov = row.hits / row.n
        verdict = "meets" if ratio <= bound else f"**loses** (bound x{bound:.1f})"
        if not 0.90 <= cov <= 0.99:
            verdict += "; **coverage outside 0.90-0.99**"
        lines.append(f"| {task} | {split} | {row.mae:.2f} | {b.best_peer_mae:.2f} "
                     f"({PEER_LABEL.get(b.best_peer, b.best_peer)}) | x{ratio:.2f} | "
                     f"{cov:.3f} ({int(row.hits)}/{int(row.n)}) | {row.width:.1f} | "
                     f"{row.design_mae:.2f} | {row.model_mae:.2f} | {verdict} |")
    return "\n".join(lines)


def write_md(text: str) -> None:
    """Replace the first table of benchmarks/results/longbench.md (the prose is written by hand)."""
    body = MD.read_text(encoding="utf-8")
    lines = body.split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith("| task |"))
    last = next(i for i in range(first, len(lines)) if not lines[i].startswith("|"))
    lines[first:last] = text.split("\n")
    MD.write_text("\n".join(lines), encoding="utf-8")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--write-md", action="store_true")
    ap.add_argument("--library", action="store_true",
                    help="the library path with cached calibrations (a study)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="with --library: a BenchmarkPredictor setting")
    ap.add_argument("--replays", type=int, default=1, help="with --library: draws per seed")
    a = ap.parse_args(argv)
    settings = {}
    for s in a.set:
        k, v = s.split("=", 1)
        settings[k] = None if v == "None" else (v == "True" if v in ("True", "False")
                                                 else float(v))
    if (settings or a.replays > 1) and not a.library:
        ap.error("--set and --replays are for the library path (--library)")
    rows, t_all = [], time.time()
    with tempfile.TemporaryDirectory(prefix="longbench_") as tmp:
        for task in a.tasks.split(","):
            df = load(task)
            for split in a.splits.split(","):
                t0, new = time.time(), []
                for seed in range(a.seeds):
                    r = (run_library(task, df, split, seed, a.budget, settings, a.replays)
                         if a.library else run_cli(df, split, seed, a.budget, Path(tmp)))
                    new.append({"task": task, "split": split, "seed": seed, **r})
                rows += new
                d = pd.DataFrame(new)
                print(f"{task:21s} {split:13s} MAE {d.mae.mean():5.2f}  design "
                      f"{d.design_mae.mean():5.2f}  IRT {d.model_mae.mean():5.2f}  coverage "
                      f"{d.n_hits.sum() / d.n_targets.sum():.3f}  outside "
                      f"{d.outside.mean():.2f}  ({time.time() - t0:.0f}s)", flush=True)
    res = pd.DataFrame(rows)
    peers = pd.read_csv(DATA / "peers_best.csv")
    text = table(res, peers)
    print(text)
    print(f"total {time.time() - t_all:.0f}s")
    if not a.library:
        OUT.mkdir(parents=True, exist_ok=True)
        write_rows(OUT / "atlas.csv", res.round(4), ["task", "split", "seed"])
        if a.write_md:
            write_md(text)


if __name__ == "__main__":
    main()
