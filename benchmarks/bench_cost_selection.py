"""Selection by information per unit cost (``selection="mfi-cost"``) against maximum information
(``"mfi"``) under the same budget, on held-out models of the bundled content banks.

Per benchmark: the bundled matrix is split into train and test models
(``stratified_split``, seeds 0-4, each also seeding the draws); a bank is calibrated on the train models (``calibrate``'s
defaults) for the content bank's items; each item's cost is what a model reads for it, in
characters: the prompt (few-shot prefix included) once per answer option scored by
log-likelihood plus the options, or the prompt once for a generated answer (cost A), or the
question and its options alone (cost B: a prefix cached or shared, so only the item's own text
is paid for). The test models' recorded answers are replayed with ``budget`` = 10 / 20 / 40
times the median item cost (no SE stop; ``min_items`` 1); the reference is each test model's
EAP on every bank item. Reported: items asked, theta MAE against the reference, coverage of
theta +- 1.96 SE, for "mfi" and "mfi-cost", same seeds; means over the seeds (the cost's coefficient of
variation in ``--out``'s rows).

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/bench_cost_selection.py [--benchmarks arc,...]
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import atlascat as at  # noqa: E402
from atlascat.cat.simulate import simulate_cat  # noqa: E402


def item_costs(meta: pd.DataFrame) -> dict[str, np.ndarray]:
    """Cost A (the whole prompt per scored option) and cost B (the item's own text)."""
    ctx = meta["context"].astype(str).str.len().to_numpy(float)
    conts = meta["continuations"].map(lambda c: [] if not hasattr(c, "__len__") or
                                      isinstance(c, str) else list(c))
    n_opt = conts.map(len).to_numpy(float)
    opt_chars = conts.map(lambda c: sum(len(str(x)) for x in c)).to_numpy(float)
    cost_a = np.where(n_opt > 0, n_opt * ctx + opt_chars, ctx)
    own = meta["question"].astype(str).str.len().to_numpy(float)
    cost_b = own + np.where(n_opt > 0, opt_chars, 0.0)
    return {"A (whole prompt)": cost_a, "B (item's own text)": cost_b}


def run(name: str, seed: int = 0) -> list[dict]:
    content = at.load_bank(name)
    rm = at.load_responses(name)
    ids = [i for i in content.item_ids if i in set(rm.item_ids)]
    rm = rm.subset(items=ids)
    content = content.subset(ids)
    train, test = at.stratified_split(rm, rng=np.random.default_rng(seed))
    with warnings.catch_warnings():   # a bank's identification notes are not this study's
        warnings.simplefilter("ignore")
        fit = at.calibrate(train)
    bank = fit.bank
    keep = [i for i in bank.item_ids]
    test = test.subset(items=keep)
    meta = content.metadata.set_index(content.item_ids.astype(str)).loc[keep]
    ref = at.estimate_ability(test, bank, method="eap", extra_items="ignore")["theta"].to_numpy()
    rows = []
    for cname, cost in item_costs(meta.reset_index(drop=True)).items():
        costed = at.ItemBank(bank.item_ids, *bank.params[:2], *bank.params[2:],
                             metadata=pd.DataFrame({"cost": cost}))
        med = float(np.median(cost))
        for mult in (10, 20, 40):
            for sel in ("mfi", "mfi-cost"):
                cfg = at.CATConfig(se_stop=None, min_items=1, max_items=len(keep),
                                   cost_column="cost", budget=mult * med, selection=sel)
                p = simulate_cat(costed, cfg, responses=test, rng=seed + 1).persons
                err = p["theta"].to_numpy() - ref
                rows.append({"benchmark": name, "cost": cname,
                             "cost_cv": float(np.std(cost) / np.mean(cost)), "seed": seed,
                             "budget": f"{mult} x median", "selection": sel,
                             "items": float(p["n_items"].mean()),
                             "mae": float(np.mean(np.abs(err))),
                             "coverage": float(np.mean(np.abs(err) <= 1.96 * p["se"].to_numpy())),
                             "n_test": int(len(p))})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmarks", default="arc,hellaswag,truthfulqa,gsm8k,winogrande,mmlu")
    ap.add_argument("--seeds", type=int, default=5, help="splits and draws: seeds 0..N-1")
    ap.add_argument("--out", type=Path, default=None, help="CSV of the rows")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = [r for b in args.benchmarks.split(",") for s in range(args.seeds) for r in run(b, s)]
    df = pd.DataFrame(rows)
    wide = df.pivot_table(index=["benchmark", "cost", "budget"], columns="selection",
                          values=["items", "mae", "coverage"], sort=False)   # means over seeds
    wide.columns = [f"{v} {s}" for v, s in wide.columns]
    wide["MAE ratio"] = wide["mae mfi-cost"] / wide["mae mfi"]
    print(wide.round(4).to_string())
    print(f"{time.perf_counter() - t0:.0f} s")
    if args.out:
        df.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
