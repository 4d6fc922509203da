"""Held-out study of the Open LLM Leaderboard suite (issue 18): one adaptive test for the average.

Split (seeded, ``--seed``): ``--test-size`` of the models present in all six dense matrices with
all six published scores (the *dense* held-out set, the acceptance population) and the same
share of the other models of the whole population (the union matrices; MMLU dense) with all six
published scores (the *union* held-out set, weak models included). Everything is rebuilt on the
rest, exactly as shipped: the six banks and score links (``fit_bank_and_link``; the IRT model of
the shipped bank, to skip the model search), the joint prior (``fit_prior``) and the joint link
(``fit_joint_link``: the suite test replayed on the calibration models). The held-out models
never touch them. Each held-out model then takes, replaying its real answers:

- ``suite``: the suite test (``SuiteConfig``: ``--max-items``, ``--target-se``, ...), predicted
  average and scores with the joint link and its answer stacking (the item residuals of the
  answers; ``--no-answer-stacking``: without) and its neighbour correction (``--no-neighbours``:
  without); ``suite (no neighbour correction)``: the same test without that correction;
  ``suite (no joint link)``: the members' own curves;
- ``six tests``: six separate adaptive tests (SE 0.2, each bank's default stopping rules), each
  predicted by its link (answer corrections on), averaged;
- ``random-k`` / ``random-2k``: k = the suite's mean number of items (2k), spread evenly over the
  six banks, drawn at random (20 draws shared by all models); per benchmark a straight line
  from the accuracy on its drawn items to the score, fitted on the calibration models.

Errors in points (0-100). Run::

    PYTHONPATH=src OPENBLAS_NUM_THREADS=1 python benchmarks/bench_suite.py --seed 0 -o runs/suite
"""
from __future__ import annotations

import argparse
import copy
import json
import pickle
import time
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat.cat.config import CATConfig
from atlascat.cat.simulate import simulate_cat
from atlascat.live.build_bank import BENCHMARKS, fit_bank_and_link
from atlascat.catalogue import load_score_link
from atlascat.suite.prior import COMPONENTS
from atlascat.suite import (SuiteConfig, SuiteMember, fit_joint_link, fit_prior,
                            simulate_suite)
from build_suite import calibration_data, openllm_suite


def split(seed, test_size, populations, scores):
    """(dense held-out ids, union held-out ids, calibration ids)."""
    from atlascat import catalogue

    full = pd.DataFrame({b: scores[b] for b in BENCHMARKS}).dropna()
    dense = set.intersection(*[set(catalogue.load_responses(b).subject_ids.astype(str))
                               for b in BENCHMARKS]) & set(full.index)
    union = set().union(*[set(rm.subject_ids.astype(str)) for rm in populations.values()])
    other = (union & set(full.index)) - dense
    rng = np.random.default_rng([seed, 18])
    pick = lambda ids: sorted(rng.choice(sorted(ids), int(round(test_size * len(ids))),  # noqa
                                         replace=False))
    t_dense, t_union = pick(dense), pick(other)
    return t_dense, t_dense + t_union, sorted(union - set(t_dense) - set(t_union))


def populations_and_scores():
    """Per benchmark: the whole population's answers (models with a published score) and the
    published scores (0-1)."""
    return calibration_data(BENCHMARKS)


def training_responses(populations, train_ids) -> dict:
    """Each benchmark's population restricted to the calibration models."""
    return {b: rm.subset(subjects=np.isin(rm.subject_ids.astype(str), train_ids))
            for b, rm in populations.items()}


def rebuild(seed, train_resp, scores):
    """Banks and links of the six benchmarks on the calibration models only."""
    members, banks_info = [], {}
    for b in BENCHMARKS:
        t0 = time.perf_counter()
        bank, link, info = fit_bank_and_link(train_resp[b], scores[b], bench=b,
                                             model=load_score_link(b).info["model"], seed=seed,
                                             leaderboard_scores=scores[b].to_numpy(float))
        banks_info[b] = {"items": len(bank), "model": info["model"],
                         "seconds": round(time.perf_counter() - t0, 1)}
        print(f"  {b}: {len(bank)} items, {info['model']}, {banks_info[b]['seconds']} s",
              flush=True)
        members.append(SuiteMember(b, bank, 1.0 / len(BENCHMARKS), link))
    return members, banks_info


def rebuilt_suite(seed, test_size, cache, train_resp, scores):
    """(suite, banks_info) of a split: read from ``cache`` (a folder; None: none) or rebuilt
    (:func:`rebuild`) and written there."""
    path = Path(cache) / f"seed{seed}_{test_size}.pkl" if cache else None
    if path is not None and path.exists():
        return pickle.loads(path.read_bytes())
    members, banks_info = rebuild(seed, train_resp, scores)
    suite = openllm_suite(members=members)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps((suite, banks_info)))
    return suite, banks_info


