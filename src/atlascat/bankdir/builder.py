"""Build a bank folder from the results a user has: a response matrix or lm-eval sample logs.

    results of N models (matrix, or samples_<task>_*.jsonl[.gz] with each item's arguments)
      -> each model's score: its mean over ALL items of the results (or a --scores file)
      -> item filter: items every model answered alike are dropped (no information; the
         point-biserial rule from 100 models up, :func:`atlascat.filtering.filter_items`)
      -> calibration with the size defaults (:mod:`atlascat.irt.defaults`: below 500 models a
         2PL with a ~ lognormal(0, 1); its identification warnings go into the manifest);
         continuous scores (F1, ROUGE, mc2) by the extended quasi-likelihood, each item's
         term divided by its dispersion (``dispersion="auto"``, :mod:`atlascat.irt.dispersion`); whether the items
         measure one thing (the calibration's :mod:`atlascat.irt.dimensionality`;
         :func:`build_warnings` lists it with the calibration's warnings)
      -> score link (:class:`atlascat.scorelink.ScoreLink`) fitted on the source models, its spline
         and support sized for N (:func:`atlascat.scorelink.curve.knots_for`,
         :func:`atlascat.scorelink.curve.support_for`)
      -> from sample logs: every item's requests exactly as logged, its scoring rule and gold
         (:mod:`atlascat.bankdir.samplelogs`), in the bank's metadata and ``requests.jsonl``
      -> the folder (:mod:`atlascat.bankdir.folder`) with a manifest.

:func:`build_bank` is the library call behind ``atlas build-bank``; the shipped banks'
maintenance script (:mod:`atlascat.live.build_bank`) fits its banks and links with
:func:`fit_link`, the same link step with the shipped banks' settings.

At least :data:`MIN_MODELS` (20) source models: the score link's spline then has one interior
knot, and its interval is scaled on the source models' own replayed tests (see
``docs/your_benchmark.md`` for its coverage on held-out models).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..cat.config import Stopping
from ..errors import BankError, ConfigError, ResponseDataError, warn_user
from ..irt.dispersion import without_dispersion
from .checks import (chance_note, check_model, check_score_range, check_scores_scale,
                     in_source_models, range_note)
from .defaults import BUDGET, FOLDS, MIN_MODELS, PREDICTOR_ITEMS_FILE
from .scaled import read_scaled_matrix, shares_of_one  # noqa: F401  (re-exported)

__all__ = ["build_bank", "build_warnings", "benchmark_name", "fit_link", "read_scores", "MIN_MODELS", "LINK_SE_STOP",
           "read_results", "cross_fit_factor", "widen", "default_chance", "BUDGET", "FOLDS",
           "read_scaled_matrix", "check_score_range"]

#: SE stop of the adaptive test replayed on the source models to fit the link's short-test
#: curve, answer corrections and interval scales (the shipped banks' setting)
LINK_SE_STOP = 0.2
_LOG_SUFFIXES = (".jsonl", ".jsonl.gz")


def _is_logs(paths: Sequence) -> bool:
    """Whether the source is sample logs (jsonl files, or folders holding samples_*.jsonl)."""
    for p in map(Path, paths):
        if p.is_dir():
            return True
        if p.name.endswith(_LOG_SUFFIXES):
            return True
    return False


def read_results(source, *, task=None, metric=None, filter_name=None, id_field="metabench_idx",
                 score_range=None, on_file=None, common_items=False):
    """``(ResponseMatrix, SampleLogs or None, [source files])`` from a matrix or sample logs;
    ``score_range`` (lo, hi): the scores' scale, mapped to [0, 1] (sample logs: default the
    harness's known range of the metric); ``on_file(k, n)`` after each of the n sample log
    files is read; ``common_items``: sample logs of different items keep those every model
    logged (else refused: :meth:`SampleLogs.keep_common_items`). A pandas DataFrame (models
    as its index, one column per item) or a ResponseMatrix is the matrix itself (no files)."""
    from ..responses import ResponseMatrix, as_response_matrix

    if isinstance(source, (ResponseMatrix, pd.DataFrame)):
        paths = [source]
    else:
        paths = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if not paths:
        raise ConfigError("give the results: a response matrix file or sample logs")
    if not isinstance(paths[0], (ResponseMatrix, pd.DataFrame)) and _is_logs(paths):
        from .samplelogs import read_sample_logs

        logs = read_sample_logs(paths, task=task, metric=metric, id_field=id_field,
                                filter_name=filter_name, score_range=score_range,
                                on_file=on_file)
        logs.keep_common_items(common_items)
        return logs.matrix(), logs, [str(f) for f in logs.files]
    if len(paths) > 1:
        raise ConfigError(f"give one response matrix (got {len(paths)} files); several files "
                          "are read as sample logs only (samples_<task>_*.jsonl)")
    path = paths[0] if isinstance(paths[0], (ResponseMatrix, pd.DataFrame)) else Path(paths[0])
    if isinstance(path, Path) and not path.exists():
        raise ResponseDataError(f"{str(path)!r} does not exist; give a response matrix file or "
                                "sample logs")
    if isinstance(path, Path) and path.name.startswith("results") and path.suffix == ".json":
        raise ResponseDataError(f"{str(path)!r} is lm-evaluation-harness's aggregate results "
                                "(one score per task); a bank needs each item's score: rerun "
                                "lm_eval with --log_samples and give the samples_<task>_*.jsonl "
                                "files or their folders")
    if metric is not None or task is not None or filter_name is not None or common_items:
        raise ConfigError("--metric, --task, --filter and --common-items choose among sample "
                          "logs; a response matrix already holds one score per cell")
    files = [str(path)] if isinstance(path, Path) else []
    if score_range is not None:
        return (read_scaled_matrix(path, score_range, shares_warning=False, source=True), None,
                files)
    try:
        if not isinstance(path, Path):
            return as_response_matrix(path, on_empty="drop"), None, files
        return ResponseMatrix.read(path, on_empty="drop"), None, files
    except ResponseDataError as exc:
        if "outside [0, 1]" not in str(exc):
            raise
        cell = str(exc).split("; scores must be")[0]
        raise ResponseDataError(f"{cell}; scores must be in [0, 1]: give the metric's scale "
                                "with --score-range LO HI (a percent or BLEU: 0 100, a 1-10 "
                                "rating: 1 10)") from None


def check_spread(rm, score_range=None, min_sd: float = 0.01) -> None:
    """Refuse results in which no item's scores vary across the models (each item's SD below
    ``min_sd`` of the 0-1 scale, the item filter's rule): nothing to calibrate. With a
    ``score_range`` the line says how far up the range the scores reach, the sign of 0-1
    scores read with --score-range 0 100."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # an item nobody answered: NaN, not a spread
        sd = np.nanstd(rm.values, axis=0)
    if np.any(sd >= min_sd):
        return
    msg = (f"no item's scores vary across the {rm.n_subjects} models (each item's SD below "
           f"{min_sd:g} of the scale): nothing to calibrate")
    if score_range is not None:
        lo, hi = score_range
        top = lo + float(np.nanmax(rm.values)) * (hi - lo)
        msg += (f"; the scores reach only {top:g} of --score-range {lo:g} {hi:g}: scores "
                "already on 0-1 need no --score-range")
    raise ResponseDataError(msg)


