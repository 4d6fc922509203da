"""Build the shipped content banks and their score links (``datasets/data/banks/``).

    python -m atlascat.live.build_bank --items ../shared/data/openllm/items \\
        --scores ../shared/data/openllm/leaderboard_scores.csv.gz [--bench arc ...]

For each benchmark (arc, hellaswag, mmlu, truthfulqa, winogrande, gsm8k),
:func:`build_content_bank` does:

1. **Items that can be asked**: the dense Open LLM Leaderboard matrix (bundled,
   ``catalogue.load_responses(bench)``) restricted to the items that have content in metabench's
   item files (``metabench_idx``; MMLU ``mb_sub_idx``): ARC 245, HellaSwag 63, MMLU 102,
   TruthfulQA 157, WinoGrande 114, GSM8K 486 items. Only these can be in a live bank, so the
   bank is calibrated on them alone.
2. **Filter**: the paper's item filter (:func:`atlascat.filtering.filter_items` defaults; it
   drops ceiling items with mean > 0.95 and items with point-biserial < 0.1).
3. **IRT model chosen for the score, on held-out data** (``model="auto"``): the calibration
   models are split 80/20 (stratified, seeded); for each candidate (2PL; 3PL and 4PL with a
   Beta(5, 17) prior on c) a bank is calibrated on the 80% with the score link, the adaptive
   test (SE <= 0.2) replays the real answers of the 20%, and the model with the smallest ratio
   of its score MAE to that of random-L (L its mean length; a line from the accuracy on L random
   bank items) wins. A ratio, not the MAE itself: a model whose SE shrinks slowly would
   otherwise win by asking more items (GSM8K's 4PL: 85 items, worse than random-85). The
   final bank is calibrated on all calibration models with that model.
4. **Score link** (:class:`atlascat.scorelink.score_link.ScoreLink`, fitted by the bank builder's
   :func:`atlascat.bankdir.builder.fit_link`, the step ``atlas build-bank`` uses): published score on theta
   (monotone spline), per-item answer corrections, score anchors and interval scales from a
   replayed adaptive test of the calibration models.
5. **Content**: ``attach_content(bank, load_item_content(bench, items_dir))``; written as zstd
   Parquet ``banks/<bench>.parquet`` and ``banks/<bench>_link.json``.

``benchmarks/results/leaderboard.md`` has the held-out study behind these choices
(``benchmarks/bench_leaderboard.py``).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import BankError, ConfigError

__all__ = ["build_content_bank", "write_content_bank", "fit_bank_and_link", "content_item_ids",
           "content_matrix", "population_matrix", "load_published_scores", "BENCHMARKS",
           "CANDIDATES", "PRIOR_C", "POPULATIONS", "banks_dir"]

BENCHMARKS = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
#: IRT models tried for every bank (chosen on held-out calibration models, see module doc)
CANDIDATES = ("2pl", "3pl", "4pl")
#: prior on the lower asymptote of the 3PL / 4PL
PRIOR_C = "beta(5,17)"
#: SE threshold of the adaptive test replayed on the calibration models to fit the link
SELECTION_TAU = 0.2
#: further SE stops replayed for the score link's answer corrections
EXTRA_SE_STOPS: tuple = (0.1,)
#: calibration population: "union" = every leaderboard model with answers (the union matrices,
#: missing cells masked), "dense" = the fully observed blocks (strong models only)
POPULATIONS = ("union", "dense")
#: union matrix file of each benchmark (MMLU has none: its dense matrix already spans the
#: leaderboard down to chance, published 22.7-89.4 against 17.8-89.4 for all models)
UNION_FILES = {"arc": "union_arc.csv.gz", "hellaswag": "union_hellaswag.csv.gz",
               "truthfulqa": "union_truthfulqa.csv.gz", "winogrande": "union_winogrande.csv.gz",
               "gsm8k": "union_gsm8k.csv.gz"}
#: a content item enters a union bank when at least this many models answered it
MIN_ITEM_ANSWERS = 200
#: a model enters a union calibration when it answered at least this share of those items
MIN_MODEL_SHARE = 0.5
#: published scores that are recording errors, not results (treated as missing): TruthfulQA's
#: mc2 is the normalized probability of the true answers, about 0.45 for a model at chance, so
#: the 54 models published at exactly 0.0 were not evaluated
INVALID_SCORE_MAX = {"truthfulqa": 0.0}
#: benchmarks whose published score is not monotone in the bank's ability (see ScoreLinkEstimator)
NON_MONOTONE = ("truthfulqa",)
#: the shortest adaptive test of a bank where 30 items leave a band of the leaderboard with a
#: large error (held-out whole-population study, 3 seeds, benchmarks/results/leaderboard.md;
#: minima chosen on that study): GSM8K's 2PL reaches SE 0.2 in 30 items mid-range, where its score moves ~4
#: points per 0.1 theta (bands 20-60: MAE 3.5-4.1 at 45 items, 3.0-3.6 at 60); ARC 40-50 2.62
#: at 30 items, 2.48 at 45; WinoGrande 40-50 3.10 -> 2.61; TruthfulQA 30-40 3.39 -> 3.14.
#: HellaSwag and MMLU meet 2.5 points in every band at 30.
MIN_ITEMS = {"arc": 45, "truthfulqa": 45, "winogrande": 45, "gsm8k": 55}
#: the item filter of the build (:func:`atlascat.filtering.filter_items`): the paper's rules
#: without the ceiling rule and without dropping models for a low total. On the whole
#: population an item that 96% of the models get right is what measures the weak ones
#: (HellaSwag, held-out, seed 0: 61 items instead of 49, MAE 0.94 instead of 1.30 points, and
#: 1.8-3.7 instead of 5.5-18.8 in the bands below 60); the bottom 0.1% by total are the
#: chance-level models the bank must measure.
FILTER_OPTIONS = {"subject_percentile": None, "max_mean": None}


def banks_dir() -> Path:
    """The package folder holding the shipped content banks and score links."""
    return Path(__file__).resolve().parents[1] / "datasets" / "data" / "banks"


def content_item_ids(bench: str, items_dir) -> list[str]:
    """Matrix item ids that have content in ``items_dir/<bench>{,-secondary}.parquet``."""
    items_dir = Path(items_dir)
    ids: list[str] = []
    col = "mb_sub_idx" if bench == "mmlu" else "metabench_idx"
    for name in (f"{bench}.parquet", f"{bench}-secondary.parquet"):
        path = items_dir / name
        if path.exists():
            ids += pd.read_parquet(path, columns=[col])[col].astype(str).tolist()
    if not ids:
        raise BankError(f"no item file {bench}.parquet in {str(items_dir)!r}; point --items at "
                        "the folder holding metabench's item parquet files")
    return list(dict.fromkeys(ids))


def load_published_scores(path, bench: str) -> pd.Series:
    """Published leaderboard score (0-1) of every model for ``bench``, indexed by model name."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"leaderboard score file {str(path)!r} does not exist; pass "
                          "../shared/data/openllm/leaderboard_scores.csv.gz")
    df = pd.read_csv(path)
    if bench not in df.columns or "name" not in df.columns:
        raise ConfigError(f"{str(path)!r} has no 'name' and {bench!r} columns")
    s = df.drop_duplicates("name").set_index("name")[bench].astype(float) / 100.0
    if bench in INVALID_SCORE_MAX:
        s = s.where(s > INVALID_SCORE_MAX[bench])
    return s


