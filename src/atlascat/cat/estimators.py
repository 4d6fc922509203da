"""Point estimates of theta for the adaptive test: MAP, ML and WLE, vectorized over examinees.

The engine keeps, per examinee row and per grid node theta_q, the sums over the items answered
so far (each answer adds one (Q,) row of a table, as the EAP's log posterior does):

    S(theta) = sum_j w_j (y_j P_j'/P_j - (1 - y_j) P_j'/Q_j)     (score, = sum w (y - P) P'/(PQ))
    I(theta) = sum_j w_j P_j'^2 / (P_j Q_j)                      (test information)
    J(theta) = sum_j w_j P_j' P_j'' / (P_j Q_j)                  (Warm's J)

(w_j = 1 / phi_j, the item's dispersion, on a bank of continuous scores; else 1). The estimate
is the root of an estimating equation g(theta) = 0 inside ``theta_range`` (catR's ``thetaEst``,
Magis and Raiche, 2012):

    "map" (catR "BM")  g = S - (theta - mu) / sigma^2
    "ml"  (catR "ML")  g = S
    "wle" (catR "WL")  g = S + J / (2 I)      (Warm, 1989)

Every downward sign change of g on the grid brackets a maximum of the objective (log L; + log
prior; + log I / 2, Warm's objective for the 1PL/2PL); the bound where g points out of the
range is a candidate too (an all-right or all-wrong pattern's ML estimate is the bound, as catR
bounds ``uniroot`` to ``range``). The candidate with the largest objective on the grid is
refined by the Illinois variant of regula falsi, vectorized over the rows still active, with
S, I, J summed over each row's answered items at the current point in fixed column blocks, so
that a row's result does not depend on the other rows of the call (a session and a batched
simulation agree exactly).

SE (catR's ``semTheta``, ``sem.type = "classic"``): MAP 1 / sqrt(I + 1 / sigma^2), ML and WLE
1 / sqrt(I), at the estimate. Before the first answer the estimate is the prior's mean (SD).

Warm, T. A. (1989). Weighted likelihood estimation of ability in item response theory.
Psychometrika, 54, 427-450.
Magis, D. and Raiche, G. (2012). Random generation of response patterns under computerized
adaptive testing with the R package catR. Journal of Statistical Software, 48(8).
"""
from __future__ import annotations

import numpy as np

from .config import ESTIMATORS

__all__ = ["ESTIMATORS", "node_tables", "row_sums", "terms", "estimating_function",
           "bracket", "refine"]

_Z_CLIP = 300.0   # |z| beyond this: P at its asymptote to machine precision; ratios stay finite
SUM_BLOCK = 128   # column block of the sums over answered items (see row_sums)


def _pieces(theta, tbl):
    """w P'/P, w P'/Q, w P'^2/(PQ) and P''/P' of the 4PL (``tbl``: an ItemParams table,
    (8, ...); w = 1/phi); theta broadcasts against the table's trailing axes. Formed from
    e = exp(-z): sigma and 1 - sigma = e sigma without cancellation, so Q is accurate where P
    is close to 1 and no ratio is 0/0 (the zero-information pad item gives 0)."""
    a, b, c, uc, omu, w = tbl[0], tbl[1], tbl[2], tbl[4], tbl[5], tbl[7]
    z = np.clip(a * (theta - b), -_Z_CLIP, _Z_CLIP)
    e = np.exp(-z)
    s = 1.0 / (1.0 + e)
    t = e * s
    dp = a * uc * s * t
    nz = dp != 0
    qr = np.divide(dp, c + uc * s, out=np.zeros_like(dp), where=nz)    # P'/P
    pr = np.divide(dp, omu + uc * t, out=np.zeros_like(dp), where=nz)  # P'/Q
    return qr * w, pr * w, qr * pr * w, a * (t - s)


