"""Standard errors of a calibration's item parameters, in mirt's and in our parameterization.

The covariance of the free parameters is the inverse of the observed information
(:mod:`atlascat.irt.information`, Oakes 1999; with priors the posterior-mode information)
in mirt's parameterization: a1, d, logit g, logit u per item (and the latent variance of a
Rasch fit). Every other form is a smooth function of those and takes its standard errors by
the delta method, se(f) = sqrt(J C J^T) with J the Jacobian of f (per item, plus the latent
variance where the form depends on it):

* mirt's ``a1, d, g, u``: g = sigma(logit g), se(g) = g (1 - g) se(logit g) (mirt's
  ``coef(printSE = TRUE)`` prints logit g with its SE instead);
* ours ``a, b, c, u``: a = a1, b = -d / a1, c = g;
* a Rasch fit (theta ~ N(0, sigma^2), a = 1) written as the equivalent 1PL on the N(0, 1)
  scale: a = sigma, b = -d / sigma (mirt's d is the same in both);
* ordinal items (graded, GPCM; :mod:`atlascat.irt.polytomous`): mirt's ``a1, d1..dk`` as
  estimated, ours ``a, b1..bk`` as mirt's IRTpars (graded b_k = -d_k / a, GPCM
  b_k = -(d_k - d_(k-1)) / a; :func:`atlascat.irt.polytomous.thresholds`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ConfigError, warn_user
from .information import (BINARY_NAMES, ObservedInformation, binary_dlog_prob,
                          binary_log_prob, category_indices, observed_information)

__all__ = ["StandardErrors", "binary_standard_errors", "binary_parts", "ordinal_standard_errors",
           "ordinal_parts", "FORMATS"]

FORMATS = ("mirt", "ours")
_OURS = ("a", "b", "c", "u")


@dataclass
class StandardErrors:
    """Item parameters in mirt's form with the covariance of the free ones.

    ``params`` (n_items, n_par) in mirt's order (binary: a1, d, logit g, logit u), ``free``
    which of them were estimated, ``info`` the observed information; ``names`` mirt's names
    of the columns; ``latent_variance`` the estimated variance of a Rasch fit (else None);
    ``posterior_mode`` True when priors made it the posterior-mode information.
    """

    item_ids: np.ndarray
    names: tuple
    params: np.ndarray
    free: np.ndarray
    info: ObservedInformation
    model: str
    latent_variance: float | None = None
    posterior_mode: bool = False
    models: np.ndarray | None = None    # ordinal: each item's model (None: graded)

    def __post_init__(self):
        self.covariance = self.info.covariance()
        if not np.all(np.isfinite(self.covariance)):
            warn_user("the observed information is not positive definite (a parameter the "
                      "data does not determine, e.g. a guessing parameter with no low "
                      "scorers): standard errors are NaN; refit with a prior or a simpler model")

    def __repr__(self) -> str:
        """One line (the arrays stay in ``params``, ``covariance`` and ``info``); the table is
        :meth:`frame`."""
        kind = "posterior-mode" if self.posterior_mode else "observed"
        lv = "" if self.latent_variance is None else \
            f", latent_variance_se={self.latent_variance_se:.4g}"
        ok = "" if self.info.positive_definite else ", NOT positive definite"
        return (f"StandardErrors(model={self.model!r}, n_items={len(self.item_ids)}, "
                f"n_free={int(self.free.sum())}, {kind} information (Oakes){lv}{ok}; "
                f".frame() for the table)")

    @property
    def latent_variance_se(self) -> float | None:
        if self.latent_variance is None:
            return None
        return float(np.sqrt(self.covariance[-1, -1]))

    def frame(self, format: str = "mirt", scale: str | None = None) -> pd.DataFrame:
        """``item_id, <p>, <p>_se, ...`` for the estimated parameters (columns of parameters
        fixed for every item are left out).

        ``format``: "mirt" (a1, d, g, u; graded d1..dk) or "ours" (a, b, c, u; binary only).
        ``scale``: "fitted" (a Rasch fit as fitted: a = 1, theta ~ N(0, sigma^2)) or
        "standard" (the equivalent 1PL on N(0, 1), as ``atlas calibrate`` writes the bank);
        default "standard" for the 1PL, "fitted" otherwise.
        """
        if format not in FORMATS:
            raise ConfigError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
        scale = scale or ("standard" if self.model == "1pl" else "fitted")
        if scale not in ("fitted", "standard"):
            raise ConfigError(f"scale must be 'fitted' or 'standard', not {scale!r}")
        binary = tuple(self.names) == BINARY_NAMES
        standard = scale == "standard" and self.latent_variance is not None

        def transform(p, var):
            if not binary:      # ordinal: a1, d1..dk, or ours: a, b1..bk (IRTpars)
                if standard:    # a partial credit fit on N(0, 1): a = sigma
                    p = np.column_stack([np.full(len(p), np.sqrt(var)), p[:, 1:]])
                if format == "mirt":
                    return p, tuple(self.names)
                from . import polytomous as poly

                models = "graded" if self.models is None else self.models
                return (np.column_stack([p[:, :1], poly.thresholds(models, p)]),
                        ("a",) + tuple(f"b{k}" for k in range(1, p.shape[1])))
            a, d = p[:, 0], p[:, 1]
            if standard:
                a = np.full_like(d, np.sqrt(var))
            g, u = _expit(p[:, 2]), _expit(p[:, 3])
            if format == "mirt":
                return np.column_stack([a, d, g, u]), BINARY_NAMES
            return np.column_stack([a, -d / a, g, u]), _OURS

        values, names = transform(self.params, self.latent_variance)
        se, depends = self._delta(lambda p, v: transform(p, v)[0])
        keep = [k for k in range(values.shape[1]) if depends[:, k].any()]
        out = {"item_id": self.item_ids.astype(str)}
        for k in keep:
            out[names[k]] = values[:, k]
            out[f"{names[k]}_se"] = se[:, k]
        return pd.DataFrame(out)

    def _delta(self, fn) -> np.ndarray:
        """(se, depends) of every output of ``fn(params, var) -> (n_items, n_out)`` by the
        delta method; se is NaN for an output that depends on no estimated parameter."""
        p0, var = self.params, self.latent_variance
        m, K = p0.shape
        idx = self.info.index
        pos = np.full((m, K), -1, dtype=np.int64)
        item_rows = idx[idx[:, 0] >= 0]
        pos[item_rows[:, 0], item_rows[:, 1]] = np.arange(len(item_rows))
        C = self.covariance
        grads = {}
        for k in range(K):
            if not self.free[:, k].any():
                continue
            h = 1e-6 * (1.0 + np.abs(np.where(np.isfinite(p0[:, k]), p0[:, k], 0.0)))
            hi, lo = p0.copy(), p0.copy()
            hi[:, k] += h
            lo[:, k] -= h
            grads[k] = np.where(self.free[:, k:k + 1],
                                (fn(hi, var) - fn(lo, var)) / (2 * h[:, None]), 0.0)
        if var is not None:
            hv = 1e-6 * (1.0 + var)
            grads["v"] = (fn(p0, var + hv) - fn(p0, var - hv)) / (2 * hv)
        var2 = np.zeros((m, len(fn(p0, var)[0])))
        col = {k: pos[:, k] for k in grads if k != "v"}
        vpos = len(C) - 1
        for k, Jk in grads.items():
            for l, Jl in grads.items():
                ik = np.full(m, vpos) if k == "v" else col[k]
                il = np.full(m, vpos) if l == "v" else col[l]
                ok = (ik >= 0) & (il >= 0)
                c = np.where(ok, C[np.maximum(ik, 0), np.maximum(il, 0)], 0.0)
                var2 += Jk * Jl * c[:, None]
        depends = sum((np.abs(J) > 0).astype(float) for J in grads.values()) > 0 \
            if grads else np.zeros_like(var2, dtype=bool)
        return np.where(depends, np.sqrt(np.maximum(var2, 0.0)), np.nan), depends


def _expit(t):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-t))


def binary_standard_errors(values, weights, th, item_model, latent_variance: float, *,
                           item_ids, nodes, log_weights, model: str,
                           progress=None) -> StandardErrors:
    """Standard errors of a binary calibration from its internal parameters ``th``
    (:class:`atlascat.irt.itemmodel.ItemModel`) on the data it was fitted to;
    ``progress(done, total)`` as :func:`~atlascat.irt.information.observed_information`'s."""
    from .estep import grid_log_weights

    params, free, log_prior = binary_parts(th, item_model)
    has_prior = log_prior is not None
    rasch = item_model.model == "rasch"
    info = observed_information(
        binary_log_prob, params, free, category_indices(values), weights, nodes, log_weights,
        dlog_prob=binary_dlog_prob, log_prior=log_prior,
        latent_log_weights=(lambda v: grid_log_weights(nodes, v)) if rasch else None,
        latent_variance=float(latent_variance) if rasch else None, progress=progress)
    return StandardErrors(np.asarray(item_ids), BINARY_NAMES, params, free, info, model,
                          float(latent_variance) if rasch else None, has_prior)