def answers_for(rm, bank, ids) -> np.ndarray:
    """(len(ids), items) answers of models ``ids`` to ``bank``'s items (NaN: none)."""
    pos = pd.Index(rm.subject_ids.astype(str)).get_indexer(ids)
    y = np.full((len(ids), len(bank)), np.nan)
    y[pos >= 0] = rm.aligned_values(bank.item_ids, extra="ignore")[pos[pos >= 0]]
    return y


def six_tests(suite, populations, ids, seed):
    """Six separate adaptive tests (SE 0.2, the link's stopping rules): per benchmark score,
    lo, hi and items, (N, 6) each."""
    n = len(ids)
    out = {k: np.full((n, len(BENCHMARKS)), np.nan) for k in ("score", "lo", "hi", "items")}
    for j, m in enumerate(suite.members):
        y = answers_for(populations[m.name], m.bank, ids)
        rows = np.isfinite(y).mean(1) >= 0.9
        cfg = CATConfig(se_stop=0.2, **m.link.stop_settings())
        res = simulate_cat(m.bank, cfg, responses=y[rows], rng=np.random.default_rng([seed, j]))
        th = res.persons["theta"].to_numpy(float)
        se = res.persons["se"].to_numpy(float)
        asked = res.asked_mask()
        s, lo, hi = m.link.predict_many(th, se, asked=asked, y=y[rows])
        for k, v in (("score", s), ("lo", lo), ("hi", hi), ("items", asked.sum(1))):
            out[k][rows, j] = v
    return out


def random_k(suite, populations, scores, train_ids, ids, per_bench, seed, reps=20):
    """Mean over draws of the predicted average from ``per_bench`` random items per bank."""
    preds = np.zeros((reps, len(ids), len(BENCHMARKS)))
    for j, m in enumerate(suite.members):
        rm = populations[m.name]
        y_all = rm.aligned_values(m.bank.item_ids, extra="ignore")
        idx = pd.Index(rm.subject_ids.astype(str))
        tr = idx.get_indexer(train_ids)
        tr = tr[tr >= 0]
        y_tr, y_te = y_all[tr], answers_for(rm, m.bank, ids)
        s_tr = scores[m.name].reindex(idx[tr]).to_numpy(float)
        k = int(min(len(m.bank), max(1, per_bench)))
        for r in range(reps):
            sel = np.random.default_rng([seed, 30, j, k, r]).choice(len(m.bank), k, replace=False)
            with np.errstate(invalid="ignore", divide="ignore"):
                a_tr = np.nanmean(y_tr[:, sel], 1)
                ok = np.isfinite(a_tr) & np.isfinite(s_tr)
                coef = np.polyfit(a_tr[ok], s_tr[ok], 1)
                acc = np.nanmean(y_te[:, sel], 1)
            fallback = np.nanmean(s_tr)
            preds[r, :, j] = np.where(np.isfinite(acc), np.polyval(coef, acc), fallback)
    return preds


def markdown(df: pd.DataFrame, digits: int = 2) -> str:
    """A DataFrame as a GitHub markdown table."""
    fmt = lambda v: f"{v:.{digits}f}" if isinstance(v, (float, np.floating)) else str(v)  # noqa
    head = "| " + " | ".join(map(str, df.columns)) + " |\n|" + "---|" * df.shape[1] + "\n"
    return head + "\n".join("| " + " | ".join(fmt(v) for v in row) + " |"
                             for row in df.itertuples(index=False)) + "\n"


def average_pairs(pred, lo, hi, truth) -> dict:
    """Every pair of models: the difference of the predicted averages with the paired interval
    (``atlascat.studies.paired``, the average's pair scale, rho 0) against the true
    difference (``bench_paired``'s pairs and scoring)."""
    from atlascat.studies.paired import PAIR_SCALE
    from bench_paired import evaluate_pairs, pair_arrays

    return evaluate_pairs(pair_arrays(truth, pred, lo, hi), PAIR_SCALE["average"])