def node_tables(nodes, table):
    """(s1, s0, info, warm), each (J, Q): w P'/P, w P'/Q, w P'^2/(PQ), w P'P''/(PQ) of every
    item (``table``: (8, J)) at every node; an answer y adds y s1 - (1 - y) s0 to S."""
    s1, s0, info, curv = _pieces(np.asarray(nodes)[None, :], table[:, :, None])
    return (np.ascontiguousarray(s1), np.ascontiguousarray(s0), np.ascontiguousarray(info),
            np.ascontiguousarray(info * curv))


def row_sums(x):
    """Sum over the last axis of (n, m) in fixed blocks of SUM_BLOCK columns (zero-padded),
    the blocks then added in order: a row's sum does not depend on m (the widest row of the
    call), so the same answers give the same bits in a session and in a batch."""
    n, m = x.shape
    nb = max(1, -(-m // SUM_BLOCK))
    if m != nb * SUM_BLOCK:
        x = np.concatenate([x, np.zeros((n, nb * SUM_BLOCK - m))], axis=1)
    blocks = x.reshape(n, nb, SUM_BLOCK).sum(axis=2)
    total = blocks[:, 0].copy()
    for k in range(1, nb):
        total += blocks[:, k]
    return total


def terms(theta, table, y, warm: bool = True):
    """S, I, J at one theta per row over its answered items: ``table`` (8, n, m) their
    parameters (the pad item where there is none), ``y`` (n, m) the scores (0 at the pad);
    ``warm=False``: J is not needed (0)."""
    s1, s0, info, curv = _pieces(theta[:, None], table)
    j = row_sums(info * curv) if warm else np.zeros(theta.size)
    return row_sums(y * s1 - (1.0 - y) * s0), row_sums(info), j


def estimating_function(method, s, i, j, loglik, theta, mu, sd):
    """(g(theta), the objective whose local maxima are g's downward roots; WLE's exactly so for
    the 1PL/2PL) of ``method`` from S, I, J and log L: the full-test scorer's
    :func:`atlascat.irt.devicesolve.estimating_function`, in NumPy."""
    from ..irt.devicesolve import estimating_function as g_and_objective

    return g_and_objective(method, s, i, j, loglik, theta, mu, sd)


def bracket(g, obj):
    """The best candidate per row, as a column of (n, Q + 1): 0 the lower bound (g < 0 there),
    Q the upper bound (g > 0 there), k in 1..Q-1 the bracket [node k-1, node k] of a downward
    sign change of g; by the larger grid objective of its ends (a row without any candidate,
    g == 0 everywhere, takes the better bound)."""
    n, q = g.shape
    score = np.full((n, q + 1), -np.inf)
    down = (g[:, :-1] > 0) & (g[:, 1:] <= 0)
    score[:, 1:-1] = np.where(down, np.maximum(obj[:, :-1], obj[:, 1:]), -np.inf)
    score[:, 0] = np.where(g[:, 0] < 0, obj[:, 0], -np.inf)
    score[:, -1] = np.where(g[:, -1] > 0, obj[:, -1], -np.inf)
    none = ~np.isfinite(score).any(axis=1)
    if none.any():
        lower = obj[none, 0] >= obj[none, -1]
        score[none, 0] = np.where(lower, 0.0, -np.inf)
        score[none, -1] = np.where(lower, -np.inf, 0.0)
    return np.argmax(score, axis=1)


def refine(fun, a_x, b_x, a_g, b_g, *, xtol=1e-10, max_iter=100):
    """The root of each bracket [a_x, b_x] with g(a_x) > 0 >= g(b_x), vectorized:
    :func:`atlascat.irt.rootfind.regula_falsi` (Illinois), the Newton step's tolerance
    relative to 1 + |theta|. ``fun(pos, x)`` -> (g, slope) at x for the brackets ``pos``
    still active (slope: the expected -g', I or I + 1/sigma^2)."""
    from ..irt.rootfind import regula_falsi

    return regula_falsi(fun, a_x, b_x, a_g, b_g, xtol=xtol, max_iter=max_iter,
                        relative_step=True)
