"""The EM of the extended quasi-likelihood (``item_scale`` = 1 / phi_j, continuous scores).

The objective it reports is sum_s log sum_q pi_q prod_j exp([y log P_j + (1 - y) log Q_j] /
phi_j) + sum_j log p(a_j); its M-step takes the UNscaled expected counts, so what it maximizes
has the log prior divided by phi_j (the prior tempered to p(a_j)^(1 / phi_j)): the slopes
shrink towards the prior and the reported objective is not stationary at the solution. The
M-step on counts scaled by 1 / phi_j (the prior at its stated weight) was measured on LongBench
and not kept by the rule set before measuring (benchmarks/results/longbench.md, "The M-step of
the extended quasi-likelihood", 2026-11-29): the two tests of that estimator are strict xfails
that document the defect (each passes with the scaled counts, and fails today); the others
pin what ships.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import expit, logsumexp

from atlascat.irt.calibrate import Calibrator
from atlascat.irt.dispersion import draw_scores
from atlascat.irt.em import fit_joint
from atlascat.irt.itemmodel import ItemModel
from atlascat.irt.priors import parse_prior
from atlascat.irt.quadrature import normal_quadrature
from atlascat.responses import ResponseMatrix


def beta_scores(n, J, phi, seed):
    """Beta scores with a 2PL mean and variance phi P Q: (scores, slopes, thetas)."""
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.0, 0.3, J)
    b = rng.normal(0.0, 1.0, J)
    theta = rng.normal(0.0, 1.0, n)
    y = draw_scores(expit(a * (theta[:, None] - b)), phi, rng.random((n, J)))
    return y, a, theta


def objective(th, y, scale, model, quad, prior_weight=1.0):
    """The EM's objective at the internal parameters ``th``: the tempered marginal
    log-likelihood plus the items' log priors times ``prior_weight`` (every cell observed)."""
    log_p, log_q = model.node_logs(th, quad.nodes, np)            # (items, nodes)
    ll = (y @ (log_p * scale[:, None]) + (1.0 - y) @ (log_q * scale[:, None])
          + quad.log_weights[None, :])
    return float(logsumexp(ll, axis=1).sum()
                 + (prior_weight * model.log_prior(th, np)).sum())


def numerical_gradient(th, fun, h=1e-5):
    """Central differences of ``fun`` in the free columns (slope, intercept) of every item."""
    grad = np.zeros((th.shape[0], 2))
    for j in range(th.shape[0]):
        for k in (0, 1):
            up, dn = th.copy(), th.copy()
            up[j, k] += h
            dn[j, k] -= h
            grad[j, k] = (fun(up) - fun(dn)) / (2 * h)
    return grad


def tempered_fit(accelerate=False):
    y, _, _ = beta_scores(40, 25, 0.15, seed=3)
    scale = np.full(y.shape[1], 1.0 / 0.15)
    model = ItemModel("2pl", parse_prior("lognorm(0,1)", "a"))
    fit = fit_joint(y, None, model, item_scale=scale, accelerate=accelerate, tol=1e-7,
                    max_iter=3000, quadpts=61, theta_range=(-6.0, 6.0))
    return fit, y, scale, model, normal_quadrature(61, (-6.0, 6.0))


def test_shipped_tempered_em_maximizes_the_likelihood_with_the_prior_divided_by_phi():
    """What ships: the solution is a stationary point of the tempered marginal log-likelihood
    plus sum_j log p(a_j) / phi_j, not of the objective reported (prior counted once)."""
    fit, y, scale, model, quad = tempered_fit()
    assert fit["converged"]
    th = fit["th"]
    assert abs(objective(th, y, scale, model, quad) - fit["log_posterior"]) < 1e-6
    tempered = numerical_gradient(th, lambda t: objective(t, y, scale, model, quad, scale))
    assert np.max(np.abs(tempered)) < 0.05, np.max(np.abs(tempered))


@pytest.mark.xfail(strict=True, reason="known defect: the M-step takes unscaled expected "
                   "counts (benchmarks/results/longbench.md, 2026-11-29)")
def test_tempered_em_is_monotone_and_stops_where_its_objective_is_stationary():
    plain, y, scale, model, quad = tempered_fit()
    assert plain["converged"]
    trace = plain["trace"]
    assert np.all(np.diff(trace) >= -1e-8 * np.abs(trace[1:]))    # a (generalized) EM
    th = plain["th"]
    assert abs(objective(th, y, scale, model, quad) - plain["log_posterior"]) < 1e-6
    # the gradient of the reported objective in every free parameter is ~0 at the solution
    # (the M-step on unscaled counts, prior at 1 / phi times its weight, leaves it at 8.1)
    grad = numerical_gradient(th, lambda t: objective(t, y, scale, model, quad))
    assert np.max(np.abs(grad)) < 0.05, np.max(np.abs(grad))
    accel = tempered_fit(accelerate=True)[0]
    assert abs(accel["log_posterior"] - plain["log_posterior"]) < 1e-4


def test_item_scale_one_is_the_bernoulli_fit():
    """0/1 answers (no item_scale) and item_scale = 1 give the same fit."""
    y, _, _ = beta_scores(40, 25, 0.15, seed=3)
    model = ItemModel("2pl", parse_prior("lognorm(0,1)", "a"))
    coins = (np.random.default_rng(4).random(y.shape) < y).astype(float)
    one = fit_joint(coins, None, model)
    ones = fit_joint(coins, None, model, item_scale=np.ones(y.shape[1]))
    np.testing.assert_allclose(ones["th"], one["th"], rtol=0, atol=1e-12)


@pytest.mark.xfail(strict=True, reason="known defect: the M-step takes unscaled expected "
                   "counts (benchmarks/results/longbench.md, 2026-11-29)")
def test_extended_quasi_likelihood_recovers_slopes_of_beta_scores_under_the_default_prior():
    """100 models x 80 items of Beta scores (phi 0.15) under the default 2PL (slope prior
    lognormal(0, 1)): the slopes, on the true thetas' scale, come out within 25% of the truth
    on average with the counts scaled by 1 / phi_j (0.94 and 0.70 x, mean 0.82); the M-step
    on unscaled counts gives 0.63 and 0.50 x, thetas spread 1.7-1.8 x as wide."""
    ratios = []
    for seed in (0, 1):
        y, a, theta = beta_scores(100, 80, 0.15, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cal = Calibrator(dispersion="auto").fit(ResponseMatrix(y))
        assert cal.result_.model == "2pl" and np.median(cal.result_.settings["dispersion"]) < 0.2
        ratios.append(np.mean(np.asarray(cal.bank_.a) / a) * theta.std())
        assert np.std(cal.result_.theta) < 1.5 * theta.std()
    assert np.mean(ratios) > 0.75, ratios
