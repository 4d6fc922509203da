"""Graded calibration speed, ATLAS vs mirt 1.45.1, side by side on the same data.

A 1,000 x 100 matrix of five-category ratings is drawn from the graded response model (seeded;
slopes lognormal(0.2, 0.3), four ordered intercepts), written once to CSV, and calibrated
``--repeats`` times by each program in turn (ATLAS in a fresh subprocess, ``atlas calibrate
--model graded``, whose own ``seconds`` in the summary is the fit time; mirt by Rscript,
``system.time(mirt(Y, 1, itemtype = "graded"))``, single thread, its defaults). Medians and
both log-likelihoods are printed and written to JSON.

The adaptive test is timed on the same data too: the graded bank ATLAS fitted, replayed for the
1,000 examinees (MFI randomesque 5, EAP, catR SE, 5-30 items, SE <= 0.3:
:func:`atlascat.cat.ordinal.simulate_ordinal_cat`), beside the binary engine
(:func:`atlascat.cat.simulate.simulate_cat`) on the same answers cut at the middle category
(rating >= 3) with a 2PL bank, same settings.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_polytomous.py [--repeats 3] [--out F.json]

Needs R with mirt (never run by the tests).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from atlascat.irt import polytomous as poly  # noqa: E402

R_SCRIPT = r"""
suppressPackageStartupMessages(library(mirt))
args <- commandArgs(trailingOnly = TRUE)
df <- read.csv(args[1], check.names = FALSE)
Y <- as.matrix(df[, -1])
t <- system.time(m <- mirt(Y, 1, itemtype = "graded", verbose = FALSE))[["elapsed"]]
cat(sprintf('{"seconds": %.4f, "loglik": %.6f, "n_iter": %d}\n', t,
            extract.mirt(m, "logLik"), extract.mirt(m, "iterations")))
"""


def make_data(path: Path, n: int = 1000, m: int = 100, k: int = 5, seed: int = 1) -> None:
    # every item must show all k categories (mirt re-maps the others and then reports a NaN
    # log-likelihood): the first seed from ``seed`` on whose draw does
    for s in range(seed, seed + 100):
        rng = np.random.default_rng(s)
        a = rng.lognormal(0.2, 0.3, m)
        d = np.sort(rng.normal(0, 1.0, (m, k - 1)), axis=1)[:, ::-1] + rng.normal(0, 0.3, (m, 1))
        y = poly.sample("graded", np.column_stack([a, d]), rng.normal(size=n), rng) + 1
        if all(len(np.unique(col)) == k for col in y.T):
            break
    df = pd.DataFrame(y, columns=[f"item{j + 1}" for j in range(m)])
    df.insert(0, "subject_id", [f"s{i + 1}" for i in range(n)])
    df.to_csv(path, index=False)


def run_atlas(data: Path, tmp: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "atlascat", "calibrate", str(data), "--model", "graded",
                    "-o", str(tmp / "bank.csv"), "--summary", str(tmp / "s.json"), "--quiet"],
                   check=True, env=env, capture_output=True)
    wall = time.perf_counter() - t0
    s = json.loads((tmp / "s.json").read_text())
    return {"seconds": s["seconds"], "wall": wall, "loglik": s["loglik"], "n_iter": s["n_iter"]}


def run_mirt(data: Path, tmp: Path) -> dict:
    script = tmp / "fit.R"
    script.write_text(R_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = time.perf_counter()
    out = subprocess.run(["Rscript", str(script), str(data)], check=True, env=env,
                         capture_output=True, text=True).stdout
    wall = time.perf_counter() - t0
    res = json.loads(out.strip().splitlines()[-1])
    res["wall"] = wall
    return res


def time_cat(data: Path, bank_csv: Path, repeats: int) -> dict:
    """Median seconds of the ordinal and the binary adaptive test on the same examinees."""
    from atlascat.cat.config import CATConfig, Stopping
    from atlascat.cat.ordinal import simulate_ordinal_cat
    from atlascat.cat.simulate import simulate_cat
    from atlascat.irt.calibrate import calibrate
    from atlascat.irt.polybank import PolyBank
    from atlascat.responses import ResponseMatrix

    df = pd.read_csv(data).set_index("subject_id")
    bank = PolyBank.read(bank_csv)
    binary = (df >= 3).astype(float)
    rm = ResponseMatrix(binary.to_numpy(), binary.index, binary.columns)
    bank2 = calibrate(rm, model="2pl", prior_a=None).bank
    cfg = CATConfig(stopping=Stopping(min_items=5, max_items=30, se_stop=0.3))
    out = {}
    for name, run in (("ordinal", lambda: simulate_ordinal_cat(bank, cfg, responses=df, rng=0)),
                      ("binary", lambda: simulate_cat(bank2, cfg, responses=rm,
                                                      rng=np.random.default_rng(0)))):
        secs, res = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            res = run()
            secs.append(time.perf_counter() - t0)
        out[name] = {"seconds_median": statistics.median(secs),
                     "items_mean": float(res.persons["n_items"].mean())}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        data = tmp / "ratings.csv"
        make_data(data)
        runs = {"atlas": [], "mirt": []}
        for _ in range(args.repeats):                  # interleaved: same machine load
            runs["atlas"].append(run_atlas(data, tmp))
            runs["mirt"].append(run_mirt(data, tmp))
        cat = time_cat(data, tmp / "bank.csv", args.repeats)
    out = {"data": "1000 subjects x 100 items, 5 categories, graded (seed 1)",
           "repeats": args.repeats}
    for name, rs in runs.items():
        out[name] = {"fit_seconds_median": statistics.median(r["seconds"] for r in rs),
                     "wall_seconds_median": statistics.median(r["wall"] for r in rs),
                     "loglik": rs[0]["loglik"], "n_iter": rs[0]["n_iter"]}
    out["speedup_fit"] = out["mirt"]["fit_seconds_median"] / out["atlas"]["fit_seconds_median"]
    out["speedup_wall"] = out["mirt"]["wall_seconds_median"] / out["atlas"]["wall_seconds_median"]
    out["cat_1000_examinees"] = cat
    print(json.dumps(out, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