def _on_scale(value: float, score_range, what: str) -> float:
    """A score given on the folder's scale (lo, hi) -> (x - lo) / (hi - lo); as is without
    one. Outside [lo, hi]: one line naming ``what``."""
    if score_range is None:
        return value
    lo, hi = score_range
    if not lo <= value <= hi:
        raise ConfigError(f"{what} {value:g} is outside the declared range [{lo:g}, {hi:g}] of "
                          "--score-range; give it on the metric's scale")
    return (value - lo) / (hi - lo)


#: the model column of a --scores file, by name (the first present)
SCORE_MODEL_COLUMNS = ("model", "subject_id", "name", "Model_Name")


def read_scores(path, models: Sequence[str], score_range=None) -> pd.Series:
    """Published scores (0-1) from a CSV with a model column and a score column.

    Columns, read by their header names: the model (the first of :data:`SCORE_MODEL_COLUMNS`)
    and ``score``; a file without them is an error that names the columns expected.
    Percentages (any value above 1) are divided by 100. ``score_range`` (lo, hi): the scores
    are on the metric's scale, as the results are (BLEU 0-100, a 1-10 rating), mapped as
    (x - lo) / (hi - lo); a score outside [lo, hi] is refused. A model the results do not hold
    is an error (a misspelt name would silently lose a source model)."""
    from ..validation import read_frame

    df = read_frame(path, what="scores file", option="--scores")
    id_col = next((c for c in SCORE_MODEL_COLUMNS if c in df.columns), None)
    if id_col is None or "score" not in df.columns:
        raise ConfigError(f"--scores {str(path)!r} has columns {', '.join(map(str, df.columns))}; "
                          "it needs a model column (model, subject_id, name or Model_Name) and "
                          "a 'score' column, e.g. the header model,score")
    sc_col = "score"
    s = pd.to_numeric(df[sc_col], errors="coerce")
    s.index = df[id_col].astype(str)
    if s.isna().any():
        raise ConfigError(f"--scores {str(path)!r}: score of {s.index[s.isna()][0]!r} is "
                          "missing or not a number")
    if s.index.duplicated().any():
        raise ConfigError(f"--scores {str(path)!r}: model {s.index[s.index.duplicated()][0]!r} "
                          "appears twice")
    known = set(map(str, models))
    unknown = [m for m in s.index if m not in known]
    if unknown:
        raise ConfigError(f"--scores names {len(unknown)} model(s) not in the results, e.g. "
                          f"{unknown[:3]}; use the results' model names (e.g. "
                          f"{sorted(known)[:2]})")
    if score_range is not None:
        lo, hi = (float(v) for v in score_range)
        off = s[(s < lo) | (s > hi)]
        if len(off):
            raise ConfigError(f"--scores {str(path)!r}: score of {off.index[0]!r} is "
                              f"{off.iloc[0]:g}, outside the declared range [{lo:g}, {hi:g}] "
                              "of --score-range (give each score on the metric's scale)")
        return (s - lo) / (hi - lo)
    if (s < 0).any() or (s > 100).any():
        raise ConfigError(f"--scores {str(path)!r}: scores must be in 0-1 (or 0-100 percent)")
    return s / 100.0 if (s > 1).any() else s


