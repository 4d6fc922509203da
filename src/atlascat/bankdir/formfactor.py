"""How much a fixed form's SE and score interval must widen on new models: cross-fitted factors.

A D-optimal form designed on a bank folder takes the items whose *estimated* information is
highest; on models the bank was not calibrated on, its theta was 1.3-3.0 times as far from the
whole bank's as its SE says (benchmarks/results/fixed_forms.md, "Is the form's predicted
precision honest?"). No figure computed from the bank's parameters shows it; a factor measured
on held-out models does:

    the folder's source models (their answers, kept in ``source_answers.npz``) in
    :data:`~atlascat.bankdir.defaults.FORM_FOLDS` folds; for each fold
      -> a bank and a score link fitted without it (:func:`atlascat.bankdir.builder._fold_link`,
         the build's own cross-fitting step, its interval widened as the folder's is)
      -> the form designed on that bank as asked (k, criterion, abilities: that link's
         source models, or the ``thetas`` given)
      -> the fold's models scored (EAP) on the form and on the whole fold bank
    se factor = sqrt(mean (theta_form - theta_bank)^2 / mean (SE_form^2 - SE_bank^2)), at least 1;
    interval factor = the RMS over the held-out models of 1.96 x (predicted - true score) / (the
    half-width of the interval on the error's side): 1 when the interval is honest, below 1 where
    it over-covers (it then narrows).

:func:`widen_form_scores` applies them to a model's scores on the form: the part of its
variance beyond the whole bank's (SE_bank: the posterior SD the whole bank's information gives
at its theta) times the se factor squared, each side of the score interval times the interval
factor (what they do on held-out models: benchmarks/results/fixed_forms.md). The factors
travel in the form's file
(:func:`with_factors`, :func:`read_form`: columns ``se_factor`` and ``interval_factor``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ..errors import BankFolderError, ConfigError
from ..scorelink.settings import Z95
from .defaults import BUDGET, FORM_FOLDS, SOURCE_ANSWERS_FILE
from .folder import SourceAnswers

__all__ = ["FormFactors", "form_factors", "Form",
           "read_form", "with_factors", "widen_form_scores", "widened_se", "whole_bank_se",
           "FACTOR_COLUMNS"]

#: the form file's columns that carry its factors (the same value on every row)
FACTOR_COLUMNS = ("se_factor", "interval_factor")
#: fewest scored models a fold's score link is fitted on (one with no interior knot:
#: :func:`atlascat.scorelink.curve.fit_monotone_spline`)
MIN_TRAIN = 16


@dataclass(frozen=True)
class FormFactors:
    """A form design's cross-fitted factors (the module docstring): ``se`` (>= 1) on the part
    of the SE beyond the whole bank's, ``interval`` on each side of the score interval; over
    ``n`` held-out source models in ``folds`` folds, with the realized and the model's RMS of
    (form - bank) theta and the interval's coverage of them before and after."""

    se: float
    interval: float
    folds: int
    n: int
    realized: float
    model: float
    coverage_before: float
    coverage_after: float

    def to_dict(self) -> dict:
        return asdict(self)


def whole_bank_se(bank, theta, prior_sd: float | None = 1.0) -> np.ndarray:
    """The posterior SD (``prior_sd`` None: the SE) the whole ``bank``'s test information
    gives at each ``theta``: what a model's SE would be had it answered every item."""
    th = np.clip(np.nan_to_num(np.asarray(theta, float)), -10.0, 10.0)
    prec = np.asarray(bank.test_information(th), float)
    if prior_sd is not None:
        prec = prec + 1.0 / float(prior_sd) ** 2
    return 1.0 / np.sqrt(np.maximum(prec, 1e-12))


def _fold_scores(bank, link, y, s, form_cols):
    """(form theta - bank theta, model variance of it, standardized score error) of the
    held-out models ``y`` (their answers on ``bank``'s items) scored on the form's columns."""
    from ..irt.ability import estimate_ability
    from ..scorelink import predict_frame

    ids = np.asarray([f"h{i}" for i in range(y.shape[0])], dtype=object)
    on_form = np.full_like(y, np.nan)
    on_form[:, form_cols] = y[:, form_cols]
    part = estimate_ability(on_form, bank, "eap", subject_ids=ids)
    th_bank = estimate_ability(y, bank, "eap", subject_ids=ids)["theta"].to_numpy(float)
    th, se = part["theta"].to_numpy(float), part["se"].to_numpy(float)
    model = np.maximum(se ** 2 - whole_bank_se(bank, th) ** 2, 1e-12)
    r, c = np.nonzero(np.isfinite(on_form))
    administered = pd.DataFrame({"subject_id": ids[r],
                                 "item_id": np.asarray(bank.item_ids, dtype=object)[c],
                                 "score": on_form[r, c]})
    pred = predict_frame(link, part[["subject_id", "theta", "se"]], administered)
    score = pred["score"].to_numpy(float)
    err = score - s
    side = np.where(err > 0, score - pred["score_lo"].to_numpy(float),
                    pred["score_hi"].to_numpy(float) - score)
    z = Z95 * err / np.maximum(side, 1e-9)
    ok = np.isfinite(th) & np.isfinite(th_bank) & (part["n_items"].to_numpy() > 0)
    return th[ok] - th_bank[ok], model[ok], z[ok & np.isfinite(z)]


