"""Information criteria of a calibration and the likelihood-ratio comparison of nested models,
with mirt's definitions and columns (``anova(m1, m2)``).

With log-likelihood l, k estimated parameters and N subjects (the sum of the pattern
frequencies)::

    AIC   = -2 l + 2 k                      (Akaike, 1974)
    BIC   = -2 l + k log N                  (Schwarz, 1978)
    SABIC = -2 l + k log((N + 2) / 24)      (Sclove, 1987)
    HQ    = -2 l + 2 k log(log N)           (Hannan and Quinn, 1979)

k counts every estimated parameter, with or without a prior (a Rasch fit's latent variance
too), and l is the marginal log-likelihood without the priors, as mirt reports them. For two
nested models fitted to the same responses the likelihood-ratio statistic
X2 = 2 (l_larger - l_smaller) is referred to chi-square with df = k_larger - k_smaller
(Wilks, 1938); it is valid for nested models without priors. With priors the fits are
posterior modes: as mirt, ``anova`` then reports each model's ``logPost`` (log-likelihood +
log prior) and df, no X2 or p.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..errors import ConfigError

__all__ = ["information_criteria", "n_parameters", "anova", "nested", "nested_fits", "NESTED"]

#: models each model contains (rasch and 1pl are the same model; the 1PL-4PL fit 0/1 answers
#: only, on which the partial credit model, pcm, is the Rasch model)
NESTED = {"rasch": {"rasch", "1pl"}, "1pl": {"rasch", "1pl"},
          "2pl": {"rasch", "1pl", "pcm", "2pl"}, "3pl": {"rasch", "1pl", "pcm", "2pl", "3pl"},
          "4pl": {"rasch", "1pl", "pcm", "2pl", "3pl", "4pl"},
          "graded": {"rasch", "1pl", "2pl", "graded"}, "gpcm": {"pcm", "gpcm"},
          "pcm": {"pcm"}}
_FREE = {"rasch": 1, "1pl": 1, "2pl": 2, "3pl": 3, "4pl": 4}


def n_parameters(model: str, n_items: int) -> int:
    """Estimated parameters of a binary model on ``n_items`` items (Rasch / 1PL: one
    intercept per item and the latent variance)."""
    model = str(model).lower()
    if model not in _FREE:
        raise ConfigError(f"no parameter count for model {model!r}")
    return _FREE[model] * int(n_items) + (1 if model in ("rasch", "1pl") else 0)


def information_criteria(loglik: float, k: int, n: float) -> dict:
    """``{"loglik", "n_parameters", "n_observations", "aic", "bic", "sabic", "hq"}``."""
    n = float(n)
    if not n > 1:
        raise ConfigError(f"information criteria need more than one subject, got {n}")
    dev = -2.0 * float(loglik)
    return {"loglik": float(loglik), "n_parameters": int(k), "n_observations": n,
            "aic": dev + 2.0 * k, "bic": dev + k * math.log(n),
            "sabic": dev + k * math.log((n + 2.0) / 24.0), "hq": dev + 2.0 * k * math.log(math.log(n))}


def nested(smaller: str, larger: str) -> bool:
    """Whether model ``smaller`` is a special case of model ``larger`` (:data:`NESTED`)."""
    return str(smaller).lower() in NESTED.get(str(larger).lower(), set())


def nested_fits(smaller, larger) -> bool:
    """Whether fit ``smaller`` is a special case of fit ``larger``: its model nested in the
    other's (:func:`nested`) in no more dimensions (``n_dims``, 1 for atlascat.calibrate's
    fits; a K-dimensional exploratory 2PL, :mod:`.multidimcal`, holds the 2PL and its special
    cases in fewer dimensions, as mirt's ``anova(mod1, mod2)`` assumes). A multiple-group fit
    (``groups``, :mod:`.groups`) holds the one-group fit of its model or a smaller one (every
    group's mean 0 and SD 1: mirt's ``anova(stacked, grouped)``) and the multiple-group fits of
    smaller models on the same groups; a one-group fit holds no multiple-group fit."""
    gs, gl = _group_labels(smaller), _group_labels(larger)
    return nested(smaller.model, larger.model) and \
        getattr(smaller, "n_dims", 1) <= getattr(larger, "n_dims", 1) and \
        (gs is None or gs == gl)


def _group_labels(fit):
    """The groups of a multiple-group fit (reference first), None for a one-group fit."""
    groups = getattr(fit, "groups", None)
    return None if groups is None else tuple(g["group"] for g in groups["groups"])


def anova(*results, names=None, test: bool = True) -> pd.DataFrame:
    """mirt's ``anova(m1, m2, ...)``: one row per model (AIC, SABIC, HQ, BIC, logLik) and,
    from the second row on, the likelihood-ratio test against the row above (X2, df, p).

    With log-likelihood l, k parameters and N subjects: AIC = -2l + 2k (Akaike, 1974),
    BIC = -2l + k ln N (Schwarz, 1978), SABIC = -2l + k ln((N + 2) / 24) (Sclove, 1987),
    HQ = -2l + 2k ln ln N (Hannan & Quinn, 1979); X2 = 2 (l_larger - l_smaller) referred to
    chi-square with df = k_larger - k_smaller (Wilks, 1938).

    ``results``: :class:`atlascat.irt.result.CalibrationResult` (or fitted ``Calibrator``), or
    :class:`atlascat.irt.multidimcal.MultidimCalibration` (K-dimensional 2PL), of nested models fitted to the same responses, in any order (sorted by their number of
    parameters). ``names`` label the rows (default: each result's model, as ``atlas anova``'s:
    "2pl", a K-dimensional fit "2pl-Kd", a multiple-group one "2pl-groups"). ``test=False``:
    the criteria only (X2, df, p left empty), for models that are not nested (graded and gpcm).
    A fit with priors is a posterior mode, not a maximum-likelihood fit: then, as mirt's
    ``anova``, the columns are AIC, SABIC, HQ, BIC, logLik, logPost (log-likelihood + log
    prior) and df, with no X2 or p.
    """
    if len(results) < 2:
        raise ConfigError("anova compares at least two calibrations; pass two or more results")
    # a fitted Calibrator (scikit-learn style) stands for its result_
    results = tuple(r.result_ if type(r).__name__ == "Calibrator" else r
                    for r in results)
    for i, r in enumerate(results):   # a CalibrationResult (result.py imports this module)
        if not callable(getattr(r, "information_criteria", None)):
            raise ConfigError(f"anova's argument {i + 1} is a {type(r).__name__}, not a "
                              "calibration result; pass the results of atlascat.calibrate")
    names = [_row_name(r) for r in results] if names is None else [str(v) for v in names]
    if len(names) != len(results):
        raise ConfigError(f"{len(names)} names for {len(results)} results")
    rows = []
    for name, r in zip(names, results):
        crit = r.information_criteria()
        rows.append((crit["n_parameters"], name, r, crit))
    _check_same_data([r for _, _, r, _ in rows], names)
    continuous = [n for n, r in zip(names, results)
                  if (r.settings or {}).get("scores") == "continuous"]
    if continuous:
        raise ConfigError(
            f"{continuous[0]} was fitted to continuous scores (in [0, 1], not 0/1), through a "
            "quasi-likelihood: its log-likelihood, X2, p, AIC and BIC are not a likelihood's "
            "and do not compare models; binarize the scores (ResponseMatrix.binarize) or "
            "compare the models' predictions on held-out models")
    with_priors = any(_has_priors(r) for r in results)
    rows.sort(key=lambda t: t[0])
    out = []
    prev = None
    for k, name, r, crit in rows:
        row = {"model": name, "AIC": crit["aic"], "SABIC": crit["sabic"], "HQ": crit["hq"],
               "BIC": crit["bic"], "logLik": crit["loglik"], "X2": np.nan, "df": np.nan,
               "p": np.nan}
        if with_priors:   # mirt: logPost (log-likelihood + log prior) and df, no X2 / p
            row = {**{k: row[k] for k in ("model", "AIC", "SABIC", "HQ", "BIC", "logLik")},
                   "logPost": _log_posterior(r), "df": np.nan}
        if prev is not None and test:
            pk, pname, pr, pcrit = prev
            if not nested_fits(pr, r):
                raise ConfigError(
                    f"{_label(pname, pr)} is not nested in {_label(name, r)}: a "
                    "likelihood-ratio test needs nested models; compare their AIC/BIC instead "
                    "(test=False lists them)")
            df = k - pk
            if df <= 0:
                raise ConfigError(f"{pname} and {name} have the same number of parameters "
                                  f"({k}); a likelihood-ratio test needs nested models")
            if with_priors:   # posterior modes: no likelihood-ratio test (mirt's anova)
                row["df"] = float(df)
                out.append(row)
                prev = (k, name, r, crit)
                continue
            from scipy.stats import chi2

            x2 = 2.0 * (crit["loglik"] - pcrit["loglik"])
            row.update({"X2": x2, "df": float(df), "p": float(chi2.sf(max(x2, 0.0), df))})
        out.append(row)
        prev = (k, name, r, crit)
    return pd.DataFrame(out).set_index("model")


def _has_priors(result) -> bool:
    """Whether ``result`` was fitted with a prior on any item parameter (a posterior mode)."""
    return any((result.settings or {}).get(k)
               for k in ("prior_a", "prior_c", "prior_u", "prior_d"))   # prior_d: multidimcal


def _log_posterior(result) -> float:
    """The fit's log-likelihood plus its log prior (mirt's logPost; the log-likelihood
    for a fit without priors)."""
    value = getattr(result, "log_posterior", None) if _has_priors(result) else None
    return float(result.loglik if value is None else value)


def _row_name(fit) -> str:
    """A result's default row name: its model, "-Kd" for K >= 2 dimensions, "-groups" for a
    multiple-group fit (``atlas anova``'s rows)."""
    k = getattr(fit, "n_dims", 1)
    return (f"{fit.model}{f'-{k}d' if k > 1 else ''}"
            f"{'-groups' if _group_labels(fit) is not None else ''}")


def _label(name: str, fit) -> str:
    """A row's name, with its model where the caller named it otherwise."""
    k = getattr(fit, "n_dims", 1)
    model = fit.model if k == 1 else f"{fit.model}, {k} dimensions"
    if _group_labels(fit) is not None:
        model += f", {len(_group_labels(fit))} groups"
    return name if name.lower() == model.lower() else f"{name} ({model})"


def _check_same_data(results, names) -> None:
    """The results were fitted to the same subjects (count), items (ids) and responses
    (fingerprint, when the results carry one)."""
    ref = results[0]
    for name, r in zip(names[1:], results[1:]):
        a = ref.information_criteria()["n_observations"]
        b = r.information_criteria()["n_observations"]
        same_items = sorted(map(str, ref.bank.item_ids)) == sorted(map(str, r.bank.item_ids))
        fa, fb = ref.settings.get("data_fingerprint"), r.settings.get("data_fingerprint")
        if a != b or not same_items or (fa and fb and fa != fb):
            raise ConfigError(
                f"{names[0]} and {name} were fitted to different data ({a:g} vs {b:g} subjects, "
                f"{len(ref.bank)} vs {len(r.bank)} items); anova compares models fitted to "
                "the same responses")
