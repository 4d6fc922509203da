"""mirt's full-information goodness of fit of a calibration: G2 on the table of response
patterns (what ``print(mod)`` shows as ``G2 (df) = ..., p = ..., RMSEA = ...``).

With r_p subjects giving pattern p (pattern frequencies summed), N = sum r_p and pi_p the
model's marginal probability of p (the calibration's quadrature)::

    G2 = 2 sum_p r_p log(r_p / (N pi_p))        over the observed patterns
    df = prod_j K_j - 1 - k                      (K_j categories of item j, k parameters)
    p = P(chi2_df > G2),  RMSEA = sqrt(max(G2 - df, 0) / (df (N - 1)))

As in mirt the statistic needs every answer (with a missing one it is not defined: None) and
is referred to chi-square only where the table is not sparse; with many items most patterns
are never seen and p is near 1 whatever the fit: M2 (``atlas fit``) is the test to read. Tables
of more than 1e10 cells (34 or more 0/1 items), where mirt caps df at 1e10, get None.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["g2"]

#: mirt caps the table's cells at 1e10 (df then 1e10 - 1 - k, p 1 whatever the fit: 34 and
#: more 0/1 items); there G2 is left out (None), which also spares large banks its cost
_MAX_CELLS = 1e10


def g2(codes, weights, log_prob, log_weights, n_categories, n_parameters) -> dict | None:
    """``{"g2", "g2_df", "g2_p", "g2_rmsea"}`` of a fit, or None with a missing answer.

    ``codes``: (n, J) category codes 0..K_j - 1 (NaN = missing); ``weights``: (n,) pattern
    frequencies or None; ``log_prob``: (J, Q, K_max) log P(X_j = k | node q);
    ``log_weights``: (Q,) the quadrature's log weights; ``n_categories``: (J,) K_j;
    ``n_parameters``: k.
    """
    from scipy.special import gammaincc, logsumexp   # chi2.sf(x, df) = Q(df / 2, x / 2)

    codes = np.asarray(codes, dtype=float)
    cells = math.prod(int(k) for k in n_categories)
    if codes.size == 0 or cells > _MAX_CELLS or np.isnan(codes).any():
        return None
    w = np.ones(len(codes)) if weights is None else np.asarray(weights, dtype=float)
    patterns, inverse = np.unique(codes.astype(np.int64), axis=0, return_inverse=True)
    r = np.bincount(inverse.reshape(-1), weights=w, minlength=len(patterns))
    keep = r > 0
    patterns, r = patterns[keep], r[keep]
    lp = np.where(np.isfinite(log_prob), log_prob, -1e300)   # absent categories: never seen
    total = np.zeros((len(patterns), len(log_weights)))
    for k in range(lp.shape[2]):                   # sum_j log P_j(x_pj | q): one product a level
        total += (patterns == k).astype(float) @ lp[:, :, k]
    log_pi = logsumexp(total + np.asarray(log_weights)[None, :], axis=1)
    n = float(r.sum())
    stat = float(2.0 * np.sum(r * (np.log(r / n) - log_pi)))
    df = float(cells - 1 - int(n_parameters))
    if df <= 0 or n <= 1:
        return {"g2": stat, "g2_df": df, "g2_p": None, "g2_rmsea": None}
    return {"g2": stat, "g2_df": df, "g2_p": float(gammaincc(df / 2.0, stat / 2.0)),
            "g2_rmsea": math.sqrt(max(stat - df, 0.0) / (df * (n - 1.0)))}
