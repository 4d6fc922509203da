"""Scores of theta on a bank of continuous items, under the extended quasi-likelihood.

A bank calibrated from scores in [0, 1] that are not all 0/1 carries each item's dispersion
phi_j (:mod:`atlascat.irt.dispersion`): Var(y | theta) = phi_j P_j (1 - P_j). The adaptive test
divides each item's log-likelihood term and information by phi_j; the benchmark's references
and fixed forms must be scored the same way for the comparison to be fair. With
P_j = c + (u - c) s, s = sigma(a (theta - b)), P'_j = a (u - c) s (1 - s) and
P''_j = a P'_j (1 - 2 s), the quasi-score and information are

    S(theta) = sum_j (y_j - P_j) P'_j / (phi_j P_j Q_j),    I(theta) = sum_j P'_j^2 / (phi_j P_j Q_j)

(McCullagh and Nelder 1989, section 9.2), and with J(theta) = sum_j P'_j P''_j / (phi_j P_j Q_j):

- ``"eap"``: the posterior mean and SD of theta on the quadrature grid, prior N(0, 1), the
  log-likelihood sum_j [y_j log P_j + (1 - y_j) log Q_j] / phi_j (Bock and Mislevy 1982);
- ``"wle"``: Warm's (1989) weighted likelihood estimate, the root of S + J / (2 I) = 0, found
  on a grid of step 0.005 over ``bounds`` and refined linearly; SE 1 / sqrt(I(theta)).

With phi_j = 1 both are :func:`atlascat.irt.ability.estimate_ability`'s estimates.

References: Bock and Mislevy (1982), Applied Psychological Measurement 6, 431-444. Warm (1989),
Psychometrika 54, 427-450. McCullagh and Nelder (1989), Generalized Linear Models, 2nd ed.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..irt.defaults import QUADPTS, THETA_RANGE
from ..irt.quadrature import normal_quadrature

__all__ = ["quasi_scores"]


def _curves(theta, bank):
    """P, Q, P', P'' of every item at ``theta`` (T,), each (T, J)."""
    a, b, c, u = (np.asarray(v, float)[None, :] for v in bank.params)
    z = a * (np.asarray(theta, float)[:, None] - b)
    s = 1.0 / (1.0 + np.exp(-z))
    p = np.clip(c + (u - c) * s, 1e-12, 1 - 1e-12)
    d1 = a * (u - c) * s * (1.0 - s)
    return p, 1.0 - p, d1, a * d1 * (1.0 - 2.0 * s)


def quasi_scores(y, bank, phi, method: str = "eap", *, quadpts: int = QUADPTS,
                 theta_range=THETA_RANGE, bounds=(-6.0, 6.0), chunk: int = 256) -> pd.DataFrame:
    """theta and SE of every row of ``y`` ((n, J) in bank order, NaN = not answered) on
    ``bank`` with dispersions ``phi`` (J,); columns ``theta, se, n_items``."""
    y = np.asarray(y, float)
    w = 1.0 / np.asarray(phi, float)[None, :]
    seen = np.isfinite(y)
    yv = np.where(seen, y, 0.0)
    n = y.shape[0]
    theta, se = np.full(n, np.nan), np.full(n, np.nan)
    if method == "eap":
        quad = normal_quadrature(int(quadpts), theta_range)
        p, q, _, _ = _curves(quad.nodes, bank)
        lp, lq = np.log(p) * w, np.log(q) * w                      # (Q, J)
        lpost = yv @ lp.T + np.where(seen, 1.0 - yv, 0.0) @ lq.T + quad.log_weights[None, :]
        post = np.exp(lpost - lpost.max(1, keepdims=True))
        post /= post.sum(1, keepdims=True)
        theta = post @ quad.nodes
        se = np.sqrt(np.maximum(post @ quad.nodes ** 2 - theta ** 2, 0.0))
    elif method == "wle":
        grid = np.arange(bounds[0], bounds[1] + 1e-9, 0.005)
        p, q, d1, d2 = _curves(grid, bank)
        k = d1 * w / (p * q)                                           # (T, J)
        for lo in range(0, n, int(chunk)):
            sl = slice(lo, lo + int(chunk))
            m = seen[sl].astype(float)
            info = m @ (k * d1).T                                      # (rows, T)
            score = (yv[sl] @ k.T - m @ (k * p).T
                     + (m @ (k * d2).T) / (2.0 * np.maximum(info, 1e-300)))
            # the first grid point where the estimating equation turns from + to -
            down = (score[:, :-1] > 0) & (score[:, 1:] <= 0)
            has = down.any(1)
            i = np.where(has, down.argmax(1), np.where(score[:, 0] <= 0, 0, len(grid) - 2))
            r = np.arange(i.size)
            s0, s1 = score[r, i], score[r, i + 1]
            frac = np.where(has, s0 / np.where(s0 - s1 == 0, 1.0, s0 - s1), 0.0)
            t = np.where(has, grid[i] + frac * (grid[i + 1] - grid[i]),
                         np.where(score[:, 0] <= 0, grid[0], grid[-1]))
            theta[sl] = t
            pt, qt, d1t, _ = _curves(t, bank)
            it = (m * d1t ** 2 * w / (pt * qt)).sum(1)
            se[sl] = 1.0 / np.sqrt(np.maximum(it, 1e-300))
    else:
        from ..errors import ConfigError

        raise ConfigError(f"method must be 'eap' or 'wle' on a bank with dispersions, got "
                          f"{method!r}")
    n_items = seen.sum(1)
    theta = np.where(n_items > 0, theta, np.nan)
    se = np.where(n_items > 0, se, np.nan)
    return pd.DataFrame({"theta": theta, "se": se, "n_items": n_items})