def form_factors(folder, k: int = 50, criterion: str = "D", thetas=None, *,
                 prior_precision=None, exchange: bool = True, folds: int | None = None,
                 seed: int | None = None, answers: SourceAnswers | None = None,
                 on_fold=None) -> FormFactors:
    """The cross-fitted factors of a ``k``-item ``criterion``-optimal form on the bank folder
    ``folder`` (a BankFolder or its path), designed as :func:`atlascat.design.optimal.optimal_form`
    designs it on the folder: for the abilities ``thetas`` (a sample, or (nodes, weights)), by
    default the source models' of each fold's link. ``answers``: the source answers (default
    the folder's; a folder built before they were kept is a BankFolderError of one line).
    ``folds``: default :data:`~atlascat.bankdir.defaults.FORM_FOLDS`, more where a fold's
    link would be fitted on fewer than :data:`MIN_TRAIN` scored models (20 source models: 5).
    ``seed``: the folds' draw (default the folder's build seed); ``on_fold()`` after each."""
    from ..design.optimal import optimal_form
    from .builder import _fold_link, widen
    from .predict import as_folder

    folder = as_folder(folder)
    src = answers if answers is not None else folder.source_answers()
    if src is None:
        raise BankFolderError(f"the bank folder {str(folder.path)!r} keeps no source answers "
                              f"({SOURCE_ANSWERS_FILE}; built before they were kept): rebuild "
                              "it, or give the answers, to cross-fit a form's precision")
    col = {str(i): j for j, i in enumerate(src.item_ids)}
    ids = [str(i) for i in folder.bank.item_ids]
    lacking = [i for i in ids if i not in col]
    if lacking:
        raise BankFolderError(f"the source answers lack {len(lacking)} of the bank's items "
                              f"(e.g. {lacking[0]!r}); rebuild the folder")
    y, s = np.asarray(src.values, float)[:, [col[i] for i in ids]], np.asarray(src.scores, float)
    n, scored = y.shape[0], int(np.isfinite(s).sum())
    enough = [f for f in range(2, n + 1) if scored - -(-n // f) >= MIN_TRAIN]
    if not enough:
        raise ConfigError(f"{scored} scored source models are too few to cross-fit a form "
                          f"(each fold's link needs {MIN_TRAIN} without the fold)")
    folds = max(FORM_FOLDS, enough[0]) if folds is None else int(folds)
    if folds not in enough:
        raise ConfigError(f"cross-fitting folds must be {enough[0]} to {enough[-1]} for "
                          f"{scored} scored source models, got {folds}")
    settings = folder.manifest.get("settings") or {}
    seed = int(settings.get("seed", 0) if seed is None else seed)
    budget = int(settings.get("budget") or BUDGET)
    built = float((folder.link.info.get("cross_fit") or {}).get("factor", 1.0))
    fold_of = np.random.default_rng([seed, 7]).permutation(n) % folds
    diffs, models, zs = [], [], []
    for f in range(folds):
        test = fold_of == f
        bank, link, cols = _fold_link(y, s, ~test & np.isfinite(s), model=folder.bank.model,
                                      benchmark=folder.benchmark, seed=seed, budget=budget,
                                      chance=folder.link.chance)
        widen(link, built)                       # as the folder's own link was widened
        link.length_factor = folder.link.length_factor
        sample = thetas if thetas is not None else link.source_abilities()
        form = optimal_form(bank, min(int(k), len(bank)), criterion, sample, exchange=exchange,
                            prior_precision=prior_precision)
        for out, part in zip((diffs, models, zs), _fold_scores(bank, link, y[test][:, cols],
                                                              s[test], form.indices)):
            out.append(part)
        if on_fold is not None:
            on_fold()
    d, m, z = (np.concatenate(v) for v in (diffs, models, zs))
    realized, model = float(np.sqrt(np.mean(d ** 2))), float(np.sqrt(np.mean(m)))
    interval = float(np.sqrt(np.mean(z ** 2))) if z.size else 1.0
    return FormFactors(se=max(1.0, realized / model), interval=interval, folds=folds,
                       n=int(d.size), realized=realized, model=model,
                       coverage_before=float(np.mean(np.abs(z) <= Z95)) if z.size else np.nan,
                       coverage_after=float(np.mean(np.abs(z) <= Z95 * interval))
                       if z.size else np.nan)


def with_factors(frame: pd.DataFrame, factors: FormFactors | None) -> pd.DataFrame:
    """A form's rows (``OptimalForm.to_frame``) with the factors' columns
    (:data:`FACTOR_COLUMNS`, the same value on every row); any old ones dropped (a form
    designed from a form), none added for ``factors`` None."""
    out = frame.drop(columns=[c for c in FACTOR_COLUMNS if c in frame.columns])
    if factors is not None:
        out["se_factor"], out["interval_factor"] = factors.se, factors.interval
    return out


@dataclass(frozen=True)
class Form:
    """A fixed form read back: its item ids and the (se, interval) factors it carries, or None."""

    item_ids: tuple
    factors: tuple | None

    def split_answers(self, item_ids, values) -> tuple[list, list]:
        """(the answered ids on the form, those off it that have an answer): ``values`` models
        x ``item_ids``; the form's factors are measured on its own items only."""
        mine = set(self.item_ids)
        answered = np.isfinite(np.asarray(values, float)).any(axis=0)
        on = [str(i) for i in item_ids if str(i) in mine]
        off = [str(i) for i, a in zip(item_ids, answered) if str(i) not in mine and a]
        return on, off


def read_form(path, bank=None, *, option: str = "--form") -> Form:
    """The form at ``path`` (a form file: ``item_id`` and, when cross-fitted, the constant
    columns :data:`FACTOR_COLUMNS`); with ``bank`` every item must be one of its. Anything
    else is a ConfigError of one line naming ``option``."""
    from ..validation import read_frame

    df = read_frame(path, what="form file", option=option, error=ConfigError)
    if "item_id" not in df.columns:
        raise ConfigError(f"{option} {str(path)!r} has no item_id column: give a form written "
                          "by the design (-o FORM.csv)")
    ids = tuple(str(i) for i in df["item_id"])
    if bank is not None:
        known = {str(i) for i in bank.item_ids}
        off = [i for i in ids if i not in known]
        if off:
            raise ConfigError(f"{option} {str(path)!r}: {len(off)} of its {len(ids)} items are "
                              f"not in the bank (e.g. {off[0]!r}); give the bank folder the "
                              "form was designed on")
    present = [c for c in FACTOR_COLUMNS if c in df.columns]
    if not present:
        return Form(ids, None)
    if len(present) < 2:
        raise ConfigError(f"{option} {str(path)!r} has {present[0]} but not "
                          f"{(set(FACTOR_COLUMNS) - set(present)).pop()}")
    vals = df[list(FACTOR_COLUMNS)].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    se, interval = vals[0] if len(vals) else (np.nan, np.nan)
    if not (np.isfinite(vals).all() and np.ptp(vals, axis=0).max() == 0 and se >= 1
            and interval > 0):
        raise ConfigError(f"{option} {str(path)!r}: se_factor and interval_factor must be one "
                          "number each on every row (se_factor >= 1, interval_factor > 0)")
    return Form(ids, (float(se), float(interval)))


def widened_se(bank, theta, se, factors, *, prior_sd: float | None = 1.0) -> np.ndarray:
    """The SE of models scored on a form with its factors (se, interval): SE^2 = SE_bank^2 +
    se^2 (SE^2 - SE_bank^2), SE_bank the whole bank's (:func:`whole_bank_se`); a non-finite SE
    stays as it is. What :func:`widen_form_scores` writes in ``se``, and what a prediction's
    warning reads theta's interval at (:func:`atlascat.bankdir.predict.predict_scores`'s
    ``warn_se``)."""
    se_f = float(factors[0])
    se = np.asarray(se, float)
    base = whole_bank_se(bank, np.asarray(theta, float), prior_sd)
    with np.errstate(invalid="ignore"):
        wide = np.sqrt(base ** 2 + se_f ** 2 * np.maximum(se ** 2 - base ** 2, 0.0))
    return np.where(np.isfinite(se), wide, se)


def widen_form_scores(frame: pd.DataFrame, bank, factors, *, prior_sd: float | None = 1.0,
                      scale=None) -> pd.DataFrame:
    """``frame`` (theta, se [, score, score_lo, score_hi]) of models scored on a form with its
    factors (se, interval) applied: SE^2 = SE_bank^2 + se^2 (SE^2 - SE_bank^2), SE_bank the
    whole bank's (:func:`whole_bank_se`); each side of the interval times ``interval``, kept
    within ``scale`` (low, high; default 0-1). The SE before is kept as ``se_model``."""
    se_f, int_f = (float(v) for v in factors)
    out = frame.copy()
    se = out["se"].to_numpy(float)
    out.insert(list(out.columns).index("se") + 1, "se_model", se)
    out["se"] = widened_se(bank, out["theta"], se, factors, prior_sd=prior_sd)
    if "score" in out.columns:
        lo, hi = (0.0, 1.0) if scale is None else (float(scale[0]), float(scale[1]))
        score = out["score"].to_numpy(float)
        out["score_lo"] = np.clip(score - int_f * (score - out["score_lo"].to_numpy(float)), lo, hi)
        out["score_hi"] = np.clip(score + int_f * (out["score_hi"].to_numpy(float) - score), lo, hi)
    return out
