"""MAP, ML and WLE of theta in the adaptive test on ordinal items, vectorized over examinees.

The ordinal counterpart of :mod:`atlascat.cat.estimators` (catR's ``thetaEst`` with
``model = "GRM"`` / ``"GPCM"``). An answer in category k of item j adds to the score, the
test information and Warm's J::

    S(theta) = sum_j P'_jk / P_jk                      (d log L / d theta)
    I(theta) = sum_j sum_k P'_jk^2 / P_jk              (Samejima, 1969)
    J(theta) = sum_j sum_k P'_jk P''_jk / P_jk         (Warm, 1989; catR's ``Ji``)

and the estimate is the root of the same estimating equations: "map" S - (theta - mu) /
sigma^2, "ml" S, "wle" S + J / (2 I), inside ``theta_range``. As for binary banks, the sums are
kept at every grid node, the best downward sign change is bracketed on the grid (the bound where
g points out of the range is a candidate: an all-lowest or all-highest pattern's ML estimate is
the bound) and refined by regula falsi with S, I, J summed over each row's answered items at
the current point. SE as catR's ``semTheta``: MAP 1 / sqrt(I + 1 / sigma^2), ML and WLE
1 / sqrt(I) (expected information, as catR for polytomous items).

Magis, D. and Raiche, G. (2012). Random generation of response patterns under computerized
adaptive testing with the R package catR. Journal of Statistical Software, 48(8).
"""
from __future__ import annotations

import numpy as np

from ..irt import polytomous as poly
from . import estimators as E

__all__ = ["node_tables", "terms", "point_estimate"]


def _pieces(models, params, x, warm: bool = True):
    """P'/P per category, I and J per item at the points ``x``: (J, X, K), (J, X), (J, X)
    (J None when not ``warm``); an absent or zero-probability category contributes 0."""
    p = np.nan_to_num(poly.prob(models, params, x))
    d1 = poly.dprob_dtheta(models, params, x, p=p)
    ratio = np.divide(d1, p, out=np.zeros_like(p), where=p > 0)
    jj = np.sum(ratio * poly.d2prob_dtheta2(models, params, x, p=p), axis=2) if warm else None
    return ratio, np.sum(ratio * d1, axis=2), jj


def node_tables(bank, nodes):
    """(dl (J, K, Q), info (J, Q), warm (J, Q)): P'_jk / P_jk, I_j and J_j at every node; an
    answer in category k of item j adds dl[j, k], info[j] and warm[j] to a row's grids."""
    ratio, info, warm = _pieces(bank.models, bank.params, np.asarray(nodes, dtype=float))
    return (np.ascontiguousarray(ratio.transpose(0, 2, 1)), np.ascontiguousarray(info),
            np.ascontiguousarray(warm))


def terms(bank, theta, items, cats, warm: bool = True):
    """S, I, J at one theta per row over its answered items: ``items``, ``cats`` (n, m) the
    items in the order answered and their categories, -1 beyond a row's answers. Each
    (item, theta) pair is evaluated once, at the node 1 with the intercepts shifted so that
    z = a theta + d_k (graded) or k a theta + d_k (GPCM): the same functions as the
    calibration's, and the derivatives in theta. ``warm=False``: J is 0."""
    n, m = items.shape
    answered = items >= 0
    j = np.where(answered, items, 0).reshape(-1)
    pp = bank.params[j].copy()
    shift = pp[:, 0] * (np.repeat(np.asarray(theta, dtype=float), m) - 1.0)
    models = bank.model if bank.model != "mixed" else bank.models[j]   # one string: no per-item test
    gpcm = np.broadcast_to(np.asarray(models, dtype=object) == "gpcm", shift.shape)
    steps = np.where(gpcm[:, None], np.arange(1, pp.shape[1], dtype=float), 1.0)
    pp[:, 1:] += shift[:, None] * steps
    ratio, info, jj = _pieces(models, pp, np.ones(1), warm)              # (n m, 1, K)
    k = np.where(answered, cats, 0).reshape(-1, 1, 1)
    s_item = np.take_along_axis(ratio, k, axis=2)[:, 0, 0]

    def total(v):   # each row's sum over its answered items, by fixed blocks (cat.estimators)
        return E.row_sums(np.where(answered, v.reshape(n, m), 0.0))

    return total(s_item), total(info), (total(jj) if warm else np.zeros(n))


def point_estimate(method, grids, loglik, nodes, bank, items, cats, mu, sd):
    """(theta, I(theta)) of the rows whose node sums ``grids`` (3, n, Q: S, I, J), log L on the
    nodes and answers ``items``, ``cats`` (n, m; :func:`terms`) are given (module docstring)."""
    s_g, i_g, j_g = grids
    g, obj = E.estimating_function(method, s_g, i_g, j_g, loglik, nodes, mu, sd)
    col = E.bracket(g, obj)
    theta = np.where(col == 0, nodes[0], nodes[-1])
    mid = np.flatnonzero((col > 0) & (col < nodes.size))
    warm = method == "wle"
    if mid.size:
        k = col[mid] - 1
        extra = 1.0 / sd ** 2 if method == "map" else 0.0
        i_mid, c_mid = items[mid], cats[mid]

        def fun(pos, x):
            s, i, j = terms(bank, x, i_mid[pos], c_mid[pos], warm=warm)
            return E.estimating_function(method, s, i, j, 0.0, x, mu, sd)[0], i + extra

        theta[mid] = E.refine(fun, nodes[k], nodes[k + 1], g[mid, k], g[mid, k + 1])
    _, info, _ = terms(bank, theta, items, cats, warm=False)
    return theta, info
