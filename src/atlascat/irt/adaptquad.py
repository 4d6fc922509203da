"""Refined quadrature for the EAP: the posterior mean and SD integrated again, on a grid 8
times finer, for the subjects whose posterior the fixed grid does not resolve.

The fixed grid (mirt's fscores: 121 nodes 0.1 apart on [-6, 6]) integrates a posterior of SD
0.3 or more to machine precision, but the posterior of a few answers to steep items (slopes of
10-50 on the shipped LLM banks) is narrow or has edges a few hundredths wide, and the grid then
leaves its SD up to tens of percent off (benchmarks/results/eap_quadrature.md). With
``quadrature="adaptive"``:

1. check: the same EAP on the grid's every other node (half as many, twice as far apart). The
   error of an equally spaced rule on a smooth posterior falls like exp(-c / h^2) (a Gaussian
   of SD sigma: c = 2 pi^2 sigma^2) or exp(-c / h) (a logistic edge of slope a: c = 2 pi^2 / a),
   so the half grid's error is about the fine grid's square or fourth root: where theta and SD
   of both agree to ``CHECK_TOL`` x SD, the fixed grid's numbers are kept, bit for bit (mirt's);
2. the others: the same integral (prior N(mu, sigma^2) on ``theta_range``) on
   (quadpts - 1) x ``REFINE`` + 1 nodes (961: 0.0125 apart), by the same matrix-product
   kernel (:func:`atlascat.irt.estep.bank_estep`), all refined subjects at once. A slope of 50
   times that spacing is 0.625, which leaves an error near 2e-14 by the bound above, a
   Gaussian posterior of SD 0.02 one near 1e-22 (16 times finer was no more accurate in the
   study; 4 times left 5e-5 on mmlu).

Gauss-Hermite nodes centred at each subject's posterior (Naylor and Smith, 1982; Schilling
and Bock, 2005) were tried first: they are exact for smooth posteriors but worse than the grid
on these (a narrow posterior with a logistic edge 0.02 wide: the study's table).

References
----------
Naylor, J. C. and Smith, A. F. M. (1982). Applications of a method for the efficient
computation of posterior distributions. Applied Statistics, 31, 214-225.
Trefethen, L. N. and Weideman, J. A. C. (2014). The exponentially convergent trapezoidal rule.
SIAM Review, 56, 385-458.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError

__all__ = ["QUADRATURES", "REFINE", "CHECK_TOL", "check_quadrature", "coarse_points",
           "refined_points", "unresolved", "refine"]

#: ``quadrature=`` of the EAP: "adaptive" (the fixed grid where it resolves the posterior, a
#: grid REFINE times finer elsewhere) or "fixed" (mirt's grid alone)
QUADRATURES = ("adaptive", "fixed")
#: how many times finer the grid of the refined subjects is
REFINE = 8
#: the grid is kept where its theta and SD agree with the half grid's to this fraction of the SD
CHECK_TOL = 1e-4
_MAX_NODES = 10001


def check_quadrature(quadrature) -> str:
    """The quadrature's name, lower case; a ConfigError of one line for another."""
    q = str(quadrature).strip().lower()
    if q not in QUADRATURES:
        raise ConfigError(f"quadrature (CLI --quadrature) must be one of {', '.join(QUADRATURES)}"
                          f", got {quadrature!r}")
    return q


def coarse_points(quadpts: int) -> int:
    """Nodes of the check grid: every other node of ``quadpts`` (121 -> 61, 0.2 apart)."""
    return (int(quadpts) + 1) // 2


def refined_points(quadpts: int) -> int:
    """Nodes of the refined grid: ``REFINE`` times finer (121 -> 961), at most 10,001."""
    gaps = int(quadpts) - 1
    return gaps * max(1, min(REFINE, (_MAX_NODES - 1) // gaps)) + 1


def unresolved(theta, se, theta_coarse, se_coarse, tol: float = CHECK_TOL) -> np.ndarray:
    """The subjects whose grid scores differ from the coarse grid's by more than ``tol`` x SD
    (in theta or in the SD): those the grid does not resolve."""
    theta, se = np.asarray(theta, float), np.asarray(se, float)
    gap = np.maximum(np.abs(theta - np.asarray(theta_coarse, float)),
                     np.abs(se - np.asarray(se_coarse, float)))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = gap > tol * se
    return out & np.isfinite(theta) & np.isfinite(se)


def refine(score_on, theta, se, quadpts: int):
    """The grid's EAP ``theta``, ``se`` (on ``quadpts`` nodes) where the half grid agrees with
    it, integrated again on the grid :func:`refined_points` elsewhere: ``score_on(n, rows)``
    scores the subjects ``rows`` (None: all) on ``n`` nodes and returns (theta, se), the one
    step the binary and the ordinal EAP each supply."""
    theta_c, se_c = score_on(coarse_points(quadpts), None)
    rows = np.flatnonzero(unresolved(theta, se, theta_c, se_c))
    if rows.size:
        theta, se = np.array(theta, dtype=float), np.array(se, dtype=float)
        theta[rows], se[rows] = score_on(refined_points(quadpts), rows)
    return theta, se
