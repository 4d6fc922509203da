"""Item response functions for the unidimensional 1PL-4PL family.

All functions are pure and vectorized. Item parameters are 1-D arrays of length ``n_items``
(or scalars); ``theta`` is a scalar or an array of any shape. The result has shape
``theta.shape + (n_items,)``: a grid of thetas by all items at once, e.g. ``(n_theta, n_items)``.

Parameterization (as mirt and catR, no 1.702 scaling)::

    P(theta) = c + (u - c) * sigma(z),   z = a (theta - b),   sigma(z) = 1 / (1 + exp(-z))

1PL/Rasch: c = 0, u = 1, common a; 2PL: c = 0, u = 1; 3PL: u = 1; 4PL: all free.

Log-probabilities are computed in log space (``log_expit`` and ``logaddexp``) so that they stay
finite for any finite a and theta; Fisher information is written as products of bounded ratios so
that it never evaluates 0/0.

References
----------
Birnbaum, A. (1968). Some latent trait models and their use in inferring an examinee's ability.
Baker, F. B. and Kim, S.-H. (2004). Item Response Theory: Parameter Estimation Techniques, ch. 2.
Barton, M. A. and Lord, F. M. (1981). An upper asymptote for the three-parameter logistic model.
"""
from __future__ import annotations

import numpy as np
from .special import expit, log_expit

__all__ = [
    "probability",
    "log_probability",
    "dprobability",
    "d2probability",
    "item_information",
    "test_information",
    "expected_score",
    "loglik_matrix",
]


def _prep(theta, a, b, c, u):
    theta = np.asarray(theta, dtype=float)[..., None]
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    c = np.broadcast_to(np.asarray(0.0 if c is None else c, dtype=float), a.shape)
    u = np.broadcast_to(np.asarray(1.0 if u is None else u, dtype=float), a.shape)
    return theta, a, b, c, u


def _z(theta, a, b):
    return a * (theta - b)


def probability(theta, a, b, c=0.0, u=1.0):
    """P(correct | theta) = c + (u - c) sigma(a (theta - b)); shape ``theta.shape + (n_items,)``."""
    theta, a, b, c, u = _prep(theta, a, b, c, u)
    return c + (u - c) * expit(_z(theta, a, b))


def log_probability(theta, a, b, c=0.0, u=1.0):
    """Return ``(log P, log (1 - P))``, both finite for finite inputs with 0 <= c < u <= 1.

    log P = logaddexp(log c, log(u - c) + log sigma(z));
    log Q = logaddexp(log(1 - u), log(u - c) + log sigma(-z)).
    """
    theta, a, b, c, u = _prep(theta, a, b, c, u)
    z = _z(theta, a, b)
    with np.errstate(divide="ignore"):
        log_c = np.log(c)
        log_1mu = np.log1p(-u)
        log_range = np.log(u - c)
    log_p = np.logaddexp(log_c, log_range + log_expit(z))
    log_q = np.logaddexp(log_1mu, log_range + log_expit(-z))
    return log_p, log_q


def dprobability(theta, a, b, c=0.0, u=1.0):
    """dP/dtheta = (u - c) a sigma(z) (1 - sigma(z))."""
    theta, a, b, c, u = _prep(theta, a, b, c, u)
    s = expit(_z(theta, a, b))
    return (u - c) * a * s * (1.0 - s)


def d2probability(theta, a, b, c=0.0, u=1.0):
    """d2P/dtheta2 = (u - c) a^2 sigma(z) (1 - sigma(z)) (1 - 2 sigma(z))."""
    theta, a, b, c, u = _prep(theta, a, b, c, u)
    s = expit(_z(theta, a, b))
    return (u - c) * a * a * s * (1.0 - s) * (1.0 - 2.0 * s)


def item_information(theta, a, b, c=0.0, u=1.0):
    """Fisher information I(theta) = P'(theta)^2 / (P Q) for every (theta, item).

    Written as ``a^2 * r1 * r2 * sigma (1 - sigma)`` with the bounded ratios
    ``r1 = (u - c) sigma / P`` and ``r2 = (u - c)(1 - sigma) / Q`` (both in [0, 1]), evaluated in
    log space, so it is exact for the 2PL (r1 = r2 = 1: I = a^2 P Q) and never 0/0 at extreme
    a or theta. For the 3PL it equals the closed form a^2 (Q/P) ((P - c)/(1 - c))^2.
    """
    theta, a, b, c, u = _prep(theta, a, b, c, u)
    z = _z(theta, a, b)
    ls, lns = log_expit(z), log_expit(-z)
    with np.errstate(divide="ignore"):
        log_range = np.log(u - c)
        log_c = np.log(c)
        log_1mu = np.log1p(-u)
    log_p = np.logaddexp(log_c, log_range + ls)
    log_q = np.logaddexp(log_1mu, log_range + lns)
    log_r = (log_range + ls - log_p) + (log_range + lns - log_q) + ls + lns
    return a * a * np.exp(log_r)


def test_information(theta, a, b, c=0.0, u=1.0):
    """Test information: sum of item information over items; shape ``theta.shape``."""
    return item_information(theta, a, b, c, u).sum(axis=-1)


def expected_score(theta, a, b, c=0.0, u=1.0):
    """Expected number-correct score (test characteristic curve): sum_j P_j(theta)."""
    return probability(theta, a, b, c, u).sum(axis=-1)


def loglik_matrix(responses, log_p, log_q, observed=None):
    """Log-likelihood of every subject at every quadrature node, by two matrix products.

    ``responses``: (n_subjects, n_items) with NaN for missing (scores in [0, 1] allowed, used as
    Bernoulli pseudo-counts); ``log_p``, ``log_q``: (n_nodes, n_items) from :func:`log_probability`.
    Returns (n_subjects, n_nodes): sum over observed items of y log P + (1 - y) log Q.
    ``observed`` may pass a precomputed boolean mask of non-missing cells.
    """
    y = np.asarray(responses, dtype=float)
    if observed is None:
        observed = ~np.isnan(y)
    y1 = np.where(observed, y, 0.0)
    y0 = observed - y1
    return y1 @ log_p.T + y0 @ log_q.T