def content_matrix(bench: str, items_dir, responses=None):
    """The response matrix restricted to the items with content (default: bundled dense)."""
    from .. import catalogue

    rm = catalogue.load_responses(bench) if responses is None else responses
    ids = set(content_item_ids(bench, items_dir))
    keep = np.array([str(i) in ids for i in rm.item_ids])
    if not keep.any():
        raise BankError(f"no item of the {bench} matrix has content in {str(items_dir)!r}")
    return rm.subset(items=keep)


def population_matrix(bench: str, items_dir, *, population: str = "union", data_dir=None):
    """The calibration matrix of ``bench``: models x content items.

    ``population="union"``: every leaderboard model with answers (``data_dir/union_<bench>``),
    restricted to the content items that at least :data:`MIN_ITEM_ANSWERS` models answered and
    to the models that answered at least :data:`MIN_MODEL_SHARE` of them (missing cells stay
    NaN: the EM masks them). In the union matrices the weak models answered content items too
    (HellaSwag: 675 models published 25.9-92.8 answered 58 of the 63 well-answered content
    items; WinoGrande: 919 models, 47.9-91.5, 106 of 114), so the content items alone carry the
    whole range. MMLU has no union matrix: its dense matrix is used (it spans the leaderboard).
    ``population="dense"``: the bundled dense matrix (the banks of earlier releases).
    """
    from ..responses import ResponseMatrix

    if population not in POPULATIONS:
        raise ConfigError(f"unknown population {population!r}; choose one of "
                          f"{', '.join(POPULATIONS)}")
    if population == "dense" or bench not in UNION_FILES:
        return content_matrix(bench, items_dir)
    path = Path(data_dir if data_dir is not None else Path(items_dir).parent) / UNION_FILES[bench]
    if not path.exists():
        raise ConfigError(f"union matrix {str(path)!r} does not exist; pass --data "
                          "../shared/data/openllm (the folder holding union_<bench>.csv.gz)")
    rm = ResponseMatrix.read(path, on_empty="drop")
    ids = set(content_item_ids(bench, items_dir))
    keep = np.array([str(i) in ids for i in rm.item_ids]) & (rm.observed.sum(0) >= MIN_ITEM_ANSWERS)
    if not keep.any():
        raise BankError(f"no content item of {str(path)!r} has {MIN_ITEM_ANSWERS} answers")
    values = rm.values[:, keep]
    rows = np.isfinite(values).sum(1) >= MIN_MODEL_SHARE * keep.sum()
    return rm.subset(subjects=rows, items=keep)


