"""Infit and outfit mean squares of each subject (Wright and Masters, 1982), as mirt's
``personfit(mod)`` reports them beside Zh, for right/wrong items.

At the subject's theta, with residual x_j - P_j, variance W_j = P_j Q_j and fourth central
moment C_j = P_j Q_j (P_j^3 + Q_j^3), over the n items the subject answered (J in the bank)::

    outfit = sum_j (x_j - P_j)^2 / W_j / n         infit = sum_j (x_j - P_j)^2 / sum_j W_j
    q_out = sqrt(|sum_j C_j / W_j^2 / J^2 - 1 / n|)   q_in = sqrt(sum_j (C_j - W_j^2)) / sum_j W_j
    z = (ms^(1/3) - 1) (3 / q) + q / 3             (Wilson-Hilferty; q capped at 1.4142)

mirt's definitions to the letter (its J^2 in q_out included, W floored where W^2 < 1e-5); an
infinite theta (ML of a perfect pattern) is moved 0.1 beyond the largest finite one, as mirt.
"""
from __future__ import annotations

import numpy as np

from . import models

__all__ = ["mean_squares", "person_fit_summary"]


def mean_squares(y, params, theta) -> dict:
    """``{"outfit", "z_outfit", "infit", "z_infit"}`` arrays for responses ``y`` (n, J; NaN
    missing) on binary items ``params`` (a, b, c, u) at ``theta`` (n,)."""
    y = np.asarray(y, dtype=float)
    th = np.asarray(theta, dtype=float).reshape(-1).copy()
    finite = np.isfinite(th)
    if finite.any():
        th[th == np.inf] = th[finite].max() + 0.1
        th[th == -np.inf] = th[finite].min() - 0.1
    obs = ~np.isnan(y)
    log_p, log_q = models.log_probability(np.where(np.isnan(th), 0.0, th), *params)
    p, q = np.exp(log_p), np.exp(log_q)
    w = p * q
    c = w * (p**3 + q**3)
    w = np.where(w**2 < 1e-5, np.sqrt(1e-5), w)
    r2 = np.where(obs, (np.where(obs, y, 0.0) - p) ** 2, 0.0)
    n = obs.sum(axis=1)
    n_items = y.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        outfit = (r2 / w * obs).sum(axis=1) / n
        q_out = np.sqrt(np.abs((c / w**2 * obs).sum(axis=1) / n_items**2 - 1.0 / n))
        infit = r2.sum(axis=1) / (w * obs).sum(axis=1)
        q_in = np.sqrt(((c - w**2) * obs).sum(axis=1)) / (w * obs).sum(axis=1)
        q_out, q_in = np.minimum(q_out, 1.4142), np.minimum(q_in, 1.4142)
        z_out = (np.cbrt(outfit) - 1.0) * (3.0 / q_out) + q_out / 3.0
        z_in = (np.cbrt(infit) - 1.0) * (3.0 / q_in) + q_in / 3.0
    bad = np.isnan(th) | (n == 0)
    return {k: np.where(bad, np.nan, v) for k, v in
            (("outfit", outfit), ("z_outfit", z_out), ("infit", infit), ("z_infit", z_in))}


def person_fit_summary(pf, *, weights=None, lowest: int = 10) -> dict:
    """A :func:`atlascat.irt.fit.person_fit` frame in a few numbers: lz*'s mean, sd and share
    below -1.645 (its 5% lower tail) and, for mirt's ``outfit`` and ``infit``, the mean mean
    square and the share of subjects whose z is above 1.96 (responses noisier than the model
    expects, the usual flag), each over the subjects where it is finite (None where none is);
    ``weights``: subjects per row (a pattern table's counts); ``lowest``: the ``lowest`` rows
    by lz*, with every statistic."""
    w_all = np.ones(len(pf)) if weights is None else np.asarray(weights, dtype=float)

    def stats(col, fn):
        v = pf[col].to_numpy(float) if col in pf else np.full(len(pf), np.nan)
        ok = np.isfinite(v) & (w_all > 0)
        return float(fn(v[ok], w_all[ok])) if ok.any() else None

    def mean(v, w):
        return np.average(v, weights=w)

    out = {"statistic": "lz* at WLE theta (Snijders 2001)",
           "mean": stats("lz_star", mean),
           "sd": stats("lz_star", lambda v, w: np.sqrt(np.average((v - mean(v, w))**2,
                                                                  weights=w))),
           "share_below_-1.645": stats("lz_star", lambda v, w: mean(v < -1.645, w))}
    for name in ("outfit", "infit"):
        out[f"{name}_mean"] = stats(name, mean)
        out[f"{name}_share_z_above_1.96"] = stats(f"z_{name}", lambda v, w: mean(v > 1.96, w))
    cols = [c for c in ("subject_id", "theta", "lz_star", "outfit", "z_outfit", "infit",
                        "z_infit") if c in pf]
    out["lowest"] = pf.sort_values("lz_star").head(lowest)[cols].to_dict(orient="records")
    return out
