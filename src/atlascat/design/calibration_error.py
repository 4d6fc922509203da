"""Slopes shrunk for their calibration error, for choosing a fixed form's items.

A D-optimal form takes the items whose *estimated* information is highest, so a slope that the
calibration overestimated by chance is likelier to be taken, and the form's stated precision is
optimistic on new models ("capitalization on chance": van der Linden & Glas, 2000). With few
source models the slopes are noisy and the effect large (benchmarks/results/fixed_forms.md).

:func:`shrunk_slopes` replaces each slope by an empirical-Bayes posterior mean on the log
scale: ``log a_j`` is taken as the true log slope plus an error of variance ``s_j^2``, the
asymptotic variance of the item's log slope on the source models (the item's Fisher information
for (log a, d) summed over the abilities the bank was calibrated on, plus the calibration's
lognormal prior); the true log slopes spread as N(m, tau^2) over the bank, with ``m`` and
``tau^2`` their method-of-moments estimates (tau^2 = var(log a) - mean(s^2), at least a tenth of
var(log a)). The shrunk slope of item j is ``exp(m + w_j (log a_j - m))``, w_j = tau^2 / (tau^2
+ s_j^2): an item seen by few informative source models is pulled toward the bank's typical
slope, so it is taken only when its estimate is high enough to survive the pull. Difficulties,
asymptotes and the bank the form is scored with are unchanged.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError

#: the slope prior of the calibration (a ~ lognorm(0, 1): docs/calibration.md), as the precision
#: it adds to the log slope
_PRIOR_PRECISION = 1.0
#: the least share of the log slopes' variance credited to the items (tau^2 floor)
_MIN_SIGNAL = 0.1


def log_slope_variance(bank, thetas, weights=None, n_models=None) -> np.ndarray:
    """Asymptotic variance of each item's log slope when calibrated on models of abilities
    ``thetas`` (counted by ``weights``, default one each; rescaled to sum to ``n_models`` when
    given): the (log a, log a) element of the inverse of the item's Fisher information for
    (log a, d) plus the slope prior's precision."""
    return parameter_covariance(bank, thetas, weights, n_models)[:, 0, 0]


def shrunk_slopes(bank, thetas, weights=None, n_models=None) -> np.ndarray:
    """Each slope's empirical-Bayes posterior mean on the log scale (module docstring)."""
    x = np.log(np.maximum(np.asarray(bank.a, float), 1e-6))
    s2 = log_slope_variance(bank, thetas, weights, n_models)
    m, total = float(np.mean(x)), float(np.var(x))
    if not total > 0:
        return np.exp(x)
    tau2 = max(total - float(np.mean(s2)), _MIN_SIGNAL * total)
    return np.exp(m + tau2 / (tau2 + s2) * (x - m))


def shrunk_bank(bank, thetas, weights=None, n_models=None):
    """``bank`` with :func:`shrunk_slopes` (a copy; for choosing items, not for scoring)."""
    from ..irt.bank import ItemBank

    return ItemBank(bank.item_ids, shrunk_slopes(bank, thetas, weights, n_models), bank.b, bank.c, bank.u,
                    metadata=bank.metadata, model=bank.model)


def _item_terms(bank, th, w):
    """(iw, g): each item's information weight of its logit at the abilities (J, Q) and the
    logit's gradient in (log a) at them (dz / d log a; dz / dd = 1)."""
    a, b = np.asarray(bank.a, float), np.asarray(bank.b, float)
    c, u = np.asarray(bank.c, float), np.asarray(bank.u, float)
    s = 1.0 / (1.0 + np.exp(-a[:, None] * (th[None, :] - b[:, None])))
    p = np.clip(c[:, None] + (u - c)[:, None] * s, 1e-9, 1 - 1e-9)
    dp = (u - c)[:, None] * s * (1.0 - s)
    return w[None, :] * dp ** 2 / (p * (1.0 - p)), a[:, None] * th[None, :]


def parameter_covariance(bank, thetas, weights=None, n_models=None) -> np.ndarray:
    """(J, 2, 2): each item's asymptotic covariance of (log a, d), d = -a b, when calibrated on
    models of abilities ``thetas`` (see :func:`log_slope_variance`)."""
    th = np.asarray(thetas, dtype=float).ravel()
    w = np.ones_like(th) if weights is None else np.asarray(weights, dtype=float).ravel()
    if th.size == 0 or w.shape != th.shape or not (np.isfinite(th).all() and np.isfinite(w).all()
                                                   and w.min() >= 0 and w.sum() > 0):
        raise ConfigError("the calibration's abilities must be finite, with one weight >= 0 each")
    if n_models is not None:
        if not float(n_models) > 0:
            raise ConfigError(f"n_models must be > 0, got {n_models!r}")
        w = w * (float(n_models) / w.sum())
    iw, g = _item_terms(bank, th, w)
    i_aa = (iw * g ** 2).sum(axis=1) + _PRIOR_PRECISION
    i_ad = (iw * g).sum(axis=1)
    i_dd = iw.sum(axis=1) + 1e-6
    det = np.maximum(i_aa * i_dd - i_ad ** 2, 1e-12)
    return np.stack([np.stack([i_dd, -i_ad], -1), np.stack([-i_ad, i_aa], -1)], -2) / det[:, None, None]


def calibration_variance(bank, cov, theta, se, answered) -> np.ndarray:
    """Each examinee's variance of theta from the item parameters' calibration error (delta
    method: a shift dz_j of item j's logit moves the estimate by se^2 a_j w_j dz_j, w_j the
    information weight of the logit; Var dz_j = g' cov_j g, g = (a_j theta, 1)).

    ``cov``: :func:`parameter_covariance`; ``theta``, ``se``: (N,) estimates and their SEs;
    ``answered``: (N, J) boolean, the items each examinee answered."""
    theta = np.asarray(theta, float)
    a = np.asarray(bank.a, float)
    iw, g = _item_terms(bank, theta, np.ones_like(theta))      # (J, N)
    vz = (cov[:, 0, 0, None] * g ** 2 + 2 * cov[:, 0, 1, None] * g + cov[:, 1, 1, None])
    terms = (a[:, None] * iw) ** 2 * vz * np.asarray(answered, bool).T
    return np.asarray(se, float) ** 4 * terms.sum(axis=0)
