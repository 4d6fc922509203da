"""Held-out accuracy of the predicted leaderboard score: ATLAS vs random-k (issue 11, item 5).

For each benchmark and seed: the models of the dense matrix restricted to the items with content
are split 90/10, stratified by total score (``atlascat.filtering.stratified_split`` with
``np.random.default_rng(seed)``, exactly the benchmark protocol's split). The bank and its score
link are built on the 90% only (``atlascat.live.build_bank.fit_bank_and_link``: filter, IRT model
chosen on held-out calibration models, monotone link on theta, observed-answer correction). The
held-out 10% never touch the bank or the link. Each held-out model then takes:

- ``ATLAS tau``: the adaptive test (``simulate_cat``, paper settings, SE stop tau) replaying its
  real answers; predicted score = the link at the final theta (+- SE), with and without the
  observed-answer correction; 95% interval coverage of the published score;
- ``first try``: the same CAT theta -> expected bank accuracy -> straight line (the issue's
  first attempt);
- ``random-k``: k items drawn at random from the same bank (one draw per replicate, shared by all
  models), score = a straight line from the mean accuracy on the k items to the published score,
  fitted on the calibration models; k = ATLAS's mean length and twice that (capped at the bank);
  mean over replicates;
- floors: the whole bank (theta link, and a line on the bank accuracy).

MAE in points (published score in percent). Run::

    PYTHONPATH=src python benchmarks/bench_leaderboard.py --seeds 0 1 2 -o runs/leaderboard
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat.cat.config import CATConfig
from atlascat.cat.engine import simulate_cat
from atlascat.filtering import stratified_split
from atlascat.irt.ability import eap
from atlascat.live.build_bank import (BENCHMARKS, content_matrix, fit_bank_and_link,
                                      load_published_scores)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data" / "openllm"


def line(x, y):
    coef = np.polyfit(x, y, 1)
    return lambda z: np.polyval(coef, z)


def run_one(bench, seed, items_dir, scores_path, taus, replicates, cat_options=None,
            extra_se=()):
    t0 = time.perf_counter()
    rm = content_matrix(bench, items_dir)
    scores = load_published_scores(scores_path, bench)
    has = np.isfinite(scores.reindex(rm.subject_ids.astype(str)).to_numpy(float))
    rm = rm.subset(subjects=has)
    train, test = stratified_split(rm, rng=np.random.default_rng(seed))
    bank, link, info = fit_bank_and_link(train, scores, bench=bench, seed=seed,
                                         leaderboard_scores=scores.to_numpy(float),
                                         **({"extra_se_stops": tuple(extra_se)}
                                            if extra_se is not None else {}))
    y_tr = train.aligned_values(bank.item_ids, extra="ignore")
    y_te = test.aligned_values(bank.item_ids, extra="ignore")
    s_tr = scores.reindex(train.subject_ids.astype(str)).to_numpy(float)
    s_te = scores.reindex(test.subject_ids.astype(str)).to_numpy(float)
    ok_tr = np.isfinite(s_tr) & ~np.isnan(y_tr).any(1)
    y_tr, s_tr = y_tr[ok_tr], s_tr[ok_tr]
    mae = lambda p: float(100 * np.mean(np.abs(p - s_te)))  # noqa: E731
    th_tr = eap(y_tr, bank)[0]
    th_te, se_te = eap(y_te, bank)
    nodes = np.linspace(-6, 6, 241)
    e_acc = bank.probability(nodes).mean(1)
    exp_acc = lambda th: np.interp(th, nodes, e_acc)  # noqa: E731
    first_try = line(exp_acc(th_tr), s_tr)
    base = {"benchmark": bench, "seed": seed, "model": info["model"], "bank_items": len(bank),
            "train": int(train.n_subjects), "test": int(test.n_subjects),
            "ridge_lambda": link.info.get("ridge_lambda_cat"), "interval_scale": link.interval_scale,
            "floor_theta": mae(link.predict_many(th_te, se_te)[0]),
            "floor_accuracy": mae(line(y_tr.mean(1), s_tr)(y_te.mean(1)))}
    rows = []
    for tau in taus:
        res = simulate_cat(bank, CATConfig(se_stop=tau, **(cat_options or {})), responses=y_te,
                           rng=np.random.default_rng([seed, 10, int(round(100 * tau))]))
        th = res.persons["theta"].to_numpy(float)
        se = res.persons["se"].to_numpy(float)
        asked = res.asked_mask()
        n = asked.sum(1)
        p_theta, lo_t, hi_t = link.predict_many(th, se)
        p_ans, lo_a, hi_a = link.predict_many(th, se, asked=asked, y=y_te)
        anchors = np.zeros(len(bank), bool)
        anchors[[link.item_ids.index(a) for a in link.anchor_items]] = True
        asked_a = asked | anchors[None, :]
        n_a = asked_a.sum(1)
        p_anc, lo_n, hi_n = link.predict_many(th, se, asked=asked_a, y=y_te)
        short, link.short_grid = link.short_grid, None  # whole-bank curve only (ablation)
        p_full = link.predict_many(th, se, asked=asked, y=y_te)[0]
        link.short_grid = short
        k = int(round(n.mean()))
        row = dict(base, tau=tau, items=float(n.mean()),
                   atlas_theta=mae(p_theta), atlas_answers=mae(p_ans),
                   atlas_full_curve=mae(p_full),
                   anchor_items=float(n_a.mean()), atlas_anchors=mae(p_anc),
                   coverage_anchors=float(np.mean((s_te >= lo_n) & (s_te <= hi_n))),
                   coverage_theta=float(np.mean((s_te >= lo_t) & (s_te <= hi_t))),
                   coverage_answers=float(np.mean((s_te >= lo_a) & (s_te <= hi_a))),
                   width_answers=float(100 * np.mean(hi_a - lo_a)),
                   first_try=mae(first_try(exp_acc(th))))
        ka = int(round(n_a.mean()))
        for name, kk in (("random_k", k), ("random_2k", 2 * k), ("random_ka", ka),
                         ("random_2ka", 2 * ka)):
            kk = min(kk, len(bank))
            errs = []
            for rep in range(replicates):
                sel = np.random.default_rng([seed, 20, kk, rep]).choice(len(bank), kk,
                                                                         replace=False)
                f = line(y_tr[:, sel].mean(1), s_tr)
                errs.append(mae(f(y_te[:, sel].mean(1))))
            row[name] = float(np.mean(errs))
            row[name + "_items"] = kk
        rows.append(row)
    print(f"{bench} seed {seed}: {info['model']}, {len(bank)} items, "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    return rows


def table(df: pd.DataFrame) -> pd.DataFrame:
    g = df.groupby(["benchmark", "tau"], sort=False)
    out = g.agg(seeds=("seed", "nunique"), model=("model", lambda s: "/".join(sorted(set(s)))),
                bank=("bank_items", "mean"), items=("items", "mean"),
                atlas=("atlas_answers", "mean"), atlas_theta=("atlas_theta", "mean"),
                first_try=("first_try", "mean"), rk_items=("random_k_items", "mean"),
                random_k=("random_k", "mean"), r2k_items=("random_2k_items", "mean"),
                random_2k=("random_2k", "mean"), coverage=("coverage_answers", "mean"),
                width=("width_answers", "mean"), floor=("floor_theta", "mean"),
                a_items=("anchor_items", "mean"), anchors=("atlas_anchors", "mean"),
                rka=("random_ka", "mean"), r2ka=("random_2ka", "mean"),
                rka_items=("random_ka_items", "mean"), r2ka_items=("random_2ka_items", "mean"),
                a_coverage=("coverage_anchors", "mean"),
                floor_acc=("floor_accuracy", "mean")).reset_index()
    return out


def markdown(t: pd.DataFrame) -> str:
    head = ("| benchmark | SE stop | IRT | bank | ATLAS items | ATLAS MAE | theta only | "
            "first try | random-k | random-2k | 95% cov. | width | whole bank | "
            "ATLAS+5 anchors items | MAE | random-k | random-2k | 95% cov. |\n"
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            "---:|---:|\n")
    lines = []
    for r in t.itertuples():
        b1 = "**" if r.atlas <= r.random_k else ""
        b2 = "**" if r.anchors <= r.rka else ""
        lines.append(
            f"| {r.benchmark} | {r.tau:g} | {r.model} | {r.bank:.0f} | {r.items:.1f} | "
            f"{b1}{r.atlas:.2f}{b1} | {r.atlas_theta:.2f} | {r.first_try:.2f} | "
            f"{r.random_k:.2f} ({r.rk_items:.0f}) | {r.random_2k:.2f} ({r.r2k_items:.0f}) | "
            f"{100 * r.coverage:.1f}% | {r.width:.1f} | {r.floor:.2f} / {r.floor_acc:.2f} | "
            f"{r.a_items:.1f} | {b2}{r.anchors:.2f}{b2} | {r.rka:.2f} ({r.rka_items:.0f}) | "
            f"{r.r2ka:.2f} ({r.r2ka_items:.0f}) | {100 * r.a_coverage:.1f}% |")
    return head + "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", nargs="*", default=list(BENCHMARKS))
    ap.add_argument("--seeds", nargs="*", type=int, default=[0])
    ap.add_argument("--taus", nargs="*", type=float, default=[0.2, 0.3])
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--items", default=str(DATA / "items"))
    ap.add_argument("--scores", default=str(DATA / "leaderboard_scores.csv.gz"))
    ap.add_argument("--randomesque", type=int, default=None,
                    help="CAT randomesque (default: the paper's 5)")
    ap.add_argument("--extra-se", nargs="*", type=float, default=None,
                    help="further SE stops replayed for the answer corrections (default: the "
                         "build's EXTRA_SE_STOPS)")
    ap.add_argument("-o", "--output", default=None, help="folder for rows.csv, table.csv/.md")
    args = ap.parse_args(argv)
    rows = []
    for bench in args.bench:
        for seed in args.seeds:
            opts = {} if args.randomesque is None else {"randomesque": args.randomesque}
            rows += run_one(bench, seed, args.items, args.scores, args.taus, args.replicates,
                            opts, args.extra_se)
    df = pd.DataFrame(rows)
    t = table(df)
    md = markdown(t)
    print()
    print(md)
    if args.output:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        df.to_csv(out / "rows.csv", index=False)
        t.to_csv(out / "table.csv", index=False)
        (out / "table.md").write_text(md)


if __name__ == "__main__":
    main()
