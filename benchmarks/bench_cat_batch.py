"""Batched adaptive rounds on real held-out answers: items used, error and rounds for k = 1..16.

    python benchmarks/bench_cat_batch.py [--benches arc,hellaswag,...] [--seeds 3]
                                         [--taus 0.2,0.3] [--markdown] [-o OUT.csv]

Protocol (the benchmark protocol of ``atlascat.studies.protocol``, seed 0, per benchmark):

1. the dense response matrix ``../shared/data/openllm/dense_<bench>.csv.gz`` (real
   leaderboard answers, no missing cell) is split 90/10 by the seeded, score-stratified split
   (``filtering.stratified_split``, test_size 0.1, 10 bins, ``default_rng(0)``);
2. the paper's item filter and the calibration (IRT model chosen by BIC among 2PL / 3PL) run on
   the train models only, exactly as ``run_benchmark`` does (same generator, same bank);
3. reference: each held-out model's whole-bank WLE theta (every bank item answered);
4. the CAT (paper defaults: first item |b| < 0.5, MFI randomesque 5, EAP on 61 nodes,
   information SE, 30 <= n <= 500) replays each held-out model's real answers with rounds of
   k items (``simulate_cat(..., batch_size=k)``), seeds 0..S-1 for the randomesque draws.

Reported per (bench, tau, variant, k): mean items used, its growth over k = 1 (same tau, same
seeds), MAE of theta against the whole-bank WLE, mean rounds (latency units: one round = one
concurrent batch of requests), averaged over the seeds. Variants (docs/cat.md): ``mepv``
(default: minimum expected posterior variance over the posterior at the start of the round,
round cut where the test is predicted to stop), ``expected`` (picks at the posterior updated
on the expected answers), ``no-cut`` (the same picks, rounds always k long up to max_items),
``preposterior`` (expected information under the preposterior of the estimate).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat.cat.config import CATConfig
from atlascat.cat.simulate import simulate_cat
from atlascat.studies.protocol import BenchmarkConfig, _calibrate
from atlascat.filtering import filter_items, stratified_split
from atlascat.irt.ability import estimate_ability
from atlascat.responses import ResponseMatrix

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "openllm"
BENCHES = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
KS = (1, 2, 4, 8, 16)
VARIANTS = {"mepv": dict(batch_method="mepv", batch_cut="predicted"),          # the default
            "expected": dict(batch_method="expected", batch_cut="predicted"),
            "no-cut": dict(batch_method="expected", batch_cut="none"),
            "preposterior": dict(batch_method="preposterior", batch_cut="predicted")}


def prepare(bench: str, seed: int = 0):
    """Bank calibrated on the train models, the held-out answers and their whole-bank WLE."""
    rm = ResponseMatrix.read(DATA / f"dense_{bench}.csv.gz")
    config = BenchmarkConfig(seed=seed)
    rng = np.random.default_rng(config.seed)
    train, test = stratified_split(rm, test_size=config.test_size, n_bins=config.n_bins, rng=rng)
    train_f, _ = filter_items(train)
    bank, cal = _calibrate(train_f, config, rng)
    y = test.aligned_values(bank.item_ids, extra="ignore")
    ref = estimate_ability(y, bank, method="wle", quadpts=config.quadpts,
                           theta_range=config.theta_range)["theta"].to_numpy()
    return bank, ResponseMatrix(y, test.subject_ids, bank.item_ids), ref, cal["model"], train.n_subjects


def run(benches, taus, seeds, ks=KS, variants=VARIANTS, log=print, seed0=0) -> pd.DataFrame:
    rows = []
    for bench in benches:
        t0 = time.perf_counter()
        bank, test, ref, model, n_train = prepare(bench)
        log(f"{bench}: {model} bank of {len(bank)} items on {n_train} train models, "
            f"{test.n_subjects} held-out models ({time.perf_counter() - t0:.1f} s)")
        for tau in taus:
            config = CATConfig(se_stop=tau)
            for variant, kw in variants.items():
                for k in ks:
                    if k == 1 and variant != next(iter(variants)):
                        continue  # k = 1 is the classic CAT for every variant
                    items, mae, rounds, secs = [], [], [], []
                    for seed in range(seed0, seed0 + seeds):
                        t1 = time.perf_counter()
                        res = simulate_cat(bank, config, responses=test, rng=seed, batch_size=k,
                                           theta_ref=ref, **kw)
                        secs.append(time.perf_counter() - t1)
                        p = res.persons
                        items.append(p["n_items"].mean())
                        mae.append(p["error"].abs().mean())
                        rounds.append(p["rounds"].mean() if "rounds" in p else
                                      (p["n_items"] + p["n_skipped"]).mean())
                    rows.append({"bench": bench, "model": model, "bank_items": len(bank),
                                 "n_test": test.n_subjects, "tau": tau, "variant": variant,
                                 "k": k, "items": float(np.mean(items)),
                                 "items_sd_seeds": float(np.std(items)),
                                 "mae": float(np.mean(mae)), "rounds": float(np.mean(rounds)),
                                 "seconds_median": float(np.median(secs))})
            log(f"  tau {tau} done ({time.perf_counter() - t0:.1f} s)")
    df = pd.DataFrame(rows)
    base = df[df["k"] == 1].set_index(["bench", "tau"])["items"]
    df["growth_pct"] = 100.0 * (df["items"] / base.reindex(
        pd.MultiIndex.from_frame(df[["bench", "tau"]])).to_numpy() - 1.0)
    return df


def timing(repeats: int = 3) -> pd.DataFrame:
    """Wall time of simulate_cat on the paper's 5600-item HellaSwag bank (its 386 test models'
    thetas, model-drawn answers, SE 0.1): classic k = 1 against rounds of 8 per method;
    median of ``repeats`` runs (the tables are built on the first run)."""
    from atlascat.catalogue import load_paper_bank as load_bank, load_test_thetas

    bank = load_bank("hellaswag")
    th = load_test_thetas("hellaswag")["theta"].to_numpy()
    rows = []
    for k, method in [(1, "mepv"), (8, "expected"), (8, "mepv"), (8, "preposterior")]:
        secs = []
        for r in range(repeats):
            t0 = time.perf_counter()
            res = simulate_cat(bank, CATConfig(se_stop=0.1), thetas=th, rng=r, batch_size=k,
                               batch_method=method)
            secs.append(time.perf_counter() - t0)
        rows.append({"k": k, "method": method if k > 1 else "classic",
                     "seconds_median": float(np.median(secs)), "seconds_all": secs,
                     "items": float(res.persons["n_items"].mean())})
    return pd.DataFrame(rows)


def table(df: pd.DataFrame, variant: str = "expected") -> str:
    """Markdown: one line per (bench, tau), items / growth / MAE / rounds for every k."""
    d = df[(df["variant"] == variant) | (df["k"] == 1)]
    ks = sorted(d["k"].unique())
    head = "| bench | tau | " + " | ".join(f"k={k}: items (+%) / MAE / rounds" for k in ks) + " |"
    lines = [head, "|" + "---|" * (2 + len(ks))]
    for (bench, tau), g in d.groupby(["bench", "tau"], sort=False):
        g = g.set_index("k")
        cells = [f"{g.loc[k, 'items']:.1f} ({g.loc[k, 'growth_pct']:+.1f}%) / "
                 f"{g.loc[k, 'mae']:.3f} / {g.loc[k, 'rounds']:.1f}" for k in ks]
        lines.append(f"| {bench} | {tau:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benches", default=",".join(BENCHES))
    ap.add_argument("--taus", default="0.2,0.3")
    ap.add_argument("--seeds", type=int, default=3, help="number of CAT seeds")
    ap.add_argument("--seed0", type=int, default=0, help="first CAT seed")
    ap.add_argument("--ks", default=",".join(map(str, KS)))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--timing", action="store_true",
                    help="only the speed comparison on the 5600-item HellaSwag bank")
    ap.add_argument("-o", "--output", default=None, help="write the full table as CSV")
    a = ap.parse_args(argv)
    if a.timing:
        print(timing().to_string(index=False))
        return
    variants = {v: VARIANTS[v] for v in a.variants.split(",")}
    df = run(a.benches.split(","), [float(t) for t in a.taus.split(",")], a.seeds,
             [int(k) for k in a.ks.split(",")], variants,
             log=lambda msg: print(msg, file=sys.stderr, flush=True), seed0=a.seed0)
    if a.output:
        df.to_csv(a.output, index=False)
    pd.set_option("display.width", 200)
    if a.markdown:
        for v in variants:
            print(f"\n### {v}\n")
            print(table(df, v))
    else:
        print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    ok = df[(df["k"] == 8) & (df["variant"] == "mepv")]["growth_pct"]
    print(f"\nacceptance (k = 8, default variant): max growth over k = 1 = {ok.max():+.1f}% "
          f"(<= 15%: {'yes' if (ok <= 15).all() else 'NO'})")


if __name__ == "__main__":
    main()
