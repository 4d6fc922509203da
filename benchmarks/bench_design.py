"""Evaluation design: figures and timings for optimal forms, multidimensional IRT/CAT and arenas.

Sections (all by default; ``--sections forms mirt mcat arena``):

- forms: D/A/E-optimal 50-item forms on the five published banks; time to build; integrated
  information and criterion vs the median of 50 random 50-item forms; what it buys: RMSE of EAP
  theta of 2000 simulated examinees (theta ~ N(0, 1), answers drawn from the bank) on the D-optimal
  form vs 20 random forms.
- mirt: recovery of simulated 2-dimensional loadings (Tucker congruence after Procrustes), the
  dimension chosen by held-out cells among K = 1..5, timings; the same choice on real data
  (60 ARC + 60 GSM8K items of the 1407 models that took both).
- mcat: 2-dimensional CAT, D-rule vs A-rule vs random selection: RMSE after 10/20/30 items and
  items to reach posterior SD <= 0.3 on both dimensions.
- arena: adaptive matchmaking (D-optimal "det" criterion) vs random vs round-robin: games to
  reach Spearman >= 0.95 with the true ratings (20 players, rating sd 0.5 / 1 / 2, 30 seeds),
  mean over seeds and the paired difference adaptive - random with its standard error;
  information per game; final rating RMSE.

Run: ``.venv/bin/python benchmarks/bench_design.py [--quick] [--sections forms arena]``.
Timings on a shared machine are inflated; set OPENBLAS_NUM_THREADS=1 when other jobs run.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 20)


def timed(fn, repeat=1):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, float(np.median(times))


# ---------------------------------------------------------------------------------------- forms
def bench_forms(quick: bool):
    from atlascat.catalogue import BANK_BENCHMARKS, load_paper_bank as load_bank
    from atlascat.design.optimal import optimal_form, random_form_baseline, random_forms
    from atlascat.irt.ability import eap

    rows, buys = [], []
    for bench in BANK_BENCHMARKS:
        bank = load_bank(bench)
        for crit in "DAE":
            res, secs = timed(lambda: optimal_form(bank, 50, crit), repeat=1 if quick else 3)
            cmp = random_form_baseline(bank, res.indices, crit, n_forms=50, rng=np.random.default_rng(0))
            rows.append({"bank": bench, "items": len(bank), "criterion": crit, "seconds": secs,
                         "value": cmp["value"], "random_median": cmp["random_median"],
                         "info": cmp["info"], "random_info_median": cmp["random_info_median"],
                         "info_ratio": cmp["info_ratio"], "beats": cmp["fraction_beaten"],
                         "exchanges": res.n_exchanges})
        rng = np.random.default_rng(1)
        theta = rng.standard_normal(2000)
        d_form = optimal_form(bank, 50, "D").indices
        forms = [d_form] + list(random_forms(len(bank), 50, 5 if quick else 20, rng))
        rmse = []
        for form in forms:
            sub = bank.subset(np.asarray(form))
            y = (rng.random((theta.size, 50)) < sub.probability(theta)).astype(float)
            est, _ = eap(y, sub)
            rmse.append(float(np.sqrt(np.mean((est - theta) ** 2))))
        buys.append({"bank": bench, "rmse_D_optimal": rmse[0], "rmse_random_median": float(np.median(rmse[1:])),
                     "rmse_ratio": rmse[0] / float(np.median(rmse[1:]))})
    print("\n== optimal 50-item forms vs the median of 50 random forms (theta ~ N(0, 1))")
    print(pd.DataFrame(rows).round(4).to_string(index=False))
    print("\n== what it buys: EAP RMSE of 2000 simulees, D-optimal form vs random forms (50 items)")
    print(pd.DataFrame(buys).round(4).to_string(index=False))


# ---------------------------------------------------------------------------------------- mirt
def bench_mirt(quick: bool):
    from atlascat.catalogue import load_responses
    from atlascat.irt.multidim import (MultidimBank, MultidimIRT, procrustes, select_dimension,
                                       simulate_responses, tucker_congruence)

    rng = np.random.default_rng(11)
    n_items, n_subj = 40, 2000
    A = rng.uniform(0.0, 0.3, (n_items, 2))
    A[np.arange(n_items), np.arange(n_items) * 2 // n_items] = rng.uniform(1.0, 2.2, n_items)
    bank = MultidimBank([f"q{j}" for j in range(n_items)], A, rng.normal(0, 1, n_items))
    y = simulate_responses(bank, rng.standard_normal((n_subj, 2)), rng)
    rows = []
    for method in ("em", "mhrm"):
        model, secs = timed(lambda: MultidimIRT(2, method=method, rng=np.random.default_rng(0)).fit(y))
        aligned, _ = procrustes(model.bank_.loadings, A)
        phi = tucker_congruence(aligned, A)
        rows.append({"method": method, "seconds": secs, "n_iter": model.n_iter_,
                     "converged": model.converged_, "tucker_f1": phi[0], "tucker_f2": phi[1],
                     "max_abs_loading_error": float(np.abs(aligned - A).max()),
                     "max_abs_intercept_error": float(np.abs(model.bank_.intercepts - bank.intercepts).max())})
    print(f"\n== M2PL recovery: simulated 2-D simple structure, {n_subj} x {n_items}")
    print(pd.DataFrame(rows).round(4).to_string(index=False))
    dims = (1, 2, 3) if quick else (1, 2, 3, 4, 5)
    sel, secs = timed(lambda: select_dimension(y, dims=dims, rng=np.random.default_rng(0)))
    print(f"\n== dimension choice on the simulated 2-D data (20% held-out cells), {secs:.1f} s: chosen K = "
          f"{sel.n_dims} (lowest log-loss at K = {sel.best_n_dims})")
    print(sel.table.round(5).to_string(index=False))

    arc, gsm = load_responses("arc"), load_responses("gsm8k")
    common = sorted(set(arc.subject_ids) & set(gsm.subject_ids))
    r = np.random.default_rng(0)
    ia, ig = r.choice(arc.n_items, 60, replace=False), r.choice(gsm.n_items, 60, replace=False)
    ya = pd.DataFrame(arc.values, index=arc.subject_ids).loc[common].to_numpy()[:, ia]
    yg = pd.DataFrame(gsm.values, index=gsm.subject_ids).loc[common].to_numpy()[:, ig]
    yr = np.hstack([ya, yg])
    dims = (1, 2, 3) if quick else (1, 2, 3, 4)
    sel, secs = timed(lambda: select_dimension(yr, dims=dims, rng=np.random.default_rng(0), quadpts=21))
    print(f"\n== real data: 60 ARC + 60 GSM8K items, {yr.shape[0]} models, {secs:.1f} s: chosen K = "
          f"{sel.n_dims} (lowest log-loss at K = {sel.best_n_dims})")
    print(sel.table.round(5).to_string(index=False))
    L = np.abs(sel.models[2].bank_.loadings)
    print("   K = 2 varimax |loadings|, mean over ARC items:", L[:60].mean(0).round(3),
          " over GSM8K items:", L[60:].mean(0).round(3))


# ---------------------------------------------------------------------------------------- mcat
def bench_mcat(quick: bool):
    from atlascat.cat.multidim import simulate_mcat
    from atlascat.irt.multidim import MultidimBank

    rng = np.random.default_rng(0)
    n_items = 300
    A = rng.uniform(0.0, 0.3, (n_items, 2))
    A[np.arange(n_items), np.arange(n_items) % 2] = rng.uniform(0.8, 2.5, n_items)
    bank = MultidimBank([f"i{j}" for j in range(n_items)], A, rng.normal(0, 1.5, n_items))
    theta = rng.standard_normal((300 if quick else 1000, 2))
    rows = []
    for rule in ("D", "A", "random"):
        res, secs = timed(lambda: simulate_mcat(bank, true_theta=theta, max_items=30, selection=rule,
                                                rng=np.random.default_rng(1)))
        row = {"selection": rule, "seconds_30_items": secs}
        for n in (10, 20, 30):
            row[f"rmse_{n}"] = float(np.sqrt(np.mean((res.trace[:, n - 1] - theta) ** 2)))
        stop = simulate_mcat(bank, true_theta=theta, max_items=200, se_target=0.3, selection=rule,
                             rng=np.random.default_rng(1))
        row["items_to_sd_0.3"] = float(stop.n_items.mean())
        rows.append(row)
    print(f"\n== 2-D CAT on a 300-item M2PL bank, {theta.shape[0]} simulees (RMSE over both dimensions)")
    print(pd.DataFrame(rows).round(4).to_string(index=False))


# ---------------------------------------------------------------------------------------- arena
def bench_arena(quick: bool):
    from atlascat.design.arena import compare_schedulers

    seeds = 5 if quick else 30
    out = []
    for sd in (0.5, 1.0, 2.0):
        t = time.perf_counter()
        df = compare_schedulers(20, rating_sd=sd, n_seeds=seeds, n_games=4000)
        secs = time.perf_counter() - t
        for metric in ("games_first", "games_sustained", "info_per_game", "final_rmse"):
            wide = df.pivot(index="seed", columns="strategy", values=metric)
            row = {"rating_sd": sd, "metric": metric}
            for strat in ("adaptive", "random", "round_robin"):
                row[strat] = wide[strat].mean()
            diff = wide["adaptive"] - wide["random"]
            row["adaptive-random"] = f"{diff.mean():.4g} +- {diff.std(ddof=1) / np.sqrt(len(diff)):.2g}"
            out.append(row)
        reached = df.groupby("strategy").reached.mean().round(2).to_dict()
        print(f"   sd {sd}: {secs:.0f} s; share of runs that reached and kept 0.95: {reached}", flush=True)
    print(f"\n== arena: games to Spearman >= 0.95 (20 players, {seeds} seeds, 4000 games max, batches of 10;"
          " unreached runs count as 4000), information per game (at the truth), final rating RMSE;"
          " differences are paired over seeds (mean +- SE)")
    print(pd.DataFrame(out).round(4).to_string(index=False))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer seeds and dimensions")
    parser.add_argument("--sections", nargs="+", default=["forms", "mirt", "mcat", "arena"],
                        choices=["forms", "mirt", "mcat", "arena"])
    args = parser.parse_args()
    for section in args.sections:
        t = time.perf_counter()
        {"forms": bench_forms, "mirt": bench_mirt, "mcat": bench_mcat, "arena": bench_arena}[section](args.quick)
        print(f"[{section}: {time.perf_counter() - t:.1f} s]", flush=True)


if __name__ == "__main__":
    main()