def _calibrate(train, model: str, seed: int, check_dimensions: bool = True):
    from ..irt.calibrate import calibrate

    # priors pinned (not the library's "auto" defaults), so the recipe studied in
    # docs/leaderboard.md is what the build runs: no prior on a, Beta(5, 17) on c
    opts = {"prior_a": "none", "prior_c": PRIOR_C if model in ("3pl", "4pl") else "none",
            "prior_u": "none"}
    res = calibrate(train, model=model, random_state=int(seed), check_dimensions=check_dimensions,
                    **opts)
    if not res.converged:
        raise BankError(f"the {model} calibration did not converge ({train.n_subjects} models "
                        f"x {train.n_items} items)")
    return res


def _scores_for(rm, scores: pd.Series) -> np.ndarray:
    return scores.reindex(rm.subject_ids.astype(str)).to_numpy(float)


def _select_model(train, scores: pd.Series, candidates, seed: int, bench: str) -> tuple[str, list]:
    """Choose the IRT model on held-out calibration models (80/20 split of ``train``).

    For each candidate: bank + link on the 80%, the adaptive test (SE <= 0.2) on the 20%, and
    the ratio of its score MAE to that of random-L (L = the adaptive test's mean length; a line
    from the mean accuracy on L random bank items, fitted on the 80%, 10 draws). The smallest
    ratio wins: the model whose adaptive test is the most efficient for the score, whatever
    length its SE rule gives.
    """
    from ..cat.config import CATConfig
    from ..cat.simulate import simulate_cat
    from ..scorelink import ScoreLinkEstimator
    from ..filtering import stratified_split

    fit, val = stratified_split(train, test_size=0.2, rng=np.random.default_rng([seed, 3]))
    s_fit, s_val = _scores_for(fit, scores), _scores_for(val, scores)
    ok_fit, ok_val = np.isfinite(s_fit), np.isfinite(s_val)
    rows = []
    for model in candidates:
        bank = _calibrate(fit, model, seed, check_dimensions=False).bank   # a candidate's bank
        link = ScoreLinkEstimator(bench, cat_config=False, monotone=bench not in NON_MONOTONE
                                  ).fit(bank, fit, s_fit).link_
        y_fit = fit.aligned_values(bank.item_ids, extra="ignore")
        y_val = val.aligned_values(bank.item_ids, extra="ignore")
        cfg = CATConfig(se_stop=SELECTION_TAU, min_items=MIN_ITEMS.get(bench, 30))
        res = simulate_cat(bank, cfg, responses=y_val, rng=np.random.default_rng([seed, 4]))
        pred = link.predict_many(res.persons["theta"].to_numpy(float),
                                 res.persons["se"].to_numpy(float))[0]
        mae = float(np.mean(np.abs(pred - s_val)[ok_val]))
        length = int(min(len(bank), max(1, round(float(res.persons["n_items"].mean())))))
        rand = []
        for rep in range(10):
            sel = np.random.default_rng([seed, 6, rep]).choice(len(bank), length, replace=False)
            acc_fit = np.nanmean(y_fit[:, sel], axis=1)
            coef = np.polyfit(acc_fit[ok_fit], s_fit[ok_fit], 1)
            p = np.polyval(coef, np.nanmean(y_val[:, sel], axis=1))
            rand.append(float(np.mean(np.abs(p - s_val)[ok_val])))
        rows.append({"model": model, "val_mae": mae, "val_items": float(length),
                     "val_random_mae": float(np.mean(rand)),
                     "ratio": mae / float(np.mean(rand))})
    best = min(rows, key=lambda r: r["ratio"])["model"]
    return best, rows


