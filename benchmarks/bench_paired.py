"""Paired comparison of two models on held-out leaderboard models (issue 18, item 5).

For each benchmark: bank and score link are built on 80% of the whole population (seeded split,
exactly as ``bench_leaderboard.py --population union``); the other 20% (models that answered
>= 90% of the bank) replay their real answers, and so do the calibration models. Every pair of
models gets the difference of their predicted scores with the interval of
:func:`atlascat.studies.paired.paired_difference` (each side from the two 95% intervals' sides
that bound it, sqrt(l_a^2 + u_b^2) below and sqrt(u_a^2 + l_b^2) above, rho 0), times a pair
scale fitted on the *calibration* pairs so that 95% of them are covered. Reported on the *held-out* pairs: coverage of the published difference (all
pairs; pairs within 5 points; the 1% of pairs whose answers agree most beyond what their
accuracy explains; pairs 0-2, 2-5, 5-10 and over 10 points apart), the share of pairs told
apart the wrong way (the interval excludes 0 on the wrong side), and the share of pairs
1.5-2.5 / 4-6 / 8-12 points apart that the interval tells apart (excludes 0, right sign), per
test length: the adaptive default (SE 0.2 plus the
bank's stop rules), fixed lengths and the whole bank (``all``).

    PYTHONPATH=src OPENBLAS_NUM_THREADS=1 python benchmarks/bench_paired.py -o runs/paired

``--shared N`` adds the design in which the second model is asked the first one's adaptive items
(N random pairs per part).
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

from atlascat.cat.config import CATConfig  # noqa: E402
from atlascat.cat.simulate import simulate_cat  # noqa: E402
from atlascat.studies.paired import (PAIR_SCALE, excess_agreement,  # noqa: E402
                                     limits_difference)
from atlascat.irt.ability import eap  # noqa: E402
from atlascat.filtering import stratified_split  # noqa: E402
from atlascat.live.build_bank import (fit_bank_and_link, load_published_scores,  # noqa: E402
                                      population_matrix)

SHARED = ROOT.parent / "shared" / "data" / "openllm"
BENCHES = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
LENGTHS = ("adaptive", 30, 60, 100, "all")
GAPS = ((0.015, 0.025), (0.04, 0.06), (0.08, 0.12))
BANDS = ((0.0, 0.02), (0.02, 0.05), (0.05, 0.10), (0.10, 1.0))   # |true difference|


def replay(bank, link, y, length, seed):
    """Predicted score (0-1), interval and items of each model replaying ``y``."""
    stops = link.stop_settings()
    if length == "adaptive":
        cfg = CATConfig(se_stop=0.2, **stops)
    else:
        k = len(bank) if length == "all" else int(min(length, len(bank)))
        cfg = CATConfig(se_stop=None, min_items=k, max_items=k)
    res = simulate_cat(bank, cfg, responses=y, rng=np.random.default_rng([seed, 30]))
    th = res.persons["theta"].to_numpy(float)
    se = res.persons["se"].to_numpy(float)
    asked = res.asked_mask()
    pred, lo, hi = link.predict_many(th, se, asked=asked, y=y)
    return pred, lo, hi, asked


def pair_arrays(s, pred, lo, hi, y=None, asked=None):
    """Every pair (i < j): the true difference, the two predictions with their 95% intervals
    and, given the answers ``y`` / ``asked``, their excess agreement."""
    i, j = np.triu_indices(len(s), 1)
    out = dict(i=i, j=j, true=s[i] - s[j], a=pred[i], lo_a=lo[i], hi_a=hi[i], b=pred[j],
               lo_b=lo[j], hi_b=hi[j])
    if y is not None:
        out["excess"] = excess_agreement(y[i], y[j], asked[i])
    return out


def shared_pairs(bank, link, y, s, asked, n_pairs, seed):
    """Random ordered pairs (i, j) in which j is asked the items i's adaptive test asked: both
    predicted (EAP on those items, then the link) from the same items; j's missing answers stay
    unobserved."""
    rng = np.random.default_rng([seed, 32])
    n = len(s)
    i, j = rng.integers(n, size=n_pairs), rng.integers(n, size=n_pairs)
    i, j = i[i != j], j[i != j]
    m = asked[i]
    preds = []
    for rows in (i, j):
        yy = np.where(m, y[rows], np.nan)
        th, se = eap(yy, bank)
        preds.append(link.predict_many(th, se, asked=m & np.isfinite(yy), y=yy))
    (pa, la, ha), (pb, lb, hb) = preds
    return dict(i=i, j=j, true=s[i] - s[j], a=pa, lo_a=la, hi_a=ha, b=pb, lo_b=lb, hi_b=hb,
                excess=excess_agreement(y[i], y[j], m))


def interval(p, scale=1.0, rho=0.0) -> dict:
    """compare-models' interval of each pair's difference at this pair scale and rho."""
    return limits_difference(*(p[k] for k in ("a", "lo_a", "hi_a", "b", "lo_b", "hi_b")),
                             scale=scale, rho=rho)


def fit_scale(p, coverage=0.95) -> float:
    """Pair scale: the factor on both sides of the plain interval that covers ``coverage`` of
    these pairs."""
    d = interval(p)
    miss = p["true"] - d["diff"]
    side = np.where(miss < 0, d["diff"] - d["lo"], d["hi"] - d["diff"])
    return float(np.quantile(np.abs(miss) / np.maximum(side, 1e-12), coverage))


def evaluate_pairs(p, scale) -> dict:
    """Coverage (all pairs, within 5 points, per band of the true difference), median
    half-width, the share told apart the wrong way and the share told apart per gap of pairs
    ``p`` (``true``, each model's ``a`` / ``lo_a`` / ``hi_a``, ``b`` / ...; with ``excess``,
    also the coverage of the 1% of pairs whose answers agree most)."""
    d = interval(p, scale)
    cover = (d["lo"] <= p["true"]) & (p["true"] <= d["hi"])
    gap = np.abs(p["true"])
    out = {"pairs": int(len(cover)), "coverage": float(cover.mean()),
           "coverage_within_5": float(cover[gap <= 0.05].mean())}
    for a, b in BANDS:
        m = (gap >= a) & (gap < b)
        out[f"coverage_{round(100 * a)}_{round(100 * b)}"] = float(cover[m].mean()) if m.any() else np.nan
    out["wrong_way"] = float(np.mean(((d["lo"] > 0) & (p["true"] < 0))
                                     | ((d["hi"] < 0) & (p["true"] > 0))))
    if "excess" in p:
        top = p["excess"] >= np.quantile(p["excess"], 0.99)
        out["coverage_top1pct_agreement"] = float(cover[top].mean())
        # near-duplicates with --rho 0.5, as the docs suggest for checkpoints and merges
        for q, label in ((0.99, "top1pct"), (0.999, "top01pct")):
            top = p["excess"] >= np.quantile(p["excess"], q)
            r = interval({k: v[top] for k, v in p.items()}, scale, rho=0.5)
            t = p["true"][top]
            out[f"coverage_{label}_rho05"] = float(np.mean((r["lo"] <= t) & (t <= r["hi"])))
    out["median_halfwidth"] = float(np.median(d["hi"] - d["lo"]) / 2 * 100)
    told = ((d["lo"] > 0) & (p["true"] > 0)) | ((d["hi"] < 0) & (p["true"] < 0))
    for a, b in GAPS:
        m = (np.abs(p["true"]) >= a) & (np.abs(p["true"]) <= b)
        out[f"told_apart_{round(100 * (a + b) / 2)}pt"] = float(told[m].mean()) if m.any() else np.nan
    return out


def split_and_fit(bench, seed):
    """The models with a published score, split 80/20 (seeded, stratified), and the bank and
    score link fitted on the train part: (scores, train, test, bank, link, info)."""
    rm = population_matrix(bench, SHARED / "items", population="union")
    scores = load_published_scores(SHARED / "leaderboard_scores.csv.gz", bench)
    has = np.isfinite(scores.reindex(rm.subject_ids.astype(str)).to_numpy(float))
    rm = rm.subset(subjects=has)
    train, test = stratified_split(rm, test_size=0.2, rng=np.random.default_rng(seed))
    bank, link, info = fit_bank_and_link(train, scores, bench=bench, seed=seed,
                                         leaderboard_scores=scores.to_numpy(float))
    return scores, train, test, bank, link, info


def run(bench, seed, lengths, shared=0):
    t0 = time.perf_counter()
    scores, train, test, bank, link, info = split_and_fit(bench, seed)
    parts = {}
    for name, part in (("train", train), ("test", test)):
        y = part.aligned_values(bank.item_ids, extra="ignore")
        s = scores.reindex(part.subject_ids.astype(str)).to_numpy(float)
        keep = np.isfinite(y).mean(1) >= 0.9
        if name == "train" and keep.sum() > 1500:   # 1500 calibration models: 1.1M pairs
            keep &= np.random.default_rng([seed, 31]).random(len(keep)) < 1500 / keep.sum()
        parts[name] = (y[keep], s[keep])
    rows = []
    for length in lengths:
        pairs, items, same = {}, {}, {}
        for name, (y, s) in parts.items():
            pred, lo, hi, asked = replay(bank, link, y, length, seed)
            items[name] = float(asked.sum(1).mean())
            pairs[name] = pair_arrays(s, pred, lo, hi, y, asked)
            if shared and length == "adaptive":
                same[name] = shared_pairs(bank, link, y, s, asked, shared, seed)
        designs = [(str(length), pairs)]
        if same:
            designs.append(("adaptive, same items", same))
        for label, prs in designs:
            scale = fit_scale(prs["train"])
            row = {"benchmark": bench, "seed": seed, "length": label,
                   "items": round(items["test"], 1), "pair_scale": round(scale, 3),
                   **evaluate_pairs(prs["test"], scale)}
            row["coverage_unscaled"] = evaluate_pairs(prs["test"], 1.0)["coverage"]
            shipped = evaluate_pairs(prs["test"], PAIR_SCALE.get(bench, 1.0))
            row |= {f"shipped_scale_{k}": v for k, v in shipped.items()
                    if k.startswith("coverage") or k == "wrong_way"}
            rows.append(row)
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()},
                  flush=True)
    print(f"{bench} seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
    return rows


def markdown(df: pd.DataFrame) -> str:
    cols = ["benchmark", "length", "items", "pair_scale", "coverage", "coverage_within_5",
            "coverage_top1pct_agreement", "median_halfwidth", "told_apart_2pt", "told_apart_5pt",
            "told_apart_10pt"]
    head = ("| benchmark | test | items | pair scale | coverage | within 5 pts | top-1% agreement "
            "| median half-width | told apart: 2 pts | 5 pts | 10 pts |")
    lines = [head, "|" + "---|" * len(cols)]
    for _, r in df[cols].iterrows():
        lines.append("| " + " | ".join([
            r["benchmark"], r["length"], f"{r['items']:.1f}", f"{r['pair_scale']:.2f}",
            f"{100 * r['coverage']:.1f}%", f"{100 * r['coverage_within_5']:.1f}%",
            f"{100 * r['coverage_top1pct_agreement']:.1f}%", f"{r['median_halfwidth']:.1f}",
            *(f"{100 * r[c]:.0f}%" for c in cols[-3:])]) + " |")
    return "\n".join(lines)


def markdown_bands(df: pd.DataFrame) -> str:
    """Coverage per band of the true difference and the share told apart the wrong way, at the
    fitted pair scale and at the shipped one (:data:`PAIR_SCALE`)."""
    bands = [f"coverage_{round(100 * a)}_{round(100 * b)}" for a, b in BANDS]
    lines = ["| benchmark | test | pair scale | coverage | 0-2 pts | 2-5 | 5-10 | over 10 "
             "| told apart the wrong way | at the shipped scale: coverage | over 10 pts |",
             "|" + "---|" * 11]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join([
            r["benchmark"], r["length"], f"{r['pair_scale']:.2f}",
            *(f"{100 * r[c]:.1f}%" for c in ["coverage", *bands]),
            f"{100 * r['wrong_way']:.2f}%", f"{100 * r['shipped_scale_coverage']:.1f}%",
            f"{100 * r['shipped_scale_' + bands[-1]]:.1f}%"]) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", nargs="*", default=list(BENCHES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lengths", nargs="*", default=[str(x) for x in LENGTHS])
    ap.add_argument("--shared", type=int, default=0,
                    help="also the design in which the second model is asked the first's "
                         "adaptive items: this many random pairs per part (0: not run)")
    ap.add_argument("-o", "--output", type=Path, default=Path("runs/paired"))
    args = ap.parse_args(argv)
    lengths = [x if x in ("adaptive", "all") else int(x) for x in args.lengths]
    rows = [r for b in args.bench for r in run(b, args.seed, lengths, args.shared)]
    df = pd.DataFrame(rows)
    args.output.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.output / "paired.csv", index=False)
    md = markdown(df) + "\n\n" + markdown_bands(df)
    (args.output / "paired.md").write_text(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
