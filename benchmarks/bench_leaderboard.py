"""Held-out accuracy of the predicted leaderboard score: ATLAS vs random-k (issues 11 and 17).

Two studies:

``--population union`` (default; issue 17): the whole leaderboard population. The models of
``population_matrix(bench, population="union")`` (every model with answers on the content
items, from the union matrices; MMLU: dense) are split (``--test-size``, default 20%, stratified
by total score, seeded). Bank and link are built on the rest exactly as the shipped ones
(``fit_bank_and_link``). Held-out models that answered >= 90% of the bank's items replay their
real answers in the adaptive test (SE stop ``--taus``, the bank's default stopping rules);
per band of published score (10 points): MAE, 95% coverage, interval width and items used,
next to random-k from the same bank (k = ATLAS's mean length over all held-out models; a line
from the accuracy on the answered ones of the k items, fitted on the calibration models).

``--population dense`` (issue 11; the second table):

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
from atlascat.cat.simulate import simulate_cat
from atlascat.filtering import stratified_split
from atlascat.irt.ability import eap
from atlascat.live.build_bank import (BENCHMARKS, content_matrix, fit_bank_and_link,
                                      load_published_scores, population_matrix)

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


def run_population(bench, seed, items_dir, scores_path, tau, replicates, *, test_size=0.2,
                   min_share=0.9, cat_options=None):
    """One benchmark and seed of the whole-population study: one row per held-out model."""
    t0 = time.perf_counter()
    rm = population_matrix(bench, items_dir, population="union")
    scores = load_published_scores(scores_path, bench)
    has = np.isfinite(scores.reindex(rm.subject_ids.astype(str)).to_numpy(float))
    rm = rm.subset(subjects=has)
    train, test = stratified_split(rm, test_size=test_size, rng=np.random.default_rng(seed))
    bank, link, info = fit_bank_and_link(train, scores, bench=bench, seed=seed,
                                         leaderboard_scores=scores.to_numpy(float))
    y_tr = train.aligned_values(bank.item_ids, extra="ignore")
    y_te = test.aligned_values(bank.item_ids, extra="ignore")
    s_tr = scores.reindex(train.subject_ids.astype(str)).to_numpy(float)
    s_te = scores.reindex(test.subject_ids.astype(str)).to_numpy(float)
    keep = np.isfinite(y_te).mean(1) >= min_share
    y_te, s_te, ids = y_te[keep], s_te[keep], test.subject_ids[keep].astype(str)
    cfg = _population_config(link, tau, cat_options)
    res = simulate_cat(bank, cfg, responses=y_te,
                       rng=np.random.default_rng([seed, 10, int(round(100 * tau))]))
    th = res.persons["theta"].to_numpy(float)
    se = res.persons["se"].to_numpy(float)
    asked = res.asked_mask()
    n = asked.sum(1)
    pred, lo, hi = link.predict_many(th, se, asked=asked, y=y_te)
    out = pd.DataFrame({"benchmark": bench, "seed": seed, "model": info["model"],
                        "bank_items": len(bank), "subject_id": ids, "published": 100 * s_te,
                        "items": n, "pred": 100 * pred, "lo": 100 * lo, "hi": 100 * hi,
                        "stop_reason": res.persons.get("stop_reason", pd.Series([""] * len(n)))
                        .to_numpy(), "theta": th, "se": se})
    k = int(min(len(bank), max(1, round(float(n.mean())))))
    rand = np.zeros((replicates, len(ids)))
    for rep in range(replicates):
        sel = np.random.default_rng([seed, 20, k, rep]).choice(len(bank), k, replace=False)
        with np.errstate(invalid="ignore"):
            acc_tr = np.nanmean(y_tr[:, sel], axis=1)
            acc_te = np.nanmean(y_te[:, sel], axis=1)
        ok = np.isfinite(acc_tr) & np.isfinite(s_tr)
        rand[rep] = 100 * line(acc_tr[ok], s_tr[ok])(acc_te)
    out["random_k_abs_err"] = np.nanmean(np.abs(rand - out["published"].to_numpy()), axis=0)
    out["random_k"] = k
    print(f"{bench} seed {seed}: {info['model']}, {len(bank)} items, {len(train.subject_ids)} "
          f"calibration models, {len(ids)} held-out, {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def _population_config(link, tau, cat_options):
    """The CAT of the shipped banks: SE stop tau plus the link's default stopping rules."""
    opts = dict(cat_options or {})
    stop = getattr(link, "stop_settings", None)
    if callable(stop):
        opts = {**stop(), **opts}
    return CATConfig(se_stop=tau, **opts)


