"""Ordinal calibration's entry point: ratings in, a :class:`PolyBank` and a
:class:`CalibrationResult` out (``calibrate(rm, model="graded" | "gpcm" | "pcm")``).

Ratings keep their own scale (a judge's 1-10, a rubric's 0-3): they are read as numbers, never
checked against [0, 1], and each item's observed integer levels become its categories
(:func:`atlascat.irt.polyfit.encode`). Binary 0/1 items are items with two categories (the
2PL), so a mixed matrix calibrates in one graded or gpcm fit. The EM and its M-step are in
:mod:`atlascat.irt.polyfit`.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ConfigError, ResponseDataError, warn_user
from . import polytomous as poly
from .defaults import (MAX_ITER, MIN_MINORITY, PREDICTION_MIN_SOURCES, QUADPTS,
                       SCORE_QUADPTS, SCORE_QUADRATURE, SUBJECTS_PER_PARAMETER, THETA_RANGE,
                       TOL, IdentificationWarning)
from .polybank import PolyBank
from .polyfit import eap_codes, encode, fit_ordinal
from .priors import parse_prior
from .result import CalibrationResult

__all__ = ["read_ratings", "ratings_of", "calibrate_ordinal", "thin_categories"]


MAX_ABS_RATING = 1e9   # no rating or score scale reaches it (BLEU, points and counts stay far below)


def read_ratings(path, *, freq_column: str | None = None):
    """(values, subject_ids, item_ids, weights) from a wide CSV / Parquet of ratings: subject
    ids in the first column when it holds text (or is named model / subject / subject_id),
    every other column an item, blank / NA for missing; or from long format (subject, item,
    score columns, as :meth:`atlascat.responses.ResponseMatrix.read` takes it)."""
    from ..responses import long_to_wide, looks_long
    from ..validation import read_frame

    df = read_frame(Path(path), what="responses file", min_columns=2)
    if freq_column is None and looks_long(df):
        df = long_to_wide(df)
    return ratings_of(df, freq_column=freq_column)


def ratings_of(df: pd.DataFrame, *, freq_column: str | None = None):
    """:func:`read_ratings` on a DataFrame already in memory (labels kept)."""
    df = df.copy()
    df.columns = [str(c) for c in df.columns]
    first = df.columns[0]
    if isinstance(df.index, pd.RangeIndex) and (
            not pd.api.types.is_numeric_dtype(df[first])
            or first in ("", "model", "subject", "subject_id") or first.startswith("Unnamed")):
        df = df.set_index(first)
    weights = None
    if freq_column is not None:
        if freq_column not in df.columns:
            raise ResponseDataError(f"frequency column {freq_column!r} not found; columns are "
                                    f"{list(df.columns)[:10]}")
        weights = pd.to_numeric(df.pop(freq_column), errors="coerce").to_numpy(float)
        if np.any(~np.isfinite(weights)) or np.any(weights < 0):
            raise ResponseDataError(f"frequency column {freq_column!r} needs finite "
                                    "non-negative numbers")
    if df.shape[0] < 1 or df.shape[1] < 1:   # one row is scored; calibration asks for two
        raise ResponseDataError(f"the ratings matrix has {df.shape[0]} rows and {df.shape[1]} "
                                "item columns; it needs at least 1 subject and 1 item")
    values = _numeric_ratings(df).to_numpy(float)
    wild = np.argwhere(np.isinf(values) | (np.abs(np.nan_to_num(values)) > MAX_ABS_RATING))
    if wild.size:   # an overflow, not a rating: every statistic of it would be inf or nan
        r, c = wild[0]
        raise ResponseDataError(f"rating {values[r, c]:g} at row {r} (subject {df.index[r]!r}), "
                                f"column {df.columns[c]!r} is not a finite number of at most "
                                f"{MAX_ABS_RATING:g} in size; ratings must be numbers on their "
                                "scale or blank for missing")
    return (values, np.asarray([str(s) for s in df.index], dtype=object),
            np.asarray(list(df.columns), dtype=object), weights)


def _numeric_ratings(df: pd.DataFrame) -> pd.DataFrame:
    """The frame as numbers; a text cell (other than a blank / NA marker) is refused, naming it,
    rather than read as missing."""
    numeric = df.apply(pd.to_numeric, errors="coerce")
    raw = df.to_numpy(dtype=object)
    text = numeric.isna().to_numpy() & df.notna().to_numpy()
    for r, c in np.argwhere(text):
        cell = raw[r, c]
        if isinstance(cell, str) and cell.strip().upper() in ("", "NA", "NAN", "NULL"):
            continue
        raise ResponseDataError(f"text cell {cell!r} at row {r} (subject {df.index[r]!r}), "
                                f"column {df.columns[c]!r}; ratings must be numbers or blank "
                                "for missing")
    return numeric


def thin_categories(data, weights=None) -> list[str]:
    """One-line notes on what the ratings identify poorly (may be empty): fewer than
    SUBJECTS_PER_PARAMETER subjects per parameter of the items with the most categories (an item
    of K levels has K parameters: a slope and K - 1 intercepts; else fewer than
    PREDICTION_MIN_SOURCES subjects, whose predicted mean ratings' intervals undercover), and
    categories rated by fewer
    than MIN_MINORITY subjects (weighted), whose neighbouring intercepts rest on those few
    ratings; the rules the binary models' small samples are held to
    (:func:`atlascat.irt.defaults.identification_problems`)."""
    codes = np.asarray(data.codes, dtype=float)
    w = np.ones(codes.shape[0]) if weights is None else np.asarray(weights, dtype=float)
    n, kmax = float(w.sum()), int(np.max(data.n_cat))
    out = []
    if n < SUBJECTS_PER_PARAMETER * kmax:
        out.append(f"{n:g} subjects for up to {kmax} parameters per item (a slope and "
                   f"{kmax - 1} intercepts; fewer than {SUBJECTS_PER_PARAMETER} subjects per "
                   "parameter): the intercepts are weakly identified; treat the bank as "
                   "provisional, and predict full scores from so few models with the ratings "
                   "read as a score on their scale (a bank folder's --score-range: its "
                   "interval is design-based)")
    elif n < PREDICTION_MIN_SOURCES:
        out.append(f"{n:g} subjects (fewer than {PREDICTION_MIN_SOURCES}): a mean rating the "
                   "bank predicts has a 95% interval that holds theta's uncertainty, not the "
                   "item parameters', and covers fewer new models than 95% "
                   "(benchmarks/results/polytomous.md); predict full scores from so few models "
                   "with the ratings read as a score on their scale (a bank folder's "
                   "--score-range: its interval is design-based)")
    counts = np.stack([((codes == k) * w[:, None]).sum(axis=0) for k in range(kmax)], axis=1)
    few = (counts < MIN_MINORITY) & (np.arange(kmax) < np.asarray(data.n_cat)[:, None])
    rare, items = int(few.sum()), int(few.any(axis=1).sum())
    if rare:
        out.append(f"{rare} of {int(np.sum(data.n_cat))} categories ({items} item(s)) were "
                   f"given by fewer than {MIN_MINORITY} subjects: the intercepts beside them "
                   "are barely identified (large standard errors); more subjects, fewer "
                   "levels (merge rare ones), or the ratings read as a score on their scale "
                   "(a bank folder's --score-range: one slope and location per item) identify "
                   "the items better")
    return out


def unused_levels(data, item_ids, value_range) -> str | None:
    """One line when some items were never given every whole-number level of the declared
    scale ``value_range`` (lo, hi): such an item has no category for the levels it lacks, so
    a new model's rating there counts as the item's nearest level below (its lowest when below
    all; :class:`PolyBank`), and a model better or worse than every source model is told
    apart less; None when every item had every level (or no scale is declared)."""
    if value_range is None:
        return None
    lo, hi = (float(v) for v in value_range)
    scale = np.arange(np.ceil(lo), np.floor(hi) + 1)
    had = [set(map(float, lev)) for lev in data.levels]
    lacking = [(str(item), [x for x in scale if x not in seen])
               for item, seen in zip(item_ids, had)]
    lacking = [(item, gone) for item, gone in lacking if gone]
    if not lacking:
        return None
    item, gone = lacking[0]
    never = ";".join(f"{x:g}" for x in gone)
    return (f"{len(lacking)} of {len(data.levels)} item(s) were never rated at some levels of "
            f"the declared {lo:g}-{hi:g} scale (e.g. {item!r} never {never}): a new model's "
            "rating on a level its item never had counts as the item's nearest level below "
            "(its lowest when below all); more source models give the items every level")


def _one_level_items(values, item_ids, on_empty: str):
    """(items kept, a boolean mask; dropped ids): with ``on_empty="drop"`` the items rated at
    fewer than two levels (none at all, or every rating the same) are left out, warned;
    "error" keeps them (:func:`atlascat.irt.polyfit.encode` refuses them)."""
    if on_empty not in ("error", "drop"):
        raise ConfigError(f"on_empty must be 'error' or 'drop', got {on_empty!r}")
    n_lev = np.array([np.unique(c[~np.isnan(c)]).size for c in values.T])
    thin = (n_lev < 2) & (on_empty == "drop")
    dropped = [str(i) for i in np.asarray(item_ids)[thin]]
    if thin.all():
        raise ResponseDataError(f"every item is rated at fewer than two levels (e.g. "
                                f"{dropped[:3]}); an ordinal item needs at least two")
    if dropped:
        warn_user(f"{len(dropped)} item(s) rated at fewer than two levels (no rating, or the "
                  f"same from every subject) were left out: {', '.join(dropped[:10])}"
                  + (f", ... ({len(dropped) - 10} more)" if len(dropped) > 10 else ""))
    return ~thin, dropped


def _as_ratings(responses, weights):
    from ..responses import ResponseMatrix

    if isinstance(responses, ResponseMatrix):
        return (responses.values, responses.subject_ids, responses.item_ids,
                responses.weights if weights is None else weights)
    if isinstance(responses, (str, Path)):
        v, s, i, w = read_ratings(responses)
        return v, s, i, (w if weights is None else weights)
    if isinstance(responses, pd.DataFrame):
        v = _numeric_ratings(responses).to_numpy(float)
        if isinstance(responses.columns, pd.RangeIndex):
            return v, np.arange(len(v)).astype(str), np.arange(v.shape[1]).astype(str), weights
        return (v, np.asarray([str(s) for s in responses.index], dtype=object),
                np.asarray([str(c) for c in responses.columns], dtype=object), weights)
    try:
        v = np.asarray(responses, dtype=float)
    except (TypeError, ValueError):   # text in an array: named as in a frame
        raw = np.asarray(responses, dtype=object)
        if raw.ndim == 2:
            v = _numeric_ratings(pd.DataFrame(raw)).to_numpy(float)
        else:
            raise ResponseDataError(f"ratings must be numbers (NaN for missing), got "
                                    f"{type(responses).__name__} of shape {raw.shape}") from None
    if v.ndim != 2:
        raise ResponseDataError(f"responses must be 2-D (subjects x items), got shape {v.shape}")
    return (v, np.arange(v.shape[0]).astype(str).astype(object),
            np.arange(v.shape[1]).astype(str).astype(object), weights)


def _grouping(groups, reference_group, subject_ids):
    """``groups`` as a dict subject id -> label (:func:`atlascat.irt.groups.group_mapping`),
    None without; refused in one line for a reference group without groups."""
    if groups is None:
        if reference_group is not None:
            raise ConfigError("reference_group needs groups (each subject's group)")
        return None
    from .grouplabels import group_mapping

    return group_mapping(groups, subject_ids)


def _group_fields(result, grouping, fit, weights, codes) -> None:
    """A multiple-group fit's ``groups`` (:func:`atlascat.irt.groups.group_summary`), its
    parameter count (each other group's mean and variance) and the subjects' EAPs as ``atlas
    score`` gives them, each under its group's prior on the bank's grid of 121 nodes. A
    partial credit fit's groups are on the bank's scale, its reference group's N(0, 1): the
    means divided by the reference's SD, the variances by its variance (as a Rasch fit's)."""
    from .grouplabels import group_summary

    k = result.information_criteria()["n_parameters"]
    result.groups = group_summary(grouping, {**fit, "var": fit["latent_variance"]}, weights)
    result.n_parameters = int(k) + 2 * (len(grouping.labels) - 1)
    from .grouplabels import with_group_priors

    bank = result.bank = with_group_priors(result.bank, result.groups)   # recorded in its file
    result.theta, result.theta_se = np.array(result.theta), np.array(result.theta_se)
    for g, row in enumerate(result.groups["groups"]):
        r = grouping.index == g
        result.theta[r], result.theta_se[r] = eap_codes(
            codes[r], bank.models, bank.params, SCORE_QUADPTS, prior_mean=row["mean"],
            prior_sd=row["sd"], quadrature=SCORE_QUADRATURE)


def _check_em_settings(max_iter, tol) -> None:
    """A ConfigError of one line for a cap below one iteration or a tolerance that is not a
    positive number (the binary fit's checks; an EM of 0 iterations or to tol 0 is no fit)."""
    from ..validation import check_positive

    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ConfigError(f"max_iter must be a whole number >= 1, got {max_iter!r}")
    check_positive(tol, "tol")


def calibrate_ordinal(responses, model: str = "graded", *, weights=None, prior_a=None,
                      value_range=None, quadpts: int = QUADPTS, theta_range=THETA_RANGE,
                      max_iter: int = MAX_ITER, tol: float = TOL, accelerate: bool = True,
                      max_newton: int = 8, callback=None, start: PolyBank | None = None,
                      se: bool = False, se_callback=None, on_empty: str = "error",
                      check_dimensions: bool = True, groups=None,
                      reference_group=None) -> CalibrationResult:
    """Calibrate ordinal items by MML-EM (:mod:`atlascat.irt.polyfit`).

    ``responses``: a ResponseMatrix, a labelled DataFrame, an array (NaN = missing) or a file
    of ratings on any integer scale; ``model``: "graded" or "gpcm" (or one per item), or
    "pcm", the partial credit model (Masters, 1982; mirt's ``"Rasch"`` of ordinal items: GPCM
    items of slope 1 with the trait's variance sigma^2 estimated, written as GPCM items of
    slope sigma on N(0, 1), thetas / sigma; ``latent_variance`` sigma^2, one parameter more
    than the intercepts);
    ``prior_a``: None (mirt) or a slope prior (``"lognorm(0,0.5)"``, ``"norm(1,1)"``);
    ``value_range``: the declared (lo, hi) of the ratings, refused when exceeded and kept as
    every item's rating scale (:class:`PolyBank`: a rating on it that an item never had is
    scored as the category it falls in); ``start``: a
    bank whose items (by id, same categories) give starting values; ``callback(info)`` after
    every EM iteration (``iteration``, ``loglik``, ``max_change``), ``se_callback(done,
    total)`` as the standard errors' information columns are computed; ``on_empty``: "error"
    (default) refuses an item rated at one level or not at all, "drop" leaves it out, warned
    and listed in ``dropped_items``; ``groups`` (with ``reference_group``): each subject's
    group, a multiple-group fit of graded / gpcm / pcm items (:func:`~atlascat.irt.polyfit.
    fit_ordinal`, as the binary models', :mod:`atlascat.irt.groups`: ``groups`` of the result,
    the subjects' EAPs under their groups' priors). Returns a :class:`CalibrationResult`
    whose ``bank`` is a :class:`PolyBank`.
    """
    from .._blas import small_products

    t0 = time.perf_counter()
    values, sids, iids, w = _as_ratings(responses, weights)
    pcm = isinstance(model, str) and model.strip().lower() == "pcm"
    models = np.array(np.broadcast_to(np.asarray("gpcm" if pcm else model, dtype=object),
                                      (values.shape[1],)), dtype=object)
    models = np.array([str(m).lower() for m in models], dtype=object)
    bad = [m for m in models if m not in poly.ORDINAL_MODELS]
    if bad:
        raise ConfigError(f"unknown ordinal model {bad[0]!r}; choose graded, gpcm or pcm")
    if pcm and prior_a is not None and prior_a not in ("none", "auto"):
        raise ConfigError("the partial credit model (pcm) has no slopes to put a prior on; "
                          "drop prior_a (--prior-a)")
    _check_em_settings(max_iter, tol)
    grouping = _grouping(groups, reference_group, sids)
    keep_r = ~np.all(np.isnan(values), axis=1)
    values, sids = values[keep_r], sids[keep_r]
    w = None if w is None else np.asarray(w, float)[keep_r]
    if values.shape[0] < 2:
        raise ResponseDataError(f"calibration needs at least 2 subjects with a rating, got "
                                f"{values.shape[0]}")
    pa = parse_prior(None if prior_a in (None, "none", "auto") else prior_a, "a")
    if grouping is not None:
        from .grouplabels import group_labels

        grouping = group_labels(grouping, sids, reference_group)
    keep, dropped = _one_level_items(values, iids, on_empty)
    values, iids, models = values[:, keep], np.asarray(iids)[keep], models[keep]
    data = encode(values, iids, value_range, sids)
    if value_range is not None:   # one declared scale: right/wrong items do not belong on it
        from ..validation import zero_one_items

        mixed = zero_one_items(values, iids, value_range)
        if mixed:
            warn_user(mixed)
    problems = thin_categories(data, w)
    for note in problems:
        warn_user(note, IdentificationWarning)
    unused = unused_levels(data, iids, value_range)
    if unused:   # a category never observed: a rating there is scored as a neighbour's
        warn_user(unused)
        problems.append(unused)
    start_p = None
    if start is not None:
        from .polyfit import start_params

        start_p = start_params(data, w, models)
        for j, item in enumerate(iids):
            if item in start and start.n_cat[start.index_of(item)] == data.n_cat[j]:
                k = int(data.n_cat[j])
                start_p[j, :k] = start.params[start.index_of(item), :k]
    if pcm:   # every slope 1 and the trait's variance estimated: mirt's "Rasch"
        from .polyfit import start_params

        start_p = start_params(data, w, models) if start_p is None else start_p
        start_p[:, 0] = 1.0
    with small_products():
        fit = fit_ordinal(data, w, models, prior_a=pa, quadpts=quadpts, theta_range=theta_range,
                          max_iter=max_iter, tol=tol, accelerate=accelerate,
                          max_newton=max_newton, callback=callback, start=start_p,
                          latent_variance=pcm,
                          groups=None if grouping is None else grouping.index)
    var = fit["latent_variance"]
    sd = float(np.sqrt(var))
    fitted = fit["params"]
    if pcm:   # the bank on the N(0, 1) scale: a = sigma, thetas / sigma (as a Rasch bank)
        fit["params"] = fitted.copy()
        fit["params"][:, 0] = sd
        fit["theta"], fit["theta_se"] = fit["theta"] / sd, fit["theta_se"] / sd
    meta = None
    if value_range is not None:   # the responses per item bound the ratings it never had
        import pandas as pd

        counts = (~np.isnan(values)).astype(float)
        meta = pd.DataFrame({"n_responses": counts.sum(0) if w is None else w @ counts})
    bank = PolyBank(iids, fit["params"], "pcm" if pcm else models, data.levels,
                    scales=value_range, metadata=meta)
    name = "pcm" if pcm else bank.model
    settings = {"model": name, "quadpts": int(quadpts),
                "theta_range": [float(v) for v in theta_range],
                "prior_a": None if pa is None else str(pa), "max_iter": int(max_iter),
                "tol": float(tol), "accelerate": bool(accelerate),
                "n_categories": [int(k) for k in data.n_cat],
                "value_range": None if value_range is None else [float(v) for v in value_range],
                "warnings": problems}
    result = CalibrationResult(
        bank=bank, model=name, loglik=fit["loglik"], loglik_trace=fit["trace"],
        n_iter=fit["n_iter"], converged=fit["converged"], seconds=time.perf_counter() - t0,
        theta=fit["theta"], theta_se=fit["theta_se"], subject_ids=sids,
        log_posterior=fit["log_posterior"], settings=settings,
        n_observations=float(len(sids) if w is None else np.sum(w)), latent_variance=var,
        dropped_items=dropped,
        n_parameters=int(np.sum(data.n_cat - 1)) + 1 if pcm else None)
    # the subjects' scores as atlas score gives them on the written bank (EAP, N(0, 1), 121
    # nodes on [-6, 6], its default quadrature; each under its group's prior with groups); the
    # fit's own grid (quadpts) is the EM's only
    if grouping is None:
        result.theta, result.theta_se = eap_codes(data.codes, bank.models, bank.params,
                                                  SCORE_QUADPTS, quadrature=SCORE_QUADRATURE)
    else:
        _group_fields(result, grouping, fit, w, data.codes)
    from .dimensionality import record
    from .gsquare import g2
    from .quadrature import normal_quadrature

    quad = normal_quadrature(int(quadpts), theta_range)   # mirt's G2 on the pattern table
    result.g2 = None if grouping is not None else g2(   # one prior: not a grouped fit's
        data.codes, w, bank.log_prob(quad.nodes), quad.log_weights, data.n_cat,
                   result.information_criteria()["n_parameters"])
    if check_dimensions:   # random answers or two traits (250 x 250 products: one BLAS thread)
        with small_products():
            record(result, values, w, iids, problems)
    result.seconds = time.perf_counter() - t0
    if se:   # standard errors from the observed information (atlascat.irt.se)
        from .quadrature import normal_quadrature
        from .se import ordinal_standard_errors

        quad = normal_quadrature(int(quadpts), theta_range)
        if grouping is not None:
            from .grouplabels import add_group_errors
            from .groupse import ordinal_group_standard_errors

            result.se = ordinal_group_standard_errors(   # pcm: at the slope-1 parameters
                data.codes, w, {**fit, "params": fitted}, models, grouping.index,
                grouping.labels, item_ids=iids, model=name, prior_a=pa, progress=se_callback,
                latent_variance=pcm)
            add_group_errors(result.groups, result.se)
        else:
            result.se = ordinal_standard_errors(
                data.codes, w, fitted, models, item_ids=iids, nodes=quad.nodes,
                log_weights=quad.log_weights, model=name, prior_a=pa, progress=se_callback,
                latent_variance=var if pcm else None)
        result.seconds = time.perf_counter() - t0
    return result

