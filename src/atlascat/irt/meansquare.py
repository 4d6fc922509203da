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

__all__ = ["mean_squares"]


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