def check_scores_rise(scores, item_mean, path) -> None:
    """A published score must rise with the answers the bank is built from (an accuracy, not
    an error rate): their Pearson correlation over the models with a score must be positive."""
    s, m = np.asarray(scores, float), np.asarray(item_mean, float)
    ok = np.isfinite(s) & np.isfinite(m)
    s, m = s[ok], m[ok]
    if np.std(s) == 0:
        raise ConfigError(f"--scores {str(path)!r}: every model has the same score; a bank "
                          "predicts a score that tells the models apart")
    r = np.corrcoef(s, m)[0, 1] if np.std(m) > 0 else np.nan
    if not r > 0:
        raise ConfigError(f"--scores {str(path)!r}: the scores do not rise with the models' "
                          f"answers (correlation {r:.2f} with their mean over the items, "
                          f"{len(s)} models); give a score where higher is better "
                          "(an accuracy, not an error rate) that these answers measure")


def fit_link(bank, responses, scores, *, benchmark: str, seed: int = 0,
             min_items: int = Stopping.min_items,
             max_items: int | None = None, chance=None, population_scores=None,
             monotone: bool = True,
             extra_se_stops=(0.1,), use_answers: bool = True, **fit_options):
    """The score link of ``bank`` fitted on the source models (their answers and scores):
    short-test curve, answer corrections and interval scales from an adaptive test replayed on
    them (SE <= :data:`LINK_SE_STOP`, ``min_items`` to ``max_items`` items; None: the CAT's
    default), spline and
    support sized for the number of models."""
    from ..cat.config import CATConfig
    from ..scorelink import ScoreLinkEstimator
    from ..scorelink.curve import support_for

    if "min_support" not in fit_options and max_items is not None:  # a bank folder's link
        fit_options["min_support"] = support_for(np.isfinite(np.asarray(scores, float)).sum())
    if max_items is None:  # the CAT's own default length (the shipped banks' links)
        cfg = CATConfig(se_stop=LINK_SE_STOP, min_items=int(min_items))
    else:
        top = min(int(max_items), len(bank))
        cfg = CATConfig(se_stop=LINK_SE_STOP, min_items=min(int(min_items), top), max_items=top)
    est = ScoreLinkEstimator(benchmark, cat_config=cfg, random_state=[seed, 5],
                             use_answers=use_answers, extra_se_stops=extra_se_stops,
                             monotone=monotone, chance=chance, **fit_options)
    return est.fit(bank, responses, scores, population_scores=population_scores).link_


#: fixed test lengths at which :func:`cross_fit_factor` also measures the interval's coverage
#: of held-out models (shorter than the budget's test), for the link's length factor
CHECK_LENGTHS = (5, 10, 20)


def cross_fit_factor(responses, scores, *, model: str, benchmark: str, seed: int = 0,
                     folds: int = 5, budget: int = 50, chance=None, on_fold=None) -> dict:
    """How much the link's 95% interval must widen to cover models it was not fitted on.

    K-fold cross-fitting on the source models: for each fold, a bank and a link are fitted on
    the other folds, the fold's models take the adaptive test (at most ``budget`` items) on
    their real answers, and each gets the ratio r = |score - prediction| / (the half-width of
    its interval on the error's side): the interval covers it iff r <= 1. The factor is
    max(1, the 95% quantile of r) over the models the fitted link counts as inside its data
    (outside it the interval already reaches the bound the data cannot exclude). In-sample
    replays overstate a small population's precision: the items were calibrated on the very
    answers they replay (HELM MMLU, 20 source models: 47% of held-out models inside the
    in-sample interval).

    A shorter test than the budget's is checked too: the same models take tests of each
    fixed length k in :data:`CHECK_LENGTHS` below the budget's median length K, and q_k, the
    95% quantile of their r, gives the multiplier max(1, q_k / factor) at k (1 at K, never
    rising with k): the link's :attr:`~atlascat.scorelink.ScoreLink.length_factor`. The
    answer correction and the interval scales are fitted on tests of the budget's length, and
    a short test's error is larger than their spread says. ``on_fold()`` is called after each
    fold (a progress bar's step). Returns {"factor", "folds",
    "ratio_q95", "n", "coverage_before", "length_factor" ({"counts", "factors"}, or None
    when the budget's test is no longer than the shortest check)}.
    """
    from ..cat.config import CATConfig

    y_all = np.asarray(responses, float)
    s_all = np.asarray(scores, float)
    n = y_all.shape[0]
    fold_of = np.random.default_rng([seed, 11]).permutation(n) % int(folds)
    lengths = [k for k in CHECK_LENGTHS if k < min(30, int(budget))]
    ratios = {k: ([], []) for k in [None, *lengths]}   # None: the budget's test
    counts = []
    for k in range(int(folds)):
        test = fold_of == k
        bank, link, cols = _fold_link(y_all, s_all, ~test & np.isfinite(s_all), model=model,
                                      benchmark=benchmark, seed=seed, budget=budget,
                                      chance=chance)
        top = min(int(budget), len(bank))
        yt = y_all[test][:, cols]
        for length in ratios:
            cfg = (CATConfig(se_stop=0.1, min_items=min(30, top), max_items=top)
                   if length is None else
                   CATConfig(min_items=min(length, top), max_items=min(length, top)))
            r, inside, asked = _held_out_ratios(bank, link, cfg, yt, s_all[test],
                                                np.random.default_rng([seed, 12, k]))
            ratios[length][0].extend(r.tolist())
            ratios[length][1].extend(inside.tolist())
            if length is None:
                counts.extend(asked.tolist())
        if on_fold is not None:
            on_fold()

    def q95(length):
        r, inside = (np.asarray(v) for v in ratios[length])
        use = r[inside.astype(bool)] if inside.sum() >= 10 else r
        return (float(np.quantile(use, 0.95)) if use.size else 1.0), r

    q, every = q95(None)
    factor = max(1.0, q)
    out = {"factor": factor, "folds": int(folds), "ratio_q95": q, "n": int(every.size),
           "coverage_before": float(np.mean(every <= 1.0)) if every.size else float("nan"),
           "length_factor": None}
    full = float(np.median(counts)) if counts else 0.0
    lengths = [k for k in lengths if k < full]
    if lengths:
        mult = np.array([max(1.0, q95(k)[0] / factor) for k in lengths] + [1.0])
        mult = np.maximum.accumulate(mult[::-1])[::-1]      # never rising with the length
        out["length_factor"] = {"counts": [float(k) for k in lengths] + [full],
                                "factors": [float(v) for v in mult]}
    return out