def fit_bank_and_link(train, scores: pd.Series, *, bench: str, model: str = "auto",
                      candidates=CANDIDATES, filter: bool = True, seed: int = 0,
                      leaderboard_scores=None, use_answers: bool = True,
                      extra_se_stops=EXTRA_SE_STOPS, filter_options=None):
    """Calibrate a bank and fit its score link on the calibration models ``train``.

    ``train``: ResponseMatrix (models x content items); ``scores``: published scores (0-1)
    indexed by model name. ``filter_options``: keyword arguments of
    :func:`atlascat.filtering.filter_items` (default: :data:`FILTER_OPTIONS`).
    Returns ``(bank, link, info)``.
    """
    from ..bankdir.builder import fit_link
    from ..filtering import filter_items

    info: dict = {"benchmark": bench, "n_models": int(train.n_subjects),
                  "n_content_items": int(train.n_items)}
    s_all = _scores_for(train, scores)
    if np.isfinite(s_all).sum() < 100:
        raise ConfigError(f"only {np.isfinite(s_all).sum()} {bench} models have a published "
                          "score; check the model names of the matrix and the score file")
    if filter:
        opts = dict(FILTER_OPTIONS if filter_options is None else filter_options)
        train, report = filter_items(train, **opts)
        info["filter"] = {k: v for k, v in report.to_dict().items()
                          if k not in ("dropped_items", "dropped_subjects")}
    model = str(model).lower()
    if model == "auto":
        model, rows = _select_model(train, scores, tuple(candidates), seed, bench)
        info["model_selection"] = {"criterion": "held-out score MAE / random-L MAE",
                                   "candidates": rows}
    info["model"] = model
    res = _calibrate(train, model, seed)
    bank = res.bank
    s = _scores_for(train, scores)
    min_items = MIN_ITEMS.get(bench, 30)
    # the bank builder's link step (atlascat.bankdir), with the shipped banks' settings: the
    # replayed test stops at SE <= 0.2 (SELECTION_TAU) after min_items, no cross-fitting
    link = fit_link(bank, train, s, benchmark=bench, seed=seed, min_items=min_items,
                    population_scores=leaderboard_scores, use_answers=use_answers,
                    extra_se_stops=extra_se_stops, monotone=bench not in NON_MONOTONE)
    link.info["model"] = model
    if bench in MIN_ITEMS:
        link.info["min_items"] = int(MIN_ITEMS[bench])
    info["n_items"] = int(len(bank))
    return bank, link, info


