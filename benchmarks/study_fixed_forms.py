"""A fixed form on a bank folder, scored by `atlas score --bank DIR`: how often does its 95%
interval hold? (benchmarks/results/fixed_forms.md)

docs/design.md's path for a user who wants one short test for every model: `atlas design --bank
DIR -k 50 -o FORM.csv` chooses a D-optimal form, each model answers its items, and `atlas score
ANSWERS --bank DIR` gives the predicted benchmark score with a 95% interval from the folder's
score link. The link's interval was sized for the folder's own designs (its adaptive test,
cross-fitted at the build's budget); a fixed form is neither. `atlas design` on a bank folder
designs for its source models' abilities (the link's support); the same form designed for
N(0, 1) abilities (the default elsewhere, and a folder's before 2026-11-29) is measured beside it. Measured on BenchPred's
interpolation split (a random 25% of the models are the targets, the rest the source; seeds
0-4), with the commands a user runs:

    atlas build-bank SOURCE.csv -o BANK --seed S --chance C
    atlas design --bank BANK -k 50 -o FORM.csv
    atlas score TARGETS_ON_FORM.csv --bank BANK -o SCORED.csv

beside the same 50 items drawn at random once (one random fixed form for every target) and
scored the same way, and the folder's own design (`atlas simulate --bank BANK TARGETS.csv
--max-items 50 --seed S+1000`: the benchmark predictor's random draws, its design-based
interval). Per matrix and design: MAE in points against each target's mean over all items,
coverage of the 95% interval pooled over the seeds, its mean width, and the coverage among the
weakest and the strongest third of the targets (by their full score).

    OPENBLAS_NUM_THREADS=1 python benchmarks/study_fixed_forms.py [--datasets helm_mmlu] [--seeds 5]
        [--split extrapolation]   # the weakest 50% the source, the strongest 30% the targets

(about 6 minutes on 2 shared cores; prints the markdown table).
"""
from __future__ import annotations

import argparse
import importlib.util
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_benchpred", HERE / "bench_benchpred.py")
bp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bp)

BUDGET = 50
DESIGNS = ("D-optimal form + link", "D-optimal for N(0, 1) + link", "random fixed form + link",
           "predictor (random draws)")


def one_seed(df: pd.DataFrame, name: str, seed: int, tmp: Path,
             split: str = "interpolation") -> pd.DataFrame:
    """Rows (design, target, score, lo, hi, truth) of one seed's split (BenchPred's)."""
    tmp.mkdir(parents=True, exist_ok=True)
    full = df.to_numpy(float)
    src, tgt = bp.split_models(full, split, seed, df.index)
    ids = [f"m{i}" for i in tgt]
    truth = pd.Series(full[tgt].mean(axis=1), index=ids)
    source = bp._write(df, src, tmp / "SOURCE.csv")
    targets = pd.DataFrame(full[tgt], index=pd.Index(ids, name="model"), columns=df.columns)
    targets.to_csv(tmp / "TARGETS.csv")
    bank = tmp / "BANK"
    bp._cli(["build-bank", source, "-o", bank, "--seed", seed, "--chance", bp.CHANCE[name]])
    # the form scored without its cross-fitted factors (study_form_precision.py measures them)
    bp._cli(["design", "--bank", bank, "-k", BUDGET, "-o", tmp / "FORM.csv", "--no-cross-fit"])
    form = pd.read_csv(tmp / "FORM.csv")["item_id"].astype(str).tolist()
    # N(0, 1) as a sample: 2,000 of its quantiles (before 2026-11-29 a folder's default)
    pd.DataFrame({"theta": norm.ppf((np.arange(2000) + 0.5) / 2000)}).to_csv(
        tmp / "NORMAL.csv", index=False)
    bp._cli(["design", "--bank", bank, "-k", BUDGET, "--thetas", tmp / "NORMAL.csv", "-o",
             tmp / "FORM_N01.csv", "--no-cross-fit"])
    form_n01 = pd.read_csv(tmp / "FORM_N01.csv")["item_id"].astype(str).tolist()
    rand = list(np.random.default_rng([seed, 11]).choice(df.columns, BUDGET, replace=False))
    out = []
    for design, items in zip(DESIGNS[:3], (form, form_n01, rand)):
        targets[items].to_csv(tmp / "ON_FORM.csv")
        bp._cli(["score", tmp / "ON_FORM.csv", "--bank", bank, "-o", tmp / "SCORED.csv"])
        s = pd.read_csv(tmp / "SCORED.csv", index_col=0)
        out.append(pd.DataFrame({"design": design, "score": s["score"], "lo": s["score_lo"],
                                 "hi": s["score_hi"], "truth": truth.reindex(s.index)}))
    bp._cli(["simulate", "--bank", bank, tmp / "TARGETS.csv", "--max-items", BUDGET, "--seed",
             seed + 1000, "-o", tmp / "RUN"])
    p = pd.read_csv(tmp / "RUN" / "person_scores.csv", index_col=0)
    out.append(pd.DataFrame({"design": DESIGNS[3], "score": p["score"], "lo": p["score_lo"],
                             "hi": p["score_hi"], "truth": truth.reindex(p.index)}))
    rows = pd.concat(out)
    third = truth.rank(pct=True)
    rows["third"] = np.where(third.reindex(rows.index) <= 1 / 3, "weakest",
                             np.where(third.reindex(rows.index) > 2 / 3, "strongest", "middle"))
    return rows.assign(seed=seed)


def summary(rows: pd.DataFrame) -> dict:
    covered = (rows["lo"] <= rows["truth"]) & (rows["truth"] <= rows["hi"])
    by = covered.groupby(rows["third"]).mean()
    return {"n": len(rows), "mae": 100 * float((rows["score"] - rows["truth"]).abs().mean()),
            "coverage": float(covered.mean()), "width": 100 * float((rows["hi"] - rows["lo"]).mean()),
            "weakest": float(by.get("weakest", np.nan)), "strongest": float(by.get("strongest", np.nan))}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=",".join(bp.NAMES))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--split", default="interpolation", choices=bp.SPLITS)
    args = ap.parse_args(argv)
    print("| data | design | targets (x seeds) | MAE | 95% coverage | width | coverage: weakest third "
          "| strongest third |\n|---|---|---|---|---|---|---|---|")
    for name in args.datasets.split(","):
        df = bp.load(name)
        with tempfile.TemporaryDirectory() as d:
            rows = pd.concat([one_seed(df, name, s, Path(d) / f"s{s}", args.split)
                              for s in range(args.seeds)])
        for design in DESIGNS:
            r = summary(rows[rows["design"] == design])
            print(f"| {name} | {design} | {r['n']} | {r['mae']:.2f} | {r['coverage']:.3f} | "
                  f"{r['width']:.1f} | {r['weakest']:.3f} | {r['strongest']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