def summary(name, items, pred, lo, hi, truth):
    err = 100 * np.abs(pred - truth)
    row = {"method": name, "items": float(np.mean(items)), "mae": float(np.mean(err)),
           "rmse": float(np.sqrt(np.mean(err ** 2))), "p90": float(np.quantile(err, 0.9)),
           "share_over_1.8": float(np.mean(err > 1.8))}
    if lo is not None:
        row["coverage"] = float(np.mean((truth >= lo) & (truth <= hi)))
        row["width"] = float(100 * np.mean(hi - lo))
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--test-size", type=float, default=0.2)
    ap.add_argument("--run-seed", type=int, default=None,
                    help="seed of the tests' random choices (randomesque, posterior draws, the "
                         "joint link's cross-validation; default: --seed): the same split "
                         "replicated")
    ap.add_argument("--max-items", type=int, default=150)
    ap.add_argument("--target-se", type=float, default=SuiteConfig.target_se)
    ap.add_argument("--batch-size", type=int, default=SuiteConfig.batch_size)
    ap.add_argument("--member-weight", type=float, default=SuiteConfig.member_weight)
    ap.add_argument("--min-items", type=int, default=SuiteConfig.min_items)
    ap.add_argument("--min-per-member", type=int, default=SuiteConfig.min_per_member)
    ap.add_argument("--components", type=int, default=COMPONENTS,
                    help="normal mixture components of the joint prior (1: one normal)")
    ap.add_argument("--randomesque", type=int, default=SuiteConfig.randomesque)
    ap.add_argument("--no-corrections", action="store_true",
                    help="without the member links' answer corrections")
    ap.add_argument("--no-joint-link", action="store_true", help="skip the joint link")
    ap.add_argument("--no-answer-stacking", action="store_true",
                    help="the joint link without its answer stacking (item residuals)")
    ap.add_argument("--no-neighbours", action="store_true",
                    help="the joint link without its neighbour correction")
    ap.add_argument("--cache", default=None,
                    help="folder to keep the rebuilt banks, links and prior between runs")
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--no-baselines", action="store_true",
                    help="skip the six tests and random-k (quick runs of the suite alone)")
    ap.add_argument("--no-union", action="store_true", help="skip the union held-out table")
    ap.add_argument("-o", "--output", default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    populations, scores = populations_and_scores()
    t_dense, t_all, train_ids = split(args.seed, args.test_size, populations, scores)
    print(f"held-out: {len(t_dense)} dense, {len(t_all)} whole population; "
          f"{len(train_ids)} calibration models", flush=True)
    train_resp = training_responses(populations, train_ids)
    suite, banks_info = rebuilt_suite(args.seed, args.test_size, args.cache, train_resp, scores)
    suite = suite.replace(prior=fit_prior(suite, train_resp, scores,
                                          components=args.components), joint_link=None)
    cfg = SuiteConfig(max_items=args.max_items, target_se=args.target_se,
                      batch_size=args.batch_size, member_weight=args.member_weight,
                      min_items=args.min_items, min_per_member=args.min_per_member,
                      randomesque=args.randomesque, corrections=not args.no_corrections,
                      seed=args.seed if args.run_seed is None else args.run_seed)
    if not args.no_joint_link:
        t1 = time.perf_counter()
        suite = suite.replace(joint_link=fit_joint_link(suite, train_resp, scores, cfg,
                                                        answers=not args.no_answer_stacking,
                                                        neighbours=not args.no_neighbours))
        nb = suite.joint_link.neighbours
        print(f"joint link fitted on {suite.joint_link.n_models} replays, "
              f"{time.perf_counter() - t1:.0f} s" + ("" if nb is None else
              f"; neighbour correction: K {nb.k}, tau {nb.tau:g}, shrinkage "
              f"{np.round(nb.shrink, 2).tolist()}"), flush=True)
    truth = pd.DataFrame({b: scores[b] for b in BENCHMARKS}).loc[t_all].to_numpy(float)
    res = simulate_suite(suite, populations, cfg, subject_ids=t_all)
    df = res.scores
    dense = np.isin(np.asarray(t_all), t_dense)
    avg_true = truth.mean(1)
    rows = []
    d = df[dense]
    rows.append(summary("suite", d["n_items"], d["average"], d["average_lo"], d["average_hi"],
                        avg_true[dense]))
    if suite.joint_link is not None and suite.joint_link.neighbours is not None:
        plain = copy.copy(res.session)
        plain.joint = plain.joint.without_neighbours()
        raw = plain.predict()
        rows.append(summary("suite (no neighbour correction)", d["n_items"],
                            raw["average"][dense], raw["average_lo"][dense],
                            raw["average_hi"][dense], avg_true[dense]))
    if not args.no_joint_link:
        raw = res.session.predict(joint=False)
        rows.append(summary("suite (no joint link)", d["n_items"], raw["average"][dense],
                            raw["average_lo"][dense], raw["average_hi"][dense],
                            avg_true[dense]))
    if args.no_baselines:
        six = {k: np.full((len(t_dense), len(BENCHMARKS)), np.nan)
               for k in ("score", "lo", "hi", "items")}
    else:
        six = six_tests(suite, populations, t_dense, args.seed)
    # six tests' average interval: sum of independent halves is not an interval; report the
    # normal approximation sqrt(sum half_b^2) / 6 instead
    a_half = np.sqrt((((six["hi"] - six["lo"]) / 2) ** 2).sum(1)) / len(BENCHMARKS)
    a_pred = six["score"].mean(1)
    rows.append(summary("six tests (SE 0.2)", six["items"].sum(1), a_pred, a_pred - a_half,
                        a_pred + a_half, avg_true[dense]))
    k = float(d["n_items"].mean())
    for name, kk in (() if args.no_baselines else (("random-k", k), ("random-2k", 2 * k))):
        per = int(round(kk / len(BENCHMARKS)))
        p = random_k(suite, populations, scores, train_ids, t_dense, per, args.seed,
                     args.replicates)
        errs = [summary(name, np.full(len(t_dense), per * 6), p[r].mean(1), None, None,
                        avg_true[dense]) for r in range(p.shape[0])]
        rows.append({key: (float(np.mean([e[key] for e in errs])) if key != "method" else name)
                     for key in errs[0]})
    table = pd.DataFrame(rows)
    per_bench = pd.DataFrame({
        "benchmark": BENCHMARKS,
        "suite_items": [float(d[f"{b}_items"].mean()) for b in BENCHMARKS],
        "suite_mae": [100 * float(np.mean(np.abs(d[b] - truth[dense, j])))
                      for j, b in enumerate(BENCHMARKS)],
        "suite_coverage": [float(np.mean((truth[dense, j] >= d[f"{b}_lo"]) &
                                         (truth[dense, j] <= d[f"{b}_hi"])))
                           for j, b in enumerate(BENCHMARKS)],
        "six_items": np.nanmean(six["items"], 0),
        "six_mae": 100 * np.nanmean(np.abs(six["score"] - truth[dense]), 0),
        "six_coverage": np.nanmean((truth[dense] >= six["lo"]) & (truth[dense] <= six["hi"]), 0),
    })
    per_bench["ratio"] = per_bench["suite_mae"] / per_bench["six_mae"]
    bands = None
    if not args.no_union:
        u = df.copy()
        u["published"] = 100 * avg_true
        u["abs_err"] = 100 * np.abs(u["average"] - avg_true)
        u["covered"] = (avg_true >= u["average_lo"]) & (avg_true <= u["average_hi"])
        u["width"] = 100 * (u["average_hi"] - u["average_lo"])
        u["band"] = (np.floor(u["published"] / 10) * 10).clip(upper=90).astype(int)
        agg = dict(n=("abs_err", "size"), items=("n_items", "mean"), mae=("abs_err", "mean"),
                   coverage=("covered", "mean"), width=("width", "mean"))
        g = u.groupby("band").agg(**agg).reset_index()
        allrow = pd.DataFrame([{"band": "all", "n": len(u), "items": u["n_items"].mean(),
                                "mae": u["abs_err"].mean(), "coverage": u["covered"].mean(),
                                "width": u["width"].mean()}])
        g["band"] = [f"{b}-{b + 10}" for b in g["band"]]
        bands = pd.concat([g, allrow], ignore_index=True)
    pairs = pd.DataFrame([{"models": name} | average_pairs(
        df["average"].to_numpy()[m], df["average_lo"].to_numpy()[m],
        df["average_hi"].to_numpy()[m], avg_true[m])
        for name, m in (("dense held-out", dense), ("whole population", np.ones_like(dense)))
        if not (args.no_union and name == "whole population")])
    print()
    print(markdown(table))
    print()
    print(markdown(per_bench))
    if bands is not None:
        print()
        print(markdown(bands))
    print()
    print(markdown(pairs))
    print(f"\n{time.perf_counter() - t0:.0f} s")
    if args.output:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        table.to_csv(out / "table.csv", index=False)
        (out / "tables.md").write_text("\n".join(markdown(t) for t in
                                                 (table, per_bench, bands, pairs)
                                                 if t is not None))
        pairs.to_csv(out / "pairs.csv", index=False)
        per_bench.to_csv(out / "per_benchmark.csv", index=False)
        df.assign(dense=dense, published_average=avg_true).to_csv(out / "suite_scores.csv",
                                                                  index=False)
        if bands is not None:
            bands.to_csv(out / "bands.csv", index=False)
        (out / "config.json").write_text(json.dumps({"args": vars(args), "banks": banks_info,
                                                     "suite_config": cfg.to_dict()}, indent=1))


if __name__ == "__main__":
    main()
