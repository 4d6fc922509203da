"""The observed information in Louis' form (``method="louis"``, the default of
atlascat.irt.information.observed_information: the posterior covariance of the complete-data
score taken exactly) equals Oakes' perturbed E-steps (``method="oakes"``, central differences of
the gradient) on small 2PL, 3PL, 4PL-with-priors, graded, Rasch and multiple-group banks."""
from __future__ import annotations

import numpy as np
import pytest

from atlascat.errors import ConfigError
from atlascat.irt import polytomous as poly
from atlascat.irt.estep import grid_log_weights
from atlascat.irt.information import (binary_dlog_prob, binary_log_prob, category_indices,
                                      observed_information)
from atlascat.irt.quadrature import normal_quadrature

QUAD = normal_quadrature(61)


def _binary(rng, n=600, m=6, c=0.0, u=1.0, theta=None):
    a, d = rng.lognormal(0, 0.3, m), rng.normal(0, 1, m)
    th = rng.normal(size=n) if theta is None else theta
    p = c + (u - c) / (1 + np.exp(-(a * th[:, None] + d)))
    y = (rng.random((n, m)) < p).astype(float)
    y[rng.random((n, m)) < 0.05] = np.nan
    logit = lambda t: np.log(t / (1 - t)) if 0 < t < 1 else (-np.inf if t == 0 else np.inf)  # noqa: E731
    params = np.column_stack([a, d, np.full(m, logit(c)), np.full(m, logit(u))])
    return category_indices(y), params


def _both(*args, **kw):
    fast = observed_information(*args, method="louis", **kw)
    slow = observed_information(*args, method="oakes", **kw)
    np.testing.assert_array_equal(fast.index, slow.index)
    np.testing.assert_allclose(fast.gradient, slow.gradient, rtol=1e-12, atol=1e-9)
    return fast.matrix, slow.matrix


def _close(fast, slow, rtol):
    scale = np.max(np.abs(slow))
    assert np.max(np.abs(fast - slow)) <= rtol * scale
    diag = np.diag(slow)
    assert np.max(np.abs(np.diag(fast) / diag - 1)) <= rtol


@pytest.mark.parametrize("model", ["2pl", "3pl", "4pl"])
def test_binary_louis_equals_oakes(rng, model):
    c, u = {"2pl": (0.0, 1.0), "3pl": (0.15, 1.0), "4pl": (0.1, 0.9)}[model]
    yc, params = _binary(rng, c=c, u=u)
    free = np.zeros(params.shape, dtype=bool)
    free[:, :{"2pl": 2, "3pl": 3, "4pl": 4}[model]] = True
    log_prior = None
    if model == "4pl":   # posterior-mode information: the prior's Hessian is added alike
        def log_prior(p):
            return -0.5 * (np.log(p[:, 0]) / 0.5) ** 2 - 0.5 * (p[:, 2] + 2) ** 2 \
                - 0.5 * (p[:, 3] - 2) ** 2
    w = rng.integers(1, 4, len(yc)).astype(float)        # pattern frequencies
    fast, slow = _both(binary_log_prob, params, free, yc, w, QUAD.nodes, QUAD.log_weights,
                       dlog_prob=binary_dlog_prob, log_prior=log_prior)
    _close(fast, slow, 1e-6)


def test_graded_and_binary_mixed_louis_equals_oakes(rng):
    n = 500
    th = rng.normal(size=n)
    cuts = [-1.2, 0.0, 1.1]
    cols = [(rng.random(n) < 1 / (1 + np.exp(-(1.2 * th + d)))).astype(float)
            for d in (-0.5, 0.3)]
    cols += [np.digitize(1.1 * th + rng.logistic(size=n), cuts).astype(float) for _ in range(4)]
    y = np.column_stack(cols)
    y[rng.random(y.shape) < 0.05] = np.nan
    nan = np.nan
    P = np.array([[1.2, -0.5, nan, nan], [1.2, 0.3, nan, nan]] + [[1.1] + [-c for c in cuts]] * 4)
    fast, slow = _both(lambda p, x: poly.log_prob("graded", p, x), P, np.isfinite(P),
                       category_indices(y), None, QUAD.nodes, QUAD.log_weights)
    _close(fast, slow, 1e-6)