def binary_parts(th, item_model):
    """(params, free, log_prior) of a binary fit's internal parameters ``th``: mirt's
    ``a1, d, logit g, logit u`` per item, which of them were estimated, and the items' log
    prior as a function of those (None without priors)."""
    th = np.asarray(th, dtype=float)
    a, d, _, _ = item_model.natural(th)
    m = len(d)
    params = np.column_stack([
        a, d,
        th[:, 2] if item_model.has_c else np.full(m, -np.inf),
        th[:, 3] if item_model.has_u else np.full(m, np.inf)])
    free = np.zeros((m, 4), dtype=bool)
    free[:, item_model.free] = True
    if all(p is None for p in (item_model.prior_a, item_model.prior_c, item_model.prior_u)):
        return params, free, None

    def log_prior(p):
        t = p.copy()
        if item_model.log_slope:
            with np.errstate(invalid="ignore", divide="ignore"):
                t[:, 0] = np.log(p[:, 0])
        return item_model.log_prior(np.where(np.isfinite(t), t, 0.0), np)
    return params, free, log_prior


def ordinal_parts(codes, params, prior_a, fixed_slopes: bool = False):
    """(params, free, responses, names, log_prior) of an ordinal fit for
    :func:`~atlascat.irt.information.observed_information`: ``params`` (n_items, K_max)
    ``a1, d1..`` (NaN beyond an item's categories), the estimated ones (no slope with
    ``fixed_slopes``, a partial credit fit), the categories (-1 missing), mirt's names and
    the slopes' log prior (None without ``prior_a``)."""
    from .itemmodel import prior_terms

    params = np.asarray(params, dtype=float)
    free = np.isfinite(params)
    if fixed_slopes:
        free[:, 0] = False
    y = np.where(np.isnan(codes), -1, codes).astype(np.int64)
    names = ("a1",) + tuple(f"d{k}" for k in range(1, params.shape[1]))
    log_prior = None
    if prior_a is not None:
        def log_prior(p):
            a = p[:, 0]
            with np.errstate(invalid="ignore", divide="ignore"):
                t = np.log(a) if prior_a.internal == "log" else a
            return prior_terms(prior_a, t, np)[0]
    return params, free, y, names, log_prior