def band_table(df: pd.DataFrame, width: float = 10.0) -> pd.DataFrame:
    """Per benchmark and band of published score: n, MAE, coverage, width, items, random-k."""
    d = df.copy()
    d["band"] = (np.floor(d["published"] / width) * width).clip(upper=100 - width).astype(int)
    d["abs_err"] = (d["pred"] - d["published"]).abs()
    d["covered"] = (d["published"] >= d["lo"]) & (d["published"] <= d["hi"])
    d["width"] = d["hi"] - d["lo"]
    g = d.groupby(["benchmark", "band"], sort=True)
    t = g.agg(n=("abs_err", "size"), mae=("abs_err", "mean"), coverage=("covered", "mean"),
              width=("width", "mean"), items=("items", "mean"),
              random_k=("random_k_abs_err", "mean"), k=("random_k", "mean")).reset_index()
    allb = d.groupby("benchmark", sort=True).agg(
        n=("abs_err", "size"), mae=("abs_err", "mean"), coverage=("covered", "mean"),
        width=("width", "mean"), items=("items", "mean"), random_k=("random_k_abs_err", "mean"),
        k=("random_k", "mean")).reset_index()
    allb["band"] = -1
    order = [b for b in BENCHMARKS if b in set(t["benchmark"])]
    t = pd.concat([t, allb], ignore_index=True)
    t["benchmark"] = pd.Categorical(t["benchmark"], order, ordered=True)
    return t.sort_values(["benchmark", "band"]).reset_index(drop=True)


def band_markdown(t: pd.DataFrame, width: float = 10.0) -> str:
    head = ("| benchmark | published score | held-out models | ATLAS items | ATLAS MAE | "
            "95% cov. | width | random-k MAE (k) |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
    lines = []
    for r in t.itertuples():
        band = "all" if r.band < 0 else f"{r.band}-{r.band + width:g}"
        b = "**" if r.mae <= r.random_k else ""
        lines.append(f"| {r.benchmark} | {band} | {r.n} | {r.items:.1f} | {b}{r.mae:.2f}{b} | "
                     f"{100 * r.coverage:.0f}% | {r.width:.1f} | {r.random_k:.2f} "
                     f"({r.k:.0f}) |")
    return head + "\n".join(lines) + "\n"


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
    ap.add_argument("--taus", nargs="*", type=float, default=[0.2],
                    help="SE stops (default 0.2; the dense study used 0.2 0.3)")
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--items", default=str(DATA / "items"))
    ap.add_argument("--scores", default=str(DATA / "leaderboard_scores.csv.gz"))
    ap.add_argument("--randomesque", type=int, default=None,
                    help="CAT randomesque (default: the paper's 5)")
    ap.add_argument("--extra-se", nargs="*", type=float, default=None,
                    help="further SE stops replayed for the answer corrections (default: the "
                         "build's EXTRA_SE_STOPS)")
    ap.add_argument("-o", "--output", default=None, help="folder for rows.csv, table.csv/.md")
    ap.add_argument("--population", default="union", choices=("union", "dense"),
                    help="union: whole-population study per band (issue 17); dense: issue 11's")
    ap.add_argument("--test-size", type=float, default=0.2,
                    help="held-out share of the union study (default 0.2)")
    args = ap.parse_args(argv)
    if args.population == "union":
        opts = {} if args.randomesque is None else {"randomesque": args.randomesque}
        frames = [run_population(bench, seed, args.items, args.scores, tau, args.replicates,
                                 test_size=args.test_size, cat_options=opts)
                  for bench in args.bench for seed in args.seeds for tau in args.taus]
        df = pd.concat(frames, ignore_index=True)
        t = band_table(df)
        _report(df, t, band_markdown(t), args.output, "population_")
        return
    rows = []
    for bench in args.bench:
        for seed in args.seeds:
            opts = {} if args.randomesque is None else {"randomesque": args.randomesque}
            rows += run_one(bench, seed, args.items, args.scores, args.taus, args.replicates,
                            opts, args.extra_se)
    df = pd.DataFrame(rows)
    t = table(df)
    _report(df, t, markdown(t), args.output, "")


def _report(df, t, md, output, prefix):
    """Print the markdown table; write rows, table and markdown to ``output`` if given."""
    print()
    print(md)
    if output:
        out = Path(output)
        out.mkdir(parents=True, exist_ok=True)
        df.to_csv(out / f"{prefix}rows.csv", index=False)
        t.to_csv(out / f"{prefix}table.csv", index=False)
        (out / f"{prefix}table.md").write_text(md)


if __name__ == "__main__":
    main()