def test_rasch_latent_variance_louis_equals_oakes(rng):
    yc, params = _binary(rng, n=800, m=5, theta=rng.normal(0, 1.2, 800))
    params[:, 0] = 1.0
    free = np.zeros(params.shape, dtype=bool)
    free[:, 1] = True
    fast, slow = _both(binary_log_prob, params, free, yc, None, QUAD.nodes,
                       grid_log_weights(QUAD.nodes, 1.44), dlog_prob=binary_dlog_prob,
                       latent_log_weights=lambda v: grid_log_weights(QUAD.nodes, v),
                       latent_variance=1.44)
    # the latent variance's second derivative: Oakes' nested central differences round to
    # ~1e-6 of it; Louis' form takes it by fourth-order differences
    _close(fast, slow, 5e-6)


def test_multiple_group_means_and_variances_louis_equals_oakes(rng):
    groups = rng.integers(0, 3, 900)
    th = rng.normal(np.array([0.0, 0.5, -0.4])[groups], np.sqrt([1.0, 1.5, 0.7])[groups])
    yc, params = _binary(rng, n=900, m=6, theta=th)
    free = np.zeros(params.shape, dtype=bool)
    free[:, :2] = True
    nodes = np.linspace(-6, 6, 61)

    def log_weights(p):
        mu = np.concatenate([[0.0], p[0::2]])
        var = np.concatenate([[1.0], p[1::2]])
        return np.stack([grid_log_weights(nodes - m, v) for m, v in zip(mu, var)])

    phi = np.array([0.5, 1.5, -0.4, 0.7])
    fast, slow = _both(binary_log_prob, params, free, yc, None, nodes, log_weights(phi),
                       dlog_prob=binary_dlog_prob, latent_log_weights=log_weights,
                       latent_params=phi, groups=groups)
    _close(fast, slow, 5e-6)


def test_unknown_method_is_refused(rng):
    yc, params = _binary(rng, n=50, m=3)
    with pytest.raises(ConfigError, match="louis, oakes"):
        observed_information(binary_log_prob, params, np.isfinite(params), yc, None,
                             QUAD.nodes, QUAD.log_weights, method="fast")


@pytest.mark.parametrize("case", ["2pl-prior", "graded", "groups"])
def test_louis_blocks_of_subjects_give_the_same_matrix(rng, case):
    """Louis' form taken a few subjects at a time (a tiny ``block_bytes``: blocks of 1-3
    subjects, one node per product) equals the one-block matrix to 1e-12 relative."""
    kw = {}
    if case == "graded":
        th = rng.normal(size=300)
        y = np.column_stack([np.digitize(1.1 * th + rng.logistic(size=300), [-1.2, 0.0, 1.1])
                             for _ in range(4)]).astype(float)
        y[rng.random(y.shape) < 0.05] = np.nan
        params = np.array([[1.1, 1.2, 0.0, -1.1]] * 4)
        args = (lambda p, x: poly.log_prob("graded", p, x), params, np.isfinite(params),
                category_indices(y), None)
    elif case == "groups":
        groups = rng.integers(0, 2, 300)
        yc, params = _binary(rng, n=300, m=5, theta=rng.normal(0.4 * groups, 1.0))
        free = np.zeros(params.shape, dtype=bool)
        free[:, :2] = True

        def lw(p):
            return np.stack([QUAD.log_weights, grid_log_weights(QUAD.nodes - p[0], p[1])])

        args = (binary_log_prob, params, free, yc, rng.integers(1, 4, 300).astype(float))
        kw = dict(dlog_prob=binary_dlog_prob, latent_log_weights=lw,
                  latent_params=np.array([0.4, 1.2]), groups=groups)
    else:
        yc, params = _binary(rng, n=300, m=6)
        free = np.zeros(params.shape, dtype=bool)
        free[:, :2] = True
        args = (binary_log_prob, params, free, yc, rng.integers(1, 4, 300).astype(float))
        kw = dict(dlog_prob=binary_dlog_prob,
                  log_prior=lambda p: -0.5 * (np.log(p[:, 0]) / 0.5) ** 2)
    log_w = QUAD.log_weights if case != "groups" else kw["latent_log_weights"](
        kw["latent_params"])
    one = observed_information(*args, QUAD.nodes, log_w, **kw)
    n_par = len(one.index)
    tiny = observed_information(*args, QUAD.nodes, log_w, block_bytes=8.0 * 4 * n_par * 2.5,
                                **kw)
    scale = np.max(np.abs(one.matrix))
    assert np.max(np.abs(tiny.matrix - one.matrix)) <= 1e-12 * scale
    np.testing.assert_allclose(tiny.gradient, one.gradient, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_array_equal(tiny.matrix, tiny.matrix.T)
