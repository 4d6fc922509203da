"""Two held-out models compared on a bank folder of one's own: what `atlas compare-models`
says about their difference, checked against their true full scores.

For each BenchPred matrix (``../shared/data/benchpred``) and seed: BenchPred's interpolation
split (a random 25% of the models are the targets, bench_benchpred.split_models), a bank
folder built on the rest exactly as ``atlas build-bank SOURCE --chance C --seed SEED`` builds
it (:func:`atlascat.bankdir.build_bank`, the default budget of 50 items), then every target
replays its real answers through the folder's benchmark predictor, the default of ``atlas
evaluate`` on a folder (:func:`atlascat.bankdir.replay_predictor`, one seed per replay: each
target draws its own items). Every pair of targets gets the difference of its two predicted
scores with the 95% interval ``atlas compare-models`` prints (pair scale 1 on a folder, rho 0):

- ``limits``: :func:`atlascat.studies.paired.limits_difference`, each side of the difference's
  interval from the sides of the two intervals that bound it (what compare-models prints);
- ``symmetric``: :func:`atlascat.studies.paired.difference_interval`, one sd per prediction,
  (hi - lo) / 3.92, around the point (what compare-models printed before).

The truth is each target's mean over all the matrix's items (the folder's score). Reported per
band of the true difference (points) and per band of the pair's ability (the tercile of the
pair's mean true score among the targets): pairs, coverage, the share told apart (interval
excludes 0), the share told apart the wrong way (the sign error a user would act on), the
share whose point difference has the wrong sign, and the median half-width; for the 1% of
pairs whose answers agree most beyond what their accuracies explain (near-duplicates), also
the coverage with ``--rho 0.5``, which the docs suggest for checkpoints.

    PYTHONPATH=src OPENBLAS_NUM_THREADS=1 python benchmarks/bench_paired_folder.py -o runs/paired_folder

(default: v2 MuSR and IFEval, seeds 0-2, 4 replays, a few minutes; the figures in
benchmarks/results/paired.md: ``--data v2_musr v2_ifeval v2_arc_challenge helm_mmlu helm_med_qa
--seeds 5 --replays 4``, about 15 minutes on 2 busy shared cores.)
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from atlascat.bankdir import build_bank, replay_predictor  # noqa: E402
from atlascat.studies.paired import (Z95, difference_interval, excess_agreement,  # noqa: E402
                                     limits_difference)

_spec = importlib.util.spec_from_file_location("bench_benchpred",
                                               ROOT / "benchmarks" / "bench_benchpred.py")
bp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bp)

GAPS = ((0, 2), (2, 5), (5, 10), (10, 100))          # |true difference|, points
METHODS = ("limits", "symmetric")


def pairs_of(name: str, seed: int, replays: int, budget: int = 50) -> pd.DataFrame:
    """Every pair of the seed's targets, each replay: true and predicted difference (points),
    the pair's mean true score, and each method's interval."""
    df = bp.load(name)
    full = df.to_numpy(float)
    src, tgt = bp.split_models(full, "interpolation", seed, df.index)
    truth = full[tgt].mean(axis=1)
    with tempfile.TemporaryDirectory() as tmp:
        source = bp._write(df, src, Path(tmp) / "SOURCE.csv")
        targets = pd.DataFrame(full[tgt], columns=[str(c) for c in df.columns],
                               index=pd.Index([f"m{i}" for i in tgt], name="model"))
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            folder = build_bank(source, Path(tmp) / "BANK", chance=bp.CHANCE[name], seed=seed,
                                budget=budget)
            runs = [replay_predictor(folder, targets, budget=budget, seed=1000 * seed + r)
                    for r in range(replays)]
    i, j = np.triu_indices(len(tgt), 1)
    excess = excess_agreement(full[tgt][i], full[tgt][j])   # on every item: near-duplicates
    out = []
    for r, run in enumerate(runs):
        run = run.set_index("subject_id").loc[targets.index]
        s, lo, hi = (run[c].to_numpy(float) for c in ("score", "score_lo", "score_hi"))
        frame = {"data": name, "seed": seed, "replay": r, "true": 100 * (truth[i] - truth[j]),
                 "level": 100 * (truth[i] + truth[j]) / 2, "pred": 100 * (s[i] - s[j]),
                 "excess": excess}
        sd = (hi - lo) / (2 * Z95)
        args = (s[i], lo[i], hi[i], s[j], lo[j], hi[j])
        for method, d in (("limits", limits_difference(*args)),
                          ("symmetric", difference_interval(s[i] - s[j], sd[i], sd[j])),
                          ("rho 0.5", limits_difference(*args, rho=0.5))):
            frame[f"{method}_lo"], frame[f"{method}_hi"] = 100 * d["lo"], 100 * d["hi"]
        out.append(pd.DataFrame(frame))
    return pd.concat(out, ignore_index=True)


def summary(p: pd.DataFrame) -> dict:
    """Coverage, told apart, told apart the wrong way, point sign wrong, median half-width."""
    t = p["true"].to_numpy()
    row = {"pairs": len(p), "point sign wrong": float(np.mean(
        np.sign(p["pred"].to_numpy())[t != 0] != np.sign(t[t != 0]))) if (t != 0).any() else 0.0}
    for m in (*METHODS, "rho 0.5"):
        lo, hi = p[f"{m}_lo"].to_numpy(), p[f"{m}_hi"].to_numpy()
        told = (lo > 0) | (hi < 0)
        wrong = ((lo > 0) & (t < 0)) | ((hi < 0) & (t > 0))
        row |= {f"{m}: coverage": float(np.mean((lo <= t) & (t <= hi))),
                f"{m}: told apart": float(np.mean(told)),
                f"{m}: wrong way": float(np.mean(wrong)),
                f"{m}: half-width": float(np.median(hi - lo) / 2)}
    return row


def tables(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per data set and band: all pairs, each band of |true difference|, each
    ability tercile."""
    rows = []
    for name, p in pairs.groupby("data", sort=False):
        gap = p["true"].abs()
        cuts = np.quantile(p["level"], [1 / 3, 2 / 3])
        level = np.digitize(p["level"], cuts)
        bands = [("all pairs", np.ones(len(p), bool))]
        bands += [(f"{a}-{b} pts apart" if b < 100 else f"over {a} pts apart",
                   ((gap >= a) & (gap < b)).to_numpy()) for a, b in GAPS]
        bands += [(f"{w} third of ability", level == k)
                  for k, w in enumerate(("lowest", "middle", "highest"))]
        bands += [("1% whose answers agree most",
                   (p["excess"] >= p["excess"].quantile(0.99)).to_numpy())]
        for band, m in bands:
            if m.any():
                rows.append({"data": name, "pairs of": band, **summary(p[m])})
    return pd.DataFrame(rows)


def markdown(df: pd.DataFrame) -> str:
    cols = ["data", "pairs of", "pairs", "limits: coverage", "limits: told apart",
            "limits: wrong way", "point sign wrong", "limits: half-width",
            "symmetric: coverage", "symmetric: wrong way", "rho 0.5: coverage"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = [r["data"], r["pairs of"], f"{r['pairs']:,}"]
        for c in cols[3:]:
            cells.append(f"{r[c]:.1f}" if c.endswith("half-width") else f"{100 * r[c]:.1f}%")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="*", default=["v2_musr", "v2_ifeval"])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--replays", type=int, default=4)
    ap.add_argument("-o", "--output", type=Path, default=Path("runs/paired_folder"))
    args = ap.parse_args(argv)
    pairs = pd.concat([pairs_of(name, seed, args.replays) for name in args.data
                       for seed in range(args.seeds)], ignore_index=True)
    df = tables(pairs)
    args.output.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.output / "paired_folder.csv", index=False)
    md = markdown(df)
    (args.output / "paired_folder.md").write_text(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
