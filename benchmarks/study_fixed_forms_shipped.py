"""A fixed form on a SHIPPED bank (arc, gsm8k, hellaswag, mmlu, truthfulqa, winogrande): design
it for N(0, 1) abilities or for the score link's calibration population? (benchmarks/results/
fixed_forms.md, "Shipped banks")

`atlas design --bank arc -k 50 -o FORM.csv` chooses a D-optimal form; each model answers it and
`atlas score ANSWERS --bank arc` predicts its published Open LLM Leaderboard v1 score with the
bank's score link (a 95% interval). The shipped banks and links were calibrated on the WHOLE
leaderboard population (every model with answers in ../shared/data/openllm/union_<bench>;
MMLU: dense; datasets/data/README.md), so no model in shared/ is held out from them. Held out
here as benchmarks/bench_leaderboard.py's whole-population study does: per benchmark and seed,
the models of ``population_matrix(bench)`` with a published score are split 80/20
(``stratified_split(..., test_size=0.2, rng=np.random.default_rng(seed))``), bank and link are
rebuilt on the 80% with the shipped recipe (``fit_bank_and_link``; the IRT model is fixed to
the shipped bank's, which was chosen on all models: the one step that saw the held-out 20%),
and the held-out models that answered >= 90% of the bank's items are the targets.

On each rebuilt bank, k = 50 and 100 (where the bank has more items):

- ``N(0, 1)``: ``optimal_form(bank, k, "D")`` (what `atlas design --bank arc` did before);
- ``source``: ``optimal_form(bank, k, "D", link.source_abilities())`` (the link's kernel count
  of its calibration models' thetas, what `atlas design` uses on a bank folder);
- ``random``: k items drawn once (seeded) and given to every target, for scale.

A target's answers to the form (the cells it has; a few are blank in the union matrices) are
scored the way `atlas score ANSWERS --bank B` scores them: ``estimate_ability(..., "eap")``
then ``scorelink.predict_frame(link, persons, administered)``. Truth: the published score.
Per benchmark, k and design, pooled over seeds 0-4: MAE in points, 95% coverage, mean width,
coverage in the weakest / strongest third of each seed's targets (by published score), and the
paired difference of absolute errors source - N(0, 1) (mean +- its SE over target-seeds).

Decision rule (set before the run, the one fixed_forms.md used): the source abilities are
better when, at k = 50, they give a smaller MAE on most benchmarks (>= 4 of 6) and no
benchmark's coverage (overall, weakest or strongest third) falls below 0.93 where N(0, 1)'s
was at least 0.93.

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/study_fixed_forms_shipped.py [--bench arc gsm8k]
        [--seeds 0 1 2 3 4] [--lengths 50 100] [-o runs/fixed_forms_shipped.csv]

prints the markdown table (and the rows to -o).
"""
from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat.catalogue import BankRef
from atlascat.design.optimal import optimal_form
from atlascat.filtering import stratified_split
from atlascat.irt.ability import estimate_ability
from atlascat.live.build_bank import (BENCHMARKS, fit_bank_and_link, load_published_scores,
                                      population_matrix)
from atlascat.scorelink import predict_frame

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data" / "openllm"
DESIGNS = ("N(0, 1)", "source", "random")


def score_form(bank, link, answers: pd.DataFrame) -> pd.DataFrame:
    """`atlas score ANSWERS --bank B` on ``answers`` (models x form items, blank = not
    answered): EAP theta and SE, then the link's predicted score and 95% interval."""
    persons = estimate_ability(answers, bank, "eap", subject_ids=answers.index.to_numpy())
    long = answers.stack().rename("score").reset_index()
    long.columns = ["subject_id", "item_id", "score"]
    pred = predict_frame(link, persons, long)
    return pred.set_index(persons["subject_id"].to_numpy())