def _fold_link(y_all, s_all, train, *, model, benchmark, seed, budget, chance):
    """(bank, link, the bank's columns of ``y_all``) calibrated and fitted on the ``train``
    models alone (the items none of them answered differently left out)."""
    from ..irt.calibrate import calibrate
    from ..responses import ResponseMatrix
    from ..scorelink.curve import knots_for

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an item no fold model answered: NaN, left out
        keep_items = np.nanstd(y_all[train], axis=0) > 0
    rm_tr = ResponseMatrix(y_all[train][:, keep_items], [f"m{i}" for i in np.flatnonzero(train)],
                           [str(j) for j in np.flatnonzero(keep_items)], on_empty="keep")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bank = calibrate(rm_tr, model=model, random_state=int(seed), dispersion="auto",
                         check_dimensions=False).bank   # a fold: the main fit checks
    bank = without_dispersion(bank)   # the folder's CAT: the Bernoulli likelihood
    cols = np.asarray([int(i) for i in bank.item_ids])
    m = int(train.sum())
    link = fit_link(bank, y_all[train][:, cols], s_all[train], benchmark=benchmark, seed=seed,
                    max_items=budget, chance=chance, extra_se_stops=(),
                    min_models=min(m, 16), n_knots=knots_for(m))
    return bank, link, cols


def _held_out_ratios(bank, link, cfg, y, s, rng):
    """Each held-out model's r = |score - prediction| / (its interval's half-width on the
    error's side) after the adaptive test ``cfg`` on its answers ``y``; whether the link
    counts it inside its data; and its number of answers."""
    from ..cat.simulate import simulate_cat

    res = simulate_cat(bank, cfg, responses=y, rng=rng)
    th = res.persons["theta"].to_numpy(float)
    se = res.persons["se"].to_numpy(float)
    asked = res.asked_mask()
    score, lo, hi, flag = link.predict_many(th, se, asked=asked, y=np.nan_to_num(y), flags=True)
    half = np.where(s >= score, hi - score, score - lo)
    r = np.abs(s - score) / np.maximum(half, 1e-9)
    ok = np.isfinite(r) & np.isfinite(s)
    inside = np.array([f in ("", "misfit") for f in flag[ok]], bool)
    return r[ok], inside, asked.sum(1)[ok]


def widen(link, factor: float):
    """Multiply every interval scale of ``link`` (plain and answer corrections) by ``factor``."""
    link.interval_scale = float(link.interval_scale * factor)
    for c in link.corrections.values():
        c["scale"] = float(c["scale"] * factor)
    return link


#: a chat answer's text scorer (:mod:`atlascat.live.scorers`) by rule; none for F1, a metric
_CHAT_SCORERS = {"exact_match": "exact", "exact_match_norm": "exact",
                 "exact_match_raw": "exact", "gsm8k_exact": "gsm8k",
                 "gsm8k_flexible": "gsm8k"}


def _content(logs, ids: Sequence[str]) -> tuple[pd.DataFrame, list, list[str]]:
    """Request metadata rows and requests.jsonl records of the items ``ids`` (those whose gold
    the logs determine), and the ids dropped for an undetermined gold."""
    from ..content.parsing import letters

    rows, recs, dropped = [], [], []
    for i in ids:
        it = logs.items.get(i)
        if it is None:
            raise ResponseDataError(f"item {i} has no logged 'arguments'; log samples with a "
                                    "harness that records them (lm-eval >= 0.4)")
        f = logs.rule_fields(i)
        if it.kind == "loglikelihood" and f["gold"] < 0:
            dropped.append(i)
            continue
        conts = [c.strip() for c in f["continuations"]]
        gen = not conts
        answer = f["target"] if gen else (letters(len(conts))[f["gold"]] if len(conts) <= 26
                                          else conts[f["gold"]])
        question = f["context"].rstrip().rsplit("\n\n", 1)[-1]
        rows.append({"item_id": i, "benchmark": logs.task, "question": question,
                     "choices": conts, "answer": answer,
                     "scorer": (_CHAT_SCORERS.get(f["rule"], "") if gen else
                                "" if len(conts) > 26 else "mc"), "fewshot": "",
                     **{k: v for k, v in f.items() if k != "agreement"}})
        recs.append({"item_id": i, "doc_id": it.doc_id, "kind": it.kind,
                     "requests": [r.to_dict() for r in it.requests], "rule": f["rule"],
                     "gold": f["gold"], "target": f["target"], "agreement": f["agreement"],
                     **({"targets": f["targets"]} if len(f.get("targets", ())) > 1 else {}),
                     **({"sampled": True} if any(r.sampled for r in it.requests) else {}),
                     "doc": it.doc if isinstance(it.doc, (dict, list, str)) else str(it.doc)})
    return pd.DataFrame(rows), recs, dropped