def ordinal_standard_errors(codes, weights, params, models, *, item_ids, nodes, log_weights,
                            model: str, prior_a=None, progress=None,
                            latent_variance: float | None = None) -> StandardErrors:
    """Standard errors of a graded / GPCM calibration: ``codes`` (subjects x items) the
    categories 0..K_j-1 (NaN = missing), ``params`` (n_items, K_max) ``a1, d1..`` (NaN beyond
    an item's categories, :mod:`atlascat.irt.polytomous`), ``models`` one per item;
    ``prior_a`` the slope prior the fit used (posterior-mode information) or None;
    ``latent_variance``: a partial credit fit's (slopes fixed at 1, mirt's ``"Rasch"``): its
    intercepts and the variance are the free parameters; the scores use the exact
    d log P / d params of :func:`atlascat.irt.polytomous.dlog_prob`;
    ``progress(done, total)`` as :func:`~atlascat.irt.information.observed_information`'s."""
    from . import polytomous as poly
    from .estep import grid_log_weights

    params, free, y, names, log_prior = ordinal_parts(codes, params, prior_a,
                                                      latent_variance is not None)
    var = None if latent_variance is None else float(latent_variance)
    info = observed_information(lambda p, x: poly.log_prob(models, p, x), params, free, y,
                                weights, nodes, log_weights, log_prior=log_prior,
                                dlog_prob=lambda p, x: poly.dlog_prob(models, p, x),
                                latent_log_weights=(None if var is None else
                                                    (lambda v: grid_log_weights(nodes, v))),
                                latent_variance=var, progress=progress)
    return StandardErrors(np.asarray(item_ids), names, params, free, info, model, var,
                          prior_a is not None, np.asarray(models, dtype=object))