def one_seed(bench: str, seed: int, lengths, min_share: float = 0.9) -> pd.DataFrame:
    t0 = time.perf_counter()
    with warnings.catch_warnings():   # the union matrix's all-blank items, dropped
        warnings.simplefilter("ignore", UserWarning)
        rm = population_matrix(bench, DATA / "items", population="union", data_dir=DATA)
    scores = load_published_scores(DATA / "leaderboard_scores.csv.gz", bench)
    rm = rm.subset(subjects=np.isfinite(scores.reindex(rm.subject_ids.astype(str)).to_numpy(float)))
    train, test = stratified_split(rm, test_size=0.2, rng=np.random.default_rng(seed))
    model = BankRef.from_option(bench).link.info["model"]   # the shipped bank's IRT model
    bank, link, info = fit_bank_and_link(train, scores, bench=bench, model=model, seed=seed,
                                         leaderboard_scores=scores.to_numpy(float))
    y = test.aligned_values(bank.item_ids, extra="ignore")
    keep = np.isfinite(y).mean(1) >= min_share
    ids = test.subject_ids[keep].astype(str)
    answers = pd.DataFrame(y[keep], index=pd.Index(ids, name="model"), columns=bank.item_ids)
    truth = scores.reindex(ids)
    rank = truth.rank(pct=True)
    third = np.where(rank <= 1 / 3, "weakest", np.where(rank > 2 / 3, "strongest", "middle"))
    out = []
    for k in lengths:
        if k >= len(bank):
            continue
        forms = {"N(0, 1)": optimal_form(bank, k, "D").item_ids,
                 "source": optimal_form(bank, k, "D", link.source_abilities()).item_ids,
                 "random": np.random.default_rng([seed, 11, k]).choice(
                     np.asarray(bank.item_ids), k, replace=False)}
        for design, items in forms.items():
            on_form = answers[list(items)]
            s = score_form(bank.subset(list(items)), link, on_form)
            out.append(pd.DataFrame({
                "benchmark": bench, "seed": seed, "k": k, "design": design, "model": ids,
                "bank_items": len(bank), "answered": on_form.notna().sum(axis=1).to_numpy(),
                "score": s["score"].to_numpy(), "lo": s["score_lo"].to_numpy(),
                "hi": s["score_hi"].to_numpy(), "truth": truth.to_numpy(), "third": third}))
    print(f"{bench} seed {seed}: {info['model']}, {len(bank)} items, {train.n_subjects} "
          f"calibration models, {len(ids)} held-out, {time.perf_counter() - t0:.0f} s", flush=True)
    return pd.concat(out, ignore_index=True)


def summary(rows: pd.DataFrame) -> dict:
    covered = (rows["lo"] <= rows["truth"]) & (rows["truth"] <= rows["hi"])
    by = covered.groupby(rows["third"]).mean()
    return {"n": len(rows), "mae": 100 * float((rows["score"] - rows["truth"]).abs().mean()),
            "coverage": float(covered.mean()),
            "width": 100 * float((rows["hi"] - rows["lo"]).mean()),
            "weakest": float(by.get("weakest", np.nan)),
            "strongest": float(by.get("strongest", np.nan))}


def paired(rows: pd.DataFrame) -> str:
    """source - N(0, 1): mean difference of absolute errors (points) +- its SE."""
    err = rows.assign(err=100 * (rows["score"] - rows["truth"]).abs())
    wide = err.pivot_table(index=["seed", "model"], columns="design", values="err")
    d = (wide["source"] - wide["N(0, 1)"]).dropna()
    return f"{d.mean():+.2f} +- {d.std(ddof=1) / np.sqrt(len(d)):.2f}"


def table(df: pd.DataFrame) -> str:
    lines = ["| benchmark | k | design | targets (x seeds) | MAE | source - N(0, 1) | 95% coverage "
             "| width | coverage: weakest third | strongest third |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (bench, k), g in df.groupby(["benchmark", "k"], sort=False):
        for design in DESIGNS:
            r = summary(g[g["design"] == design])
            diff = paired(g) if design == "source" else ""
            lines.append(f"| {bench} | {k} | {design} | {r['n']} | {r['mae']:.2f} | {diff} | "
                         f"{r['coverage']:.3f} | {r['width']:.1f} | {r['weakest']:.3f} | "
                         f"{r['strongest']:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", nargs="*", default=list(BENCHMARKS))
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--lengths", nargs="*", type=int, default=[50, 100])
    ap.add_argument("-o", "--output", default=None, help="write the per-target rows (CSV)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    df = pd.concat([one_seed(b, s, args.lengths) for b in args.bench for s in args.seeds],
                   ignore_index=True)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.output, index=False)
    print(table(df))
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