#: item-id stems too generic to name a benchmark (``item1``, ``q_7``, ``question.3``)
_GENERIC_STEMS = frozenset({"item", "items", "question", "questions", "sample", "samples",
                            "doc", "docs", "id", "col", "column", "task", "prompt", "test"})


def benchmark_name(item_ids, path) -> tuple[str, str]:
    """(name, what named it) of a matrix's benchmark when ``--name`` is not given: the stem
    its item ids share (``qmsum.0`` .. ``qmsum.199`` -> ``qmsum``; ``helm_mmlu_0`` .. ->
    ``helm_mmlu``), cut at a separator (``. _ - / :``) and stripped of trailing digits, when
    it has three characters or more, a letter, and is not a generic word (``item``,
    ``question``); else the file's name without its suffixes (``"item ids"`` / ``"file"``)."""
    import os

    ids = [str(i) for i in item_ids]
    stem = os.path.commonprefix(ids) if len(ids) > 1 else ""
    cut = max(stem.rfind(c) for c in "._-/:")
    stem = stem[:cut] if cut > 0 else ""
    stem = stem.rstrip("0123456789").rstrip("._-/: ")
    if (len(stem) >= 3 and any(c.isalpha() for c in stem)
            and stem.lower() not in _GENERIC_STEMS):
        return stem, "item ids"
    return Path(path).name.split(".")[0], "file"


def default_chance(benchmark: str, meta: pd.DataFrame | None = None) -> tuple[float, str]:
    """(chance, where it came from) when the user gives none: the score of a model answering
    at random, the floor a weaker model's interval reaches down to. A known benchmark's
    (:data:`atlascat.scorelink.settings.CHANCE`); from sample logs the mean over items of
    1 / options, t / options for an mc2 item with t true options (the true options' share of
    the probability when every option is equally likely), 0 for a generated answer or a
    single continuation (LAMBADA: nothing to guess among); from a
    matrix 0, the lowest score its results cannot exclude."""
    from ..scorelink.settings import CHANCE

    known = CHANCE.get(str(benchmark).lower())
    if known is not None:
        return float(known), "benchmark"
    if meta is not None and len(meta):
        n = np.array([len(c) for c in meta["choices"]], float)
        right = np.ones_like(n)
        if "mc2_true" in meta:
            t = pd.to_numeric(meta["mc2_true"], errors="coerce").fillna(0).to_numpy(float)
            right = np.where(t > 0, t, 1.0)
        return float(np.mean(np.where(n > 1, right / np.maximum(n, 1.0), 0.0))), "options"
    return 0.0, "matrix"


def build_warnings(manifest: dict) -> list[str]:
    """What a built folder's reader must know, one line each: the calibration's warnings
    (identification, the size defaults) and items that do not measure one thing."""
    out = list(manifest.get("calibration", {}).get("warnings", []))
    gone = len(manifest.get("items", {}).get("dropped_gold_undetermined", []))
    if gone:
        out.append(f"{gone} of {manifest['items']['n_results']} items left out: their logged "
                   "scores contradict their logged outputs (no gold answer agrees with both)")
    missing = len(manifest.get("items", {}).get("dropped_missing", []))
    if missing:
        out.append(f"{missing} items left out: not every model logged them (--common-items)")
    req = manifest.get("requests") or {}
    if req.get("rule_agreement_min") is not None and req["rule_agreement_min"] < 1.0 - 1e-9:
        bad = req.get("rule_disagreeing_items")
        out.append(f"the scoring rule ({', '.join(req['rules'])}) reproduces "
                   f"{req['rule_agreement_mean']:.0%} of the logged scores from the logged "
                   f"outputs ({'' if bad is None else f'{bad} of '}{req['n_items']} items below "
                   f"100%, the worst {req['rule_agreement_min']:.0%}): a live run scores a new "
                   "model by this rule, not as the harness scored the logged models; check "
                   "--metric and --filter")
    from .harnessruns import limit_warning
    from .samplelogs import sampled_warning

    out += [sampled_warning(req["sampled_items"])] if req.get("sampled_items") else []
    out += [w for w in [limit_warning(manifest.get("source", {}).get("n_samples"))] if w]
    opaque = [r.split(":", 1)[1] for r in req.get("rules", []) if r.startswith("metric:")]
    if opaque:
        out.append(f"items scored by {', '.join(repr(m) for m in opaque)}, a metric atlas "
                   "cannot compute from a model's outputs: a live run asks them only through "
                   "--subject cmd:COMMAND (your harness scores each item) or replay:")
    n_items = manifest.get("items", {}).get("n_results") or 0
    n_models = manifest.get("n_models") or 0
    budget = manifest.get("settings", {}).get("budget") or 0
    if (manifest.get("source", {}).get("kind") == "matrix" and n_items <= budget
            and n_models > n_items):
        out.append(f"{n_models} models x {n_items} items, no more items than the test length "
                   f"({budget}): rows are models and columns items; if the file's rows are "
                   "its items, transpose it (pandas: df.T)")
    d = manifest.get("dimensionality")
    if d and not d["one_trait"]:
        from ..irt.dimensionality import Dimensionality

        out.append(Dimensionality.from_dict(d).message())
    return out


