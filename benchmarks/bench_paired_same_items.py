"""The second model asked the first one's items: paired intervals, on held-out pairs.

Shipped banks (``--bench``): for each benchmark (seeded split, bank and link built on the train
models exactly as ``bench_paired.py``), the held-out models replay their real answers. Pairs of
held-out models: (a) the 1% most alike (largest excess agreement on the first model's adaptive
items, as paired.md defines near-duplicates) and (b) random pairs. Per pair:

* **same adaptive items, IRT**: the first model's adaptive test (SE 0.2 plus the bank's stops),
  the second answers those items; :func:`same_items_difference` (model-assisted: observed
  differences on the asked items, IRT predictions on the rest, paired item bootstrap);
* **+ misfit**: the same with a per-model misfit variance (:func:`prediction_misfit`, measured
  on 600 calibration models), scaled by the pair's kappa;
* **same random items**: both answer the same simple random sample of ``--random-items``
  items; :func:`random_items_difference` (design-based);
* **compare-models now**: two separate adaptive tests, each predicted by the link,
  :func:`atlascat.studies.paired.limits_difference` at the shipped pair scale (rho 0, and
  rho 0.5).

Bank folders (``--folder``, BenchPred matrices, interpolation splits of seeds 0..N-1, folders
built as ``bench_paired_folder.py`` builds them): the second target answers the first one's
benchmark-predictor draws (50, with their probabilities) and the difference is Des Raj's
estimate on the per-draw differences (:func:`folder_pairs`), against compare-models' interval
of the two separate predictor runs.

Truth: the difference of the two models' mean scores over all the bank's (folder's) items;
for compare-models on a shipped bank also the published leaderboard difference it is built for.

    PYTHONPATH=src OPENBLAS_NUM_THREADS=1 python benchmarks/bench_paired_same_items.py --bench arc hellaswag mmlu truthfulqa winogrande gsm8k --random-pairs 2000 --boot 100 -o runs/paired_same
    PYTHONPATH=src OPENBLAS_NUM_THREADS=1 python benchmarks/bench_paired_same_items.py --bench --folder v2_ifeval v2_musr v2_arc_challenge helm_mmlu --seeds 4 --random-pairs 2000 -o runs/paired_same_folder
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_paired import SHARED, replay, split_and_fit  # noqa: E402
from atlascat.studies.paired import PAIR_SCALE, excess_agreement, limits_difference  # noqa: E402
from atlascat.errors import ConfigError  # noqa: E402
from atlascat.scorelink.settings import Z95  # noqa: E402


# ------------------------------------------------------------------ the estimators measured
# Kept here, not in the library: the adaptive design they serve did not cover 95%
# (benchmarks/results/paired.md, "The second model asked the first one's items").
#
# same_items_difference: the second model answers exactly the items the first one's test asked
# (the set S, n items of a bank of N). The target is the difference of the two models' mean
# scores over all N items, D = (1/N) sum_j (y_Aj - y_Bj). On S it is observed; on the rest U it
# is predicted by the IRT model (a model-assisted difference estimator, Sarndal, Swensson and
# Wretman 1992, ch. 6):
#     D^ = (1/N) [ sum_{j in S} (y_Aj - y_Bj) + sum_{j in U} (E_A P_j - E_B P_j) ]
# E_A P_j the posterior mean (EAP grid, N(0, 1) prior) of A's probability on item j given its
# answers on S. Variance: (1) the abilities' uncertainty, from a paired bootstrap over the items
# of S (Efron and Tibshirani 1993, ch. 6: both answers resampled together, both posteriors
# refitted, so items answered alike move both abilities together); (2) the answers on U:
# kappa x sum_{j in U} [p_Aj (1 - p_Aj) + p_Bj (1 - p_Bj)], kappa the ratio of the squared
# residuals (y_Aj - y_Bj - p_Aj + p_Bj)^2 to that variance observed on S, one pseudo-item of
# ratio 1 added; optionally (3) 2 kappa x the bank's per-model misfit variance
# (prediction_misfit, measured on the calibration models). Interval D^ +- 1.96 sd.


def _posteriors(loglik_items: np.ndarray, weights: np.ndarray, log_prior: np.ndarray):
    """(B, Q) posteriors over the grid for the item weights ``weights`` (B, n)."""
    lp = weights @ loglik_items + log_prior
    lp -= lp.max(1, keepdims=True)
    post = np.exp(lp)
    return post / post.sum(1, keepdims=True)


def same_items_difference(bank, y_a, y_b, *, misfit_var: float = 0.0, n_boot: int = 200,
                          seed: int = 0, quadpts: int = 61, theta_range=(-6.0, 6.0)) -> dict:
    """First minus second mean score over every item of ``bank`` (0-1), from the two models'
    answers ``y_a`` / ``y_b`` (arrays in the bank's item order, NaN = not asked; scores in
    [0, 1]) on the items both answered, with its 95% interval (the module's estimator).

    Returns ``diff``, ``sd``, ``lo``, ``hi``, ``told_apart``, ``n`` (items both answered),
    ``observed`` (the observed part of the difference, over those items alone) and ``kappa``.
    ``misfit_var``: :func:`prediction_misfit` of the bank (0: the IRT model taken as exact).
    Fewer than 2 items both answered raise :class:`~atlascat.errors.ConfigError`."""
    y_a, y_b = np.asarray(y_a, float), np.asarray(y_b, float)
    n_items = len(bank)
    if y_a.shape != (n_items,) or y_b.shape != (n_items,):
        raise ConfigError(f"answers must have one entry per bank item ({n_items})")
    s = np.isfinite(y_a) & np.isfinite(y_b)
    n = int(s.sum())
    if n < 2:
        raise ConfigError(f"the two models answered {n} common item(s); a paired difference "
                          "needs at least 2")
    if np.any((y_a[s] < 0) | (y_a[s] > 1) | (y_b[s] < 0) | (y_b[s] > 1)):
        raise ConfigError("answers must be scores in [0, 1]")
    nodes = np.linspace(*theta_range, quadpts)
    log_prior = -0.5 * nodes ** 2
    p = bank.probability(nodes)                                   # (Q, N)
    log_p, log_q = bank.log_probability(nodes)
    u = ~s
    pu_sum = p[:, u].sum(1)                                       # expected correct on U
    vu_sum = (p[:, u] * (1 - p[:, u])).sum(1)
    ll = [(y[s][:, None] * log_p[:, s].T + (1 - y[s][:, None]) * log_q[:, s].T)
          for y in (y_a, y_b)]                                    # (n, Q) each
    rng = np.random.default_rng(seed)
    w = np.vstack([np.ones(n), rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot)])
    post = [_posteriors(x, w, log_prior) for x in ll]             # (B + 1, Q) each
    d_obs = float((y_a[s] - y_b[s]).sum())
    reps = (d_obs + post[0] @ pu_sum - post[1] @ pu_sum) / n_items
    diff = float(reps[0])
    var_boot = float(np.var(reps[1:], ddof=1)) if n_boot > 1 else 0.0
    pa, pb = post[0][0] @ p[:, s], post[1][0] @ p[:, s]           # on S, at the point
    resid = (y_a[s] - y_b[s]) - (pa - pb)
    expect = pa * (1 - pa) + pb * (1 - pb)
    prior = float(expect.mean())
    kappa = float((np.sum(resid ** 2) + prior) / (np.sum(expect) + prior))
    var_u = kappa * float(post[0][0] @ vu_sum + post[1][0] @ vu_sum)
    sd = float(np.sqrt(var_boot + var_u / n_items ** 2 + 2 * kappa * misfit_var))
    lo, hi = diff - Z95 * sd, diff + Z95 * sd
    return {"diff": diff, "sd": sd, "lo": lo, "hi": hi, "told_apart": bool(lo > 0 or hi < 0),
            "n": n, "observed": d_obs / n, "kappa": kappa}


def _predictive(bank, y, nodes, log_prior, p, log_p, log_q):
    """A model's predicted mean over all the bank's items from its answers ``y`` (NaN = not
    asked) and the posterior predictive variance of that mean."""
    s = np.isfinite(y)
    ll = (y[s][:, None] * log_p[:, s].T + (1 - y[s][:, None]) * log_q[:, s].T).sum(0)
    post = _posteriors(ll[None, :], np.ones((1, 1)), log_prior)[0]
    pu = p[:, ~s]
    m = post @ pu.sum(1)
    v = post @ pu.sum(1) ** 2 - m ** 2 + post @ (pu * (1 - pu)).sum(1)
    return (y[s].sum() + m) / len(bank), v / len(bank) ** 2


def prediction_misfit(bank, y_full, asked, *, quadpts: int = 61,
                      theta_range=(-6.0, 6.0)) -> float:
    """The variance of one model's predicted mean over all the bank's items beyond what the IRT
    model's posterior predictive says, measured on calibration models: their answers
    ``y_full`` (models x bank items, NaN = unknown) and the items their tests asked
    (``asked``, boolean, same shape): mean((prediction - truth)^2 - predictive variance),
    floored at 0. A per-model deviation from the model (a random effect, as the score link's
    residual), which :func:`same_items_difference` scales by kappa for a pair."""
    y_full, asked = np.asarray(y_full, float), np.asarray(asked, bool)
    nodes = np.linspace(*theta_range, quadpts)
    log_p, log_q = bank.log_probability(nodes)
    p = bank.probability(nodes)
    log_prior = -0.5 * nodes ** 2
    err, var = [], []
    for y, m in zip(y_full, asked):
        est, v = _predictive(bank, np.where(m, y, np.nan), nodes, log_prior, p, log_p, log_q)
        err.append(est - np.nanmean(y))
        var.append(v)
    return float(max(np.mean(np.square(err)) - np.mean(var), 0.0))


def random_items_difference(y_a, y_b, n_items: int) -> dict:
    """First minus second mean score over a population of ``n_items`` items, from the two
    models' answers ``y_a`` / ``y_b`` on the same simple random sample of them (drawn without
    replacement; NaN = not in it): the paired design-based estimator (Cochran 1977, 2.9), its
    variance with Agresti and Min's (2005) adjustment (one pseudo-item d = +1 and one d = -1 of
    weight 1/2, and one d = 0: for 0/1 answers 1/2 added to each cell of the 2 x 2 table),
    which keeps a sample of few disagreements from reading as certain:

        D^ = mean_S d_j,   var = (1 - n/N) [(sum_S d_j^2 + 1) / (n + 2) - (sum_S d_j / (n + 2))^2] / (n + 2),

    d_j = y_Aj - y_Bj. Returns ``diff``, ``sd``, ``lo``, ``hi``, ``told_apart`` and ``n``."""
    y_a, y_b = np.asarray(y_a, float), np.asarray(y_b, float)
    s = np.isfinite(y_a) & np.isfinite(y_b)
    n = int(s.sum())
    if n < 2 or n_items < n:
        raise ConfigError(f"need 2 to {n_items} common items, got {n}")
    d = y_a[s] - y_b[s]
    diff = float(d.mean())
    var_d = max((float(np.sum(d ** 2)) + 1.0) / (n + 2) - (float(d.sum()) / (n + 2)) ** 2, 0.0)
    sd = float(np.sqrt((1 - n / n_items) * var_d / (n + 2)))
    lo, hi = diff - Z95 * sd, diff + Z95 * sd
    return {"diff": diff, "sd": sd, "lo": lo, "hi": hi, "told_apart": bool(lo > 0 or hi < 0),
            "n": n}


def alike_pairs(y, asked, top=0.01, chunk=20000):
    """The ``top`` share of all pairs (i < j) whose answers on i's asked items agree most beyond
    their accuracies (:func:`excess_agreement`)."""
    i, j = np.triu_indices(len(y), 1)
    ex = np.concatenate([excess_agreement(y[i[k:k + chunk]], y[j[k:k + chunk]],
                                          asked[i[k:k + chunk]])
                         for k in range(0, len(i), chunk)])
    ex = np.nan_to_num(ex, nan=-np.inf)
    keep = ex >= np.quantile(ex[np.isfinite(ex)], 1 - top)
    return i[keep], j[keep]


def run(bench, seed, n_random, random_items, n_boot):
    t0 = time.perf_counter()
    scores, train, test, bank, link, _ = split_and_fit(bench, seed)
    yt = train.aligned_values(bank.item_ids, extra="ignore")
    yt = yt[np.isfinite(yt).mean(1) >= 0.9]
    yt = yt[np.random.default_rng([seed, 41]).permutation(len(yt))[:600]]
    misfit = prediction_misfit(bank, yt, replay(bank, link, yt, "adaptive", seed)[3])
    y = test.aligned_values(bank.item_ids, extra="ignore")
    pub = scores.reindex(test.subject_ids.astype(str)).to_numpy(float)
    keep = np.isfinite(y).mean(1) >= 0.9
    y, pub = y[keep], pub[keep]
    full = np.nanmean(y, 1)
    pred, lo, hi, asked = replay(bank, link, y, "adaptive", seed)
    rng = np.random.default_rng([seed, 40])
    ai, aj = alike_pairs(y, asked)
    ri, rj = rng.integers(len(y), size=(2, n_random))
    ri, rj = ri[ri != rj], rj[ri != rj]
    rows = []
    for label, (i, j) in (("1% most alike", (ai, aj)), ("random", (ri, rj))):
        same, fit, rand = [], [], {k: [] for k in random_items}
        for a, b in zip(i, j):
            m = asked[a]
            r = same_items_difference(bank, np.where(m, y[a], np.nan),
                                      np.where(m, y[b], np.nan), n_boot=n_boot,
                                      seed=int(a) * 7919 + int(b))
            same.append(r)
            extra = 2 * r["kappa"] * misfit      # the same estimate with the misfit's variance
            sd = float(np.sqrt(r["sd"] ** 2 + extra))
            fit.append(r | {"sd": sd, "lo": r["diff"] - 1.96 * sd, "hi": r["diff"] + 1.96 * sd,
                            "told_apart": abs(r["diff"]) > 1.96 * sd})
            for k in random_items:
                if k >= len(bank):                # every item: the exact difference
                    continue
                pick = np.zeros(len(bank), bool)
                pick[rng.choice(len(bank), size=min(k, len(bank)), replace=False)] = True
                rand[k].append(random_items_difference(np.where(pick, y[a], np.nan),
                                                       np.where(pick, y[b], np.nan), len(bank)))
        truth = full[i] - full[j]
        now = limits_difference(pred[i], lo[i], hi[i], pred[j], lo[j], hi[j],
                                scale=PAIR_SCALE.get(bench, 1.0))
        now5 = limits_difference(pred[i], lo[i], hi[i], pred[j], lo[j], hi[j],
                                 scale=PAIR_SCALE.get(bench, 1.0), rho=0.5)
        out = {"benchmark": bench, "seed": seed, "pairs": label, "n": len(i),
               "bank_items": len(bank), "misfit_sd": 100 * misfit ** 0.5,
               "items_adaptive": float(np.mean([r["n"] for r in same])),
               "abs_truth_median": 100 * float(np.median(np.abs(truth)))}
        for name, res in (("same_adaptive", pd.DataFrame(same)),
                          ("same_adaptive_misfit", pd.DataFrame(fit)),
                          *((f"same_random{k}", pd.DataFrame(v)) for k, v in rand.items()
                            if v)):
            cover = (res["lo"] <= truth) & (truth <= res["hi"])
            out[f"{name}_coverage"] = float(cover.mean())
            out[f"{name}_halfwidth"] = 100 * float(np.median(res["hi"] - res["lo"]) / 2)
            out[f"{name}_told_apart"] = float(res["told_apart"].mean())
            wrong = ((res["lo"] > 0) & (truth < 0)) | ((res["hi"] < 0) & (truth > 0))
            out[f"{name}_wrong_way"] = float(wrong.mean())
        for name, d in (("now", now), ("now_rho05", now5)):
            out[f"{name}_coverage_full"] = float(np.mean((d["lo"] <= truth) & (truth <= d["hi"])))
            t = pub[i] - pub[j]
            out[f"{name}_coverage_published"] = float(np.mean((d["lo"] <= t) & (t <= d["hi"])))
            out[f"{name}_halfwidth"] = 100 * float(np.median(d["hi"] - d["lo"]) / 2)
            out[f"{name}_told_apart"] = float(np.mean(d["told_apart"]))
        out["kappa_median"] = float(np.median([r["kappa"] for r in same]))
        rows.append(out)
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()},
              flush=True)
    print(f"{bench} seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
    return rows


def _cell(r, key, digits=1):
    """'coverage / half-width / told apart' of a design, or '-' where it was not run
    (compare-models' coverage: of the full-score difference, ``now_coverage_full``)."""
    cov = f"{key}_coverage_full" if key == "now" else f"{key}_coverage"
    if cov not in r or pd.isna(r[cov]):
        return "-"
    return (f"{100 * r[cov]:.1f}% / {r[key + '_halfwidth']:.{digits}f} / "
            f"{100 * r[key + '_told_apart']:.0f}%")


def markdown(df: pd.DataFrame) -> str:
    """One table for the shipped banks, one for the bank folders: per design, coverage of the
    true full-score difference / median half-width (points) / share told apart."""
    out = []
    bank = df[df["same_adaptive_coverage"].notna()] if "same_adaptive_coverage" in df else df[:0]
    if len(bank):
        out += ["| benchmark | pairs | items: adaptive / bank | same adaptive items, IRT "
                "| + misfit | same 50 random items | same 100 random items | compare-models now "
                "| now: coverage of the published difference | now, rho 0.5 |",
                "|" + "---|" * 10]
        for _, r in bank.iterrows():
            out.append(f"| {r['benchmark']} | {r['pairs']} | {r['items_adaptive']:.0f} / "
                       f"{int(r['bank_items'])} | " + " | ".join(
                           _cell(r, k) for k in ("same_adaptive", "same_adaptive_misfit",
                                                 "same_random50", "same_random100")) +
                       f" | {100 * r['now_coverage_full']:.1f}% / {r['now_halfwidth']:.1f} / "
                       f"{100 * r['now_told_apart']:.0f}% | "
                       f"{100 * r['now_coverage_published']:.1f}% | "
                       f"{100 * r['now_rho05_coverage_full']:.1f}% / "
                       f"{r['now_rho05_halfwidth']:.1f} |")
    fold = df[df["same_draws_coverage"].notna()] if "same_draws_coverage" in df else df[:0]
    if len(fold):
        g = fold.groupby(["benchmark", "pairs"], sort=False)
        agg = g[[c for c in fold.columns if c.startswith(("same_draws", "now_"))]].mean()
        agg["n"] = g["n"].sum()
        out += ["", "| data | pairs (all seeds) | same draws, Des Raj with the IRT control "
                "| same draws, plain Des Raj | compare-models now |", "|" + "---|" * 5]
        for (name, label), r in agg.iterrows():
            out.append(f"| {name} | {label} ({r['n']:,.0f}) | {_cell(r, 'same_draws')} | "
                       f"{_cell(r, 'same_draws_plain')} | {_cell(r, 'now', 1)} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", nargs="*", default=["arc"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--random-pairs", type=int, default=3000)
    ap.add_argument("--random-items", type=int, nargs="*", default=[50, 100])
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--folder", nargs="*", default=[],
                    help="BenchPred matrices (bench_benchpred.py's names) for the bank-folder part")
    ap.add_argument("--seeds", type=int, default=1, help="folder part: seeds 0..N-1")
    ap.add_argument("-o", "--output", type=Path, default=Path("runs/paired_same"))
    args = ap.parse_args(argv)
    rows = [r for b in args.bench
            for r in run(b, args.seed, args.random_pairs, args.random_items, args.boot)]
    rows += [r for name in args.folder for sd in range(args.seeds)
             for r in folder_pairs(name, sd, args.random_pairs)]
    df = pd.DataFrame(rows)
    args.output.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.output / "paired_same.csv", index=False)
    md = markdown(df)
    (args.output / "paired_same.md").write_text(md + "\n")
    print(md)



# ------------------------------------------------------------------ bank folders (predictor)
def forced_controls(y, items, valid, tables, log_prior):
    """A model's IRT control variates along another model's draws ``items``: f_j^(k) (the
    posterior-mean P of the item drawn k-th, given this model's answers to the draws before k)
    and f_rest^(k) (their sum over the items not drawn yet), as
    :func:`atlascat.predict.estimators.sequential_design` computes them for its own draws."""
    from atlascat.predict import estimators as est

    p, log_p, log_q = tables
    rows = np.arange(len(y))
    lp = np.tile(log_prior, (len(y), 1))
    remaining = np.isfinite(y).copy()
    yv = np.nan_to_num(y)
    f_out, rest_out = np.zeros(items.shape), np.zeros(items.shape)
    for k in range(items.shape[1]):
        f = est.posterior(lp) @ p
        j = items[:, k]
        f_out[:, k] = np.where(valid[:, k], f[rows, j], 0.0)
        rest_out[:, k] = np.where(remaining, f, 0.0).sum(1)
        remaining[rows, j] &= ~valid[:, k]
        yj = yv[rows, j][:, None]
        lp += np.where(valid[:, k][:, None], yj * log_p[:, j].T + (1 - yj) * log_q[:, j].T, 0)
    return f_out, rest_out


def folder_pairs(name, seed, n_random, budget=50):
    """Held-out targets of a BenchPred matrix on a bank folder built on the rest; pairs (the
    1% most alike on every item, random pairs): the second target answers the first one's
    predictor draws, and the paired Des Raj estimate of the difference (module docstring)."""
    import contextlib
    import importlib.util
    import io
    import tempfile
    import warnings

    from atlascat.bankdir import build_bank, replay_predictor
    from atlascat.bankdir.predict import load_predictor
    from atlascat.predict import estimators as est

    spec = importlib.util.spec_from_file_location("bench_benchpred",
                                                  ROOT / "benchmarks" / "bench_benchpred.py")
    bp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bp)
    df = bp.load(name)
    full = df.to_numpy(float)
    src, tgt = bp.split_models(full, "interpolation", seed, df.index)
    with tempfile.TemporaryDirectory() as tmp:
        source = bp._write(df, src, Path(tmp) / "SOURCE.csv")
        targets = pd.DataFrame(full[tgt], columns=[str(c) for c in df.columns],
                               index=pd.Index([f"m{i}" for i in tgt], name="model"))
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            folder = build_bank(source, Path(tmp) / "BANK", chance=bp.CHANCE[name], seed=seed,
                                budget=budget)
            now = replay_predictor(folder, targets, budget=budget, seed=1000 * seed)
            predictor = load_predictor(folder)
    now = now.set_index("subject_id").loc[targets.index]
    s, lo, hi = (now[c].to_numpy(float) for c in ("score", "score_lo", "score_hi"))
    cols = {str(c): k for k, c in enumerate(df.columns)}
    y = np.full((len(tgt), len(predictor.item_ids_)), np.nan)
    for k, item in enumerate(predictor.item_ids_):
        if str(item) in cols:
            y[:, k] = full[tgt][:, cols[str(item)]]
    truth = np.nanmean(y, 1)
    tables, _, log_prior = predictor._grid()
    d = est.sequential_design(y, tables, log_prior, budget, float(predictor.mix),
                              np.random.default_rng([seed, 50]))
    i, j = np.triu_indices(len(tgt), 1)
    ex = excess_agreement(y[i], y[j])
    top = ex >= np.quantile(ex, 0.99)
    rng = np.random.default_rng([seed, 51])
    pick = rng.choice(len(i), size=min(n_random, len(i)), replace=False)
    rows = []
    for label, (a, b) in (("1% most alike", (i[top], j[top])), ("random", (i[pick], j[pick]))):
        item, valid, q = d["item"][a], d["valid"][a], d["q"][a]
        f_b, rest_b = forced_controls(y[b], item, valid, tables, log_prior)
        f_a, rest_a = forced_controls(y[a], item, valid, tables, log_prior)
        ya = np.take_along_axis(np.nan_to_num(y[a]), item, 1)
        yb = np.take_along_axis(np.nan_to_num(y[b]), item, 1)
        tr = truth[a] - truth[b]
        n_items = np.isfinite(y[a]).sum(1)
        cm = limits_difference(s[a], lo[a], hi[a], s[b], lo[b], hi[b])
        out = {"benchmark": name, "seed": seed, "pairs": label, "n": len(a),
               "abs_truth_median": 100 * float(np.median(np.abs(tr)))}
        zero = np.zeros_like(q)
        for key, (f, rest) in (("same_draws", (f_a - f_b, rest_a - rest_b)),
                               ("same_draws_plain", (zero, zero))):
            total, se = est.terms_mean(est.draw_terms(ya - yb, q, f, rest, valid), valid)
            diff, sd = total / n_items, se / n_items
            plo, phi = diff - 1.96 * sd, diff + 1.96 * sd
            out |= {f"{key}_coverage": float(np.mean((plo <= tr) & (tr <= phi))),
                    f"{key}_halfwidth": 100 * float(np.median(1.96 * sd)),
                    f"{key}_told_apart": float(np.mean((plo > 0) | (phi < 0))),
                    f"{key}_wrong_way": float(np.mean(((plo > 0) & (tr < 0))
                                                      | ((phi < 0) & (tr > 0))))}
        out |= {"now_coverage_full": float(np.mean((cm["lo"] <= tr) & (tr <= cm["hi"]))),
                "now_halfwidth": 100 * float(np.median(cm["hi"] - cm["lo"]) / 2),
                "now_told_apart": float(np.mean(cm["told_apart"]))}
        rows.append(out)
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()},
              flush=True)
    return rows


if __name__ == "__main__":
    main()