def build_content_bank(bench: str, *, items_dir, scores_path, model: str = "auto", seed: int = 0,
                       responses=None, attach: bool = True, population: str = "union",
                       data_dir=None):
    """Build one shipped content bank and its score link; returns ``(bank, link, info)``.

    ``responses``: the calibration matrix (default: :func:`population_matrix` of
    ``population``, the whole leaderboard population from the union matrices in ``data_dir``,
    default the parent folder of ``items_dir``).
    ``attach``: join the item content (``attach_content(bank, load_item_content(...))``).
    """
    bench = str(bench).lower()
    if bench not in BENCHMARKS:
        raise ConfigError(f"unknown benchmark {bench!r}; choose one of {', '.join(BENCHMARKS)}")
    t0 = time.perf_counter()
    if responses is None:
        rm = population_matrix(bench, items_dir, population=population, data_dir=data_dir)
    else:
        rm = content_matrix(bench, items_dir, responses)
    scores = load_published_scores(scores_path, bench)
    has = np.isfinite(_scores_for(rm, scores))
    rm = rm.subset(subjects=has)
    bank, link, info = fit_bank_and_link(rm, scores, bench=bench, model=model, seed=seed,
                                         leaderboard_scores=scores.to_numpy(float))
    if attach:
        from ..content.items import attach_content, load_item_content

        bank = attach_content(bank, load_item_content(bench, items_dir), missing="drop")
        if len(bank) != info["n_items"]:
            raise BankError(f"{info['n_items'] - len(bank)} calibrated {bench} items lost their "
                            "content when attached")
    info["population"] = population if responses is None else "given"
    info["seconds"] = round(time.perf_counter() - t0, 1)
    return bank, link, info


def write_content_bank(bank, path) -> Path:
    """Write a content bank as zstd Parquet (list columns stay lists)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    bank.to_frame("ours").to_parquet(path, index=False, compression="zstd")
    return path


def main(argv=None) -> None:  # pragma: no cover - maintenance script
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="../shared/data/openllm/items",
                        help="folder with <bench>.parquet item files")
    parser.add_argument("--scores", default="../shared/data/openllm/leaderboard_scores.csv.gz",
                        help="published leaderboard scores (leaderboard_scores.csv.gz)")
    parser.add_argument("--bench", nargs="*", default=list(BENCHMARKS))
    parser.add_argument("--model", default="auto", help="auto | 2pl | 3pl | 4pl")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--population", default="union", choices=POPULATIONS,
                        help="calibration models: union (whole leaderboard) or dense")
    parser.add_argument("--data", default=None,
                        help="folder with union_<bench>.csv.gz (default: the parent of --items)")
    parser.add_argument("-o", "--output", default=None, help="output folder (default: shipped)")
    args = parser.parse_args(argv)
    out = Path(args.output) if args.output else banks_dir()
    for bench in args.bench:
        bank, link, info = build_content_bank(bench, items_dir=args.items,
                                              scores_path=args.scores, model=args.model,
                                              seed=args.seed, population=args.population,
                                              data_dir=args.data)
        p = write_content_bank(bank, out / f"{bench}.parquet")
        link.info["build"] = {k: v for k, v in info.items() if k != "seconds"}
        q = link.write(out / f"{bench}_link.json")
        scales = {k: round(c["scale"], 2) for k, c in link.corrections.items()}
        print(f"{bench}: {len(bank)} items, {info['model']}, interval x"
              f"{link.interval_scale:.2f} (with answers {scales}), anchors {link.anchor_items} "
              f"-> {p.name} ({p.stat().st_size / 1024:.0f} KiB), "
              f"{q.name} ({q.stat().st_size / 1024:.0f} KiB), {info['seconds']} s")
        print("  " + json.dumps(info.get("model_selection", {}).get("candidates", [])))


if __name__ == "__main__":  # pragma: no cover
    main()