def build_steps(folds: int = FOLDS) -> int:
    """The steps :func:`build_bank` reports to its ``progress``: the results read, the
    calibration, the score link, one per cross-fitting fold, the benchmark predictor and the
    folder written."""
    return 5 + max(0, int(folds))


def predictor_bank(rm, bank, *, model: str = "auto", seed: int = 0):
    """The bank the benchmark predictor is fitted on: ``bank`` when it holds every item of the
    results that any model answered differently from another, else a calibration of all of
    them. The item filter (point-biserial, from 100 models) serves the adaptive test; the
    predictor estimates the mean over every item, and an item filtered out would be predicted
    flat."""
    from ..irt.calibrate import calibrate

    y = rm.values
    varies = (np.nanmax(y, axis=0) > np.nanmin(y, axis=0))
    if len(bank) >= int(varies.sum()):
        return bank
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = calibrate(rm, model=model, random_state=int(seed), dispersion="auto",
                         check_dimensions=False)   # the folder's check is the main fit's
    return without_dispersion(full.bank) if full.converged else bank


def build_bank(source, output=None, *, scores=None, task: str | None = None,
               metric: str | None = None, filter_name: str | None = None,
               id_field: str | None = "metabench_idx", name: str | None = None,
               model: str = "auto", seed: int = 0, chance: float | None = None,
               min_models: int = MIN_MODELS, budget: int = BUDGET, folds: int = FOLDS,
               score_range=None, progress=None, common_items: bool = False):
    """Build a bank folder (see the module docstring); returns the loaded
    :class:`~atlascat.bankdir.folder.BankFolder` (written to ``output`` when given).

    Parameters
    ----------
    source : a response matrix file, or sample log files / run folders (one task), or the
        matrix itself: a pandas DataFrame (models as its index, one column per item) or a
        :class:`~atlascat.responses.ResponseMatrix`
    output : folder to write (created; its extra files are kept)
    scores : CSV of (model, score) when the benchmark's score is not the mean over the items
        (else each model's mean over all items of the results, dropped items included); on
        ``score_range`` when given (:func:`read_scores`)
    task, metric, filter_name, id_field : sample logs: which task, per-sample metric (default
        the task's first), harness filter and doc field of the item id
    common_items : sample logs whose models logged different items: keep the items every model
        logged (``manifest.items.dropped_missing``); default False: refused, one line
    name : the benchmark's name (default: the task, or the matrix file's stem; a matrix in
        memory: its item ids' common stem, else "results")
    model : IRT model ("auto": the size defaults of :mod:`atlascat.irt.defaults`)
    seed : seeds the calibration, the link's replayed tests, the cross-fitting folds and the
        predictor's replays (the same seed: the same bank, link and predictor)
    chance : the score of a model answering at random, 0-1 or on ``score_range`` when given
        (default :func:`default_chance`: a known benchmark's, from sample logs the mean of
        1 / options (t / options for mc2), from a matrix 0): the link's floor, and the
        predictor's (``BenchmarkPredictor(chance=...)``)
    min_models : fewest source models (with a score) a bank is built from (a ResponseDataError
        / ConfigError below)
    budget : the test length the link is fitted for (its replayed tests stop there)
    folds : cross-fitting folds that size the interval (:func:`cross_fit_factor`; 0: none)
    score_range : (low, high), the scale of the scores (BLEU 0-100, a 1-10 judge rating):
        mapped to [0, 1] once, when the results are read (sample logs: default the harness's
        known range of the metric), and every prediction mapped back
        (:func:`atlascat.bankdir.predict.metric_scale`); ``manifest.settings.score_range``
    progress : ``progress(done, total)`` after each step of the build (the results read, the
        calibration, the score link, each cross-fitting fold, the benchmark predictor, the
        folder written): ``total`` is :func:`build_steps` of ``folds``, where sample logs
        count one step per file read instead of one for the results
    """
    from .._version import __version__
    from ..content.items import attach_content
    from ..filtering import filter_items
    from ..irt.calibrate import calibrate
    from .folder import BankFolder, SourceAnswers, load_bank_dir, write_bank_dir

    total, done = [build_steps(folds)], [0]

    def step() -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], total[0])

    def read_file(k: int, n: int) -> None:    # sample logs: one step per file read
        total[0], done[0] = build_steps(folds) - 1 + n, k - 1
        step()

    check_model(model)   # before reading: a graded / gpcm bank is atlas calibrate's
    from ..validation import check_seed

    seed = check_seed(seed)
    if output is not None:   # before any work: never a folder whose own files it would replace
        from .folder import check_bank_dir_output

        check_bank_dir_output(output)
    score_range = check_score_range(score_range)
    rm, logs, files = read_results(source, task=task, metric=metric, filter_name=filter_name,
                                   id_field=id_field, score_range=score_range,
                                   on_file=read_file, common_items=common_items)
    if logs is None:
        step()
    if logs is not None and logs.score_range is not None:
        score_range = tuple(map(float, logs.score_range))
    if chance is not None:        # on the folder's scale, as every score it is given
        if score_range is None and not 0.0 <= float(chance) <= 1.0:
            raise ConfigError(f"--chance {float(chance):g} is outside 0-1" + (
                f": a percent? give {float(chance) / 100:g}" if 1 < float(chance) <= 100
                else "") + " (a metric on another scale: give --score-range LO HI)")
        if chance_note(chance, score_range):
            warn_user(chance_note(chance, score_range))
        chance = _on_scale(float(chance), score_range, "--chance")
    n = rm.n_subjects
    if n < min_models:
        raise ResponseDataError(f"the results hold {n} model(s); a bank needs at least "
                                f"{min_models} source models (add more models' results)")
    check_spread(rm, score_range)
    if logs is None and range_note(rm.values, score_range):   # a range the user declared
        warn_user(range_note(rm.values, score_range))
    models = [str(m) for m in rm.subject_ids]
    if scores is not None:
        published = read_scores(scores, models, score_range).reindex(models)
        score_note = f"published scores from {scores}"
    else:
        published = pd.Series(np.nanmean(rm.values, axis=1), index=models)
        score_note = f"each model's mean score over all {rm.n_items} items"
    s = published.to_numpy(float)
    if np.isfinite(s).sum() < min_models:
        lacking = [m for m, v in zip(models, s) if not np.isfinite(v)]
        where = (f"--scores {str(scores)!r} gives a score to only {int(np.isfinite(s).sum())} "
                 f"of the {len(models)} models (none for {lacking[0]!r}, ...): give each "
                 "model's score under its id in the results" if scores is not None else
                 f"only {int(np.isfinite(s).sum())} models have a score")
        raise ConfigError(f"{where}; the link needs at least {min_models}")
    if scores is not None:
        check_scores_scale(s, np.nanmean(rm.values, axis=1), score_range, scores)
        check_scores_rise(s, np.nanmean(rm.values, axis=1), scores)
    if name:
        bench, named_by = name, "name"
    elif logs is not None:
        bench, named_by = logs.task, "task"
    else:
        bench, named_by = benchmark_name(rm.item_ids, files[0] if files else "results")
        if named_by == "file":   # every output names it: "predicted source score"
            warn_user(f"the benchmark is named {bench!r} after its results file (its item ids "
                      f"share no name): outputs will read 'predicted {bench} score'; --name "
                      "NAME (name=) gives it its own")
    train, report = filter_items(rm, subject_percentile=None, max_mean=None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = calibrate(train, model=model, random_state=int(seed), dispersion="auto")
    if not res.converged:
        raise BankError(f"the calibration did not converge ({train.n_subjects} models x "
                        f"{train.n_items} items); try --model 1pl")
    bank = without_dispersion(res.bank)   # the folder's CAT: the Bernoulli likelihood
    step()
    from ..irt.dimensionality import Dimensionality, DimensionalityWarning

    dims = Dimensionality.from_dict(res.settings["dimensionality"])   # the calibration's check
    dropped_gold: list[str] = []
    recs, meta, unaskable = None, None, set()
    if logs is not None:  # every item's logged content once (the predictor asks them all)
        meta, all_recs, undetermined = _content(logs, [str(i) for i in rm.item_ids])
        if len(undetermined) == rm.n_items:
            raise ResponseDataError(
                f"the sample logs contradict themselves: on every one of the {rm.n_items} "
                f"items the logged {logs.metric!r} scores disagree with the answers the logged "
                "outputs pick, so no item's gold answer can be determined; check --metric and "
                "--filter, or give a response matrix")
        meta, unaskable = meta.set_index("item_id"), set(undetermined)
        dropped_gold = [str(i) for i in bank.item_ids if str(i) in unaskable]
        if dropped_gold:
            bank = bank.subset([i for i in bank.item_ids if str(i) not in unaskable])
        by_id = {r["item_id"]: r for r in all_recs}
        recs = [by_id[str(i)] for i in bank.item_ids]
        bank = attach_content(bank, meta, missing="error")
    y = rm.aligned_values(bank.item_ids, extra="ignore")
    chance, chance_from = ((float(chance), "given") if chance is not None
                           else default_chance(bench, meta))
    link = fit_link(bank, y, s, benchmark=bench, seed=seed, chance=chance, max_items=budget,
                    extra_se_stops=())
    link.info["model"], link.info["chance_from"] = bank.model, chance_from
    step()
    if folds:
        cf = cross_fit_factor(y, s, model=bank.model, benchmark=bench, seed=seed, folds=folds,
                              budget=budget, chance=chance, on_fold=step)
        widen(link, cf["factor"])
        link.length_factor = (None if cf["length_factor"] is None else
                              {k: np.asarray(v, float) for k, v in cf["length_factor"].items()})
        link.info["cross_fit"] = cf
    from ..predict import BenchmarkPredictor
    from ..predict.predictor import RIDGE_FIT_MIN_MODELS

    # the benchmark predictor: every item of the results (dropped ones too), for models unlike
    # the source models (docs/your_benchmark.md); a benchmark no longer than the
    # budget is simply asked in full
    predictor, pitems = None, None
    if rm.n_items > budget:
        # the item filter (point-biserial, from 100 models) serves the adaptive test; the
        # predictor estimates the mean over every item, so it gets every non-constant item
        # calibrated (a filtered-out item would otherwise be predicted flat); from sample logs
        # it keeps the items a live run can ask (their gold determined) and their requests
        prm = rm
        if unaskable:
            prm = rm.subset(items=[i for i in rm.item_ids if str(i) not in unaskable])
        predictor = BenchmarkPredictor(budget=budget, chance=chance).fit(
            predictor_bank(prm, bank, model=model, seed=seed), prm,
            scores=s if (scores is not None or unaskable) else None, rng=int(seed))
        if meta is not None:
            pitems = attach_content(predictor.item_bank(model=bank.model), meta,
                                    missing="error")
    step()
    agreement = [r["agreement"] for r in recs or [] if np.isfinite(r["agreement"])]
    manifest = {
        "benchmark": bench, "atlas_version": __version__,
        "built": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "source": {"kind": "sample_logs" if logs is not None else "matrix", "files": files,
                   "task": None if logs is None else logs.task,
                   "tasks": None if logs is None else logs.tasks,
                   "metrics_logged": None if logs is None else logs.metrics_logged,
                   "n_samples": None if logs is None else logs.n_samples,
                   "metric": None if logs is None else logs.metric,
                   "filter": None if logs is None else logs.filter,
                   "harness": None if logs is None else (logs.harness or "unknown"),
                   "reruns": None if logs is None else logs.reruns,
                   "named_by": named_by,
                   "scores": "continuous" if bool(np.any((rm.values > 0) & (rm.values < 1)))
                   else "binary"},
        "score": score_note,
        "models": models, "n_models": n,
        "items": {"n_results": int(rm.n_items), "n_bank": int(len(bank)),
                  "dropped_filter": [str(i) for i in report.dropped_items["item_id"]],
                  "dropped_calibration": [str(i) for i in res.dropped_items],
                  "dropped_gold_undetermined": dropped_gold,
                  "dropped_missing": [] if logs is None else logs.dropped_missing},
        "settings": {"model": model, "seed": int(seed),
                     # on the metric's scale, as score_range and every figure a user reads
                     # (link.json and predictor.json keep the modelled 0-1 value)
                     "chance": chance if score_range is None else
                     float(score_range[0] + (score_range[1] - score_range[0]) * chance),
                     "chance_from": chance_from,
                     "link_se_stop": LINK_SE_STOP, "min_models": int(min_models),
                     "budget": int(budget), "folds": int(folds),
                     "score_range": None if score_range is None else list(score_range)},
        "cross_fit": link.info.get("cross_fit"),
        "calibration": {"model": bank.model, "warnings": sorted({in_source_models(
            str(w.message)) for w in caught if not issubclass(w.category, DimensionalityWarning)})},
        "dimensionality": dims.to_dict(),
        "requests": None if recs is None else {
            "n_items": len(recs),
            "rules": sorted({r["rule"] for r in recs}),
            "rule_agreement_min": float(min(agreement)) if agreement else None,
            "rule_agreement_mean": float(np.mean(agreement)) if agreement else None,
            "rule_disagreeing_items": int(sum(a < 1.0 - 1e-9 for a in agreement)),
            "sampled_items": int(sum(bool(r.get("sampled")) for r in recs))},
        "link": {k: v for k, v in link.info.items() if isinstance(v, (int, float, str))},
    }
    manifest["predictor"] = None if predictor is None else {
        "file": "predictor.json", "budget": int(budget),
        "n_items": int(len(predictor.item_ids_)),
        "items_file": None if pitems is None else PREDICTOR_ITEMS_FILE,
        "ridge": predictor.gamma_ is not None,
        "ridge_weights_fitted": predictor.n_source_ >= RIDGE_FIT_MIN_MODELS,
        "design_weight": predictor.design_weight_,
        "score_map": predictor.score_map_info()}
    src = SourceAnswers(tuple(models), tuple(map(str, bank.item_ids)), y, s)  # forms' factors
    if output is None:
        step()
        return BankFolder(Path("."), bank, link, manifest, recs, {}, src)
    write_bank_dir(output, bank, link, manifest, recs, src)
    target, items_file = Path(output) / "predictor.json", Path(output) / PREDICTOR_ITEMS_FILE
    if predictor is not None:
        target.write_text(json.dumps(predictor.to_dict()) + "\n", encoding="utf-8")
    elif target.exists():  # a rebuilt folder keeps no stale predictor
        target.unlink()
    if pitems is not None:
        pitems.to_frame("ours").to_parquet(items_file, index=False, compression="zstd")
    elif items_file.exists():
        items_file.unlink()
    step()
    return load_bank_dir(output)
