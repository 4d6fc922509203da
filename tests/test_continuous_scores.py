"""Continuous scores in [0, 1] (F1, ROUGE, similarity, a rescaled rating) as a modelled case.

The likelihood: a score y in [0, 1] enters every fit as the Bernoulli quasi-likelihood
y log P + (1 - y) log(1 - P) (Papke and Wooldridge 1996, fractional response; Wedderburn 1974),
whose score equation sum (y - P) dP/dtheta / (P (1 - P)) = 0 is unbiased whenever
E[y | theta] = P(theta), whatever y's distribution. The benchmark predictor's design-based
interval needs no model at all (Des Raj 1956): it covers for any bounded score.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from atlascat.irt.bank import ItemBank
from atlascat.irt.calibrate import Calibrator
from atlascat.irt.quadrature import normal_quadrature
from atlascat.predict import BenchmarkPredictor
from atlascat.predict import estimators as est
from atlascat.responses import ResponseMatrix


def zoib(mu, rng, concentration=4.0, exact=0.3):
    """A zero/one-inflated beta score with mean ``mu``: with probability ``exact`` a 0/1
    answer (Bernoulli(mu)), else Beta(mu k, (1 - mu) k). E[y] = mu; Var[y] = phi mu (1 - mu)
    with phi = exact + (1 - exact) / (k + 1)."""
    m = np.clip(mu, 1e-6, 1 - 1e-6)
    coin = (rng.random(m.shape) < m).astype(float)
    beta = rng.beta(m * concentration, (1.0 - m) * concentration)
    return np.where(rng.random(m.shape) < exact, coin, beta)


def test_quasi_likelihood_recovers_the_mean_function_whatever_the_distribution():
    """With theta known, maximising the fractional quasi-likelihood recovers a logistic mean
    function's (a, b) from zero/one-inflated beta scores and from scores that are a
    deterministic function of theta plus skewed noise: only the mean has to be right."""
    rng = np.random.default_rng(0)
    theta = rng.normal(0.0, 1.0, 40000)
    a, b = 1.3, 0.4
    mu = expit(a * (theta - b))
    draws = {"zoib": zoib(mu, rng),
             "two-point": np.where(rng.random(mu.shape) < 0.5, 0.0, 2.0 * mu).clip(0, 1),
             "bernoulli": (rng.random(mu.shape) < mu).astype(float)}
    draws["two-point"] = np.where(mu < 0.5, draws["two-point"], 1 - np.where(
        rng.random(mu.shape) < 0.5, 0.0, 2.0 * (1 - mu)))          # still mean mu, in [0, 1]
    for name, y in draws.items():
        assert abs(np.mean(y - mu)) < 0.01, name

        def negql(p):
            pr = np.clip(expit(p[0] * (theta - p[1])), 1e-12, 1 - 1e-12)
            return -np.mean(y * np.log(pr) + (1 - y) * np.log1p(-pr))
        fit = minimize(negql, [1.0, 0.0], method="Nelder-Mead",
                       options={"xatol": 1e-6, "fatol": 1e-10})
        assert fit.x[0] == pytest.approx(a, abs=0.06), name
        assert fit.x[1] == pytest.approx(b, abs=0.04), name
        # the score equation is unbiased at the truth: E[sum (y - P) x] = 0
        assert abs(np.mean((y - mu) * theta)) < 0.01, name


def test_em_with_fractional_scores_recovers_the_items():
    """The marginal EM (Calibrator) on zero/one-inflated beta scores with a 2PL mean: with the
    plain quasi-likelihood the difficulties are recovered, the slopes ranked right and
    attenuated (the quasi-posterior treats each score as a coin: with phi < 1 it is flatter
    than the truth); with the extended quasi-likelihood (``dispersion="auto"``, what atlas
    build-bank fits) the slopes are recovered too; the model's item means equal the data's in
    both. 0/1 answers give the same bank either way."""
    rng = np.random.default_rng(1)
    n, J = 3000, 20
    a = rng.lognormal(0.0, 0.3, J)
    b = rng.normal(0.0, 1.0, J)
    theta = rng.normal(0.0, 1.0, n)
    y = zoib(expit(a * (theta[:, None] - b)), rng)
    assert (y == 0).mean() > 0.1 and (y == 1).mean() > 0.1 and ((y > 0) & (y < 1)).mean() > 0.6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bank = Calibrator(model="2pl").fit(ResponseMatrix(y)).bank_
    fa, fb = np.asarray(bank.a), np.asarray(bank.b)
    assert np.corrcoef(fa, a)[0, 1] > 0.95
    assert 0.75 < np.mean(fa / a) < 1.0                      # attenuated, not more
    assert np.sqrt(np.mean((fb - b) ** 2)) < 0.2
    quad = normal_quadrature(61, (-6.0, 6.0))
    p = est.grid_tables(fa, fb, np.zeros(J), np.ones(J), quad.nodes)[0]
    model_means = np.exp(quad.log_weights) @ p
    np.testing.assert_allclose(model_means, y.mean(0), atol=0.02)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = Calibrator(model="2pl", dispersion="auto").fit(ResponseMatrix(y))
    ta, tb = np.asarray(cal.bank_.a), np.asarray(cal.bank_.b)
    assert 0.95 < np.mean(ta / a) < 1.05 and np.sqrt(np.mean((ta - a) ** 2)) < 0.08
    assert np.sqrt(np.mean((tb - b) ** 2)) < 0.08
    phi = np.asarray(cal.result_.settings["dispersion"])
    assert np.all(np.abs(phi - 0.44) < 0.1)                    # exact + (1 - exact) / (k + 1)
    p = est.grid_tables(ta, tb, np.zeros(J), np.ones(J), quad.nodes)[0]
    np.testing.assert_allclose(np.exp(quad.log_weights) @ p, y.mean(0), atol=0.02)
    coins = (rng.random(y.shape) < expit(a * (theta[:, None] - b))).astype(float)
    plain = Calibrator(model="2pl").fit(ResponseMatrix(coins))
    tempered = Calibrator(model="2pl", dispersion="auto").fit(ResponseMatrix(coins))
    np.testing.assert_array_equal(plain.bank_.a, tempered.bank_.a)
    assert "dispersion" not in tempered.result_.settings


def test_item_dispersion_is_one_for_coins_and_phi_for_continuous_scores():
    """phi_j (Pearson ratio about the posterior-predictive mean): about 1 for 0/1 answers,
    about exact + (1 - exact) / (k + 1) = 0.44 for the zero/one-inflated beta."""
    rng = np.random.default_rng(2)
    n, J = 2000, 15
    a, b = rng.lognormal(0, 0.2, J), rng.normal(0, 1, J)
    mu = expit(a * (rng.normal(0, 1, n)[:, None] - b))
    quad = normal_quadrature(61, (-6.0, 6.0))
    tables = est.grid_tables(a, b, np.zeros(J), np.ones(J), quad.nodes)
    coins = (rng.random(mu.shape) < mu).astype(float)
    phi = est.item_dispersion(coins, tables, quad.log_weights, hi=2.0)
    assert np.all(np.abs(phi - 1.0) < 0.12)
    phi_c = est.item_dispersion(zoib(mu, rng), tables, quad.log_weights, hi=2.0)
    assert np.all(np.abs(phi_c - 0.44) < 0.1)


@pytest.fixture(scope="module")
def continuous_world():
    """Continuous scores whose distribution the IRT model does not describe: zero-inflated
    beta with a 2PL mean for the source models, a bank with wrong parameters, and strong
    targets whose scores follow another mean (a different difficulty ordering)."""
    rng = np.random.default_rng(3)
    J = 250
    a, b = rng.lognormal(0, 0.3, J), rng.normal(0, 1.2, J)
    ids = [f"i{j}" for j in range(J)]
    src = zoib(expit(a * (rng.normal(-0.8, 0.5, 60)[:, None] - b)), rng, 3.0, 0.4)
    b_t = b + rng.normal(0, 1.0, J)                            # the targets' own item order
    strong = zoib(expit(a * (rng.normal(1.8, 0.3, 80)[:, None] - b_t)), rng, 3.0, 0.4)
    bank = ItemBank(ids, a * 0.7, np.where(b > 0, b + 1.5, b))
    return dict(source=ResponseMatrix(src, item_ids=ids),
                strong=ResponseMatrix(strong, item_ids=ids), bank=bank)


def test_design_interval_covers_any_bounded_score(continuous_world):
    """The predictor on continuous scores, wrong bank, targets unlike the source: the
    design-based estimate is unbiased and its 95% interval covers (90-99%) with a wrong
    model, for the zero-inflated beta scores and for the same targets' scores transformed
    into a two-point (0 or 1) and a uniform-noise version of any bounded score."""
    w = continuous_world
    pred = BenchmarkPredictor(40).fit(w["bank"], w["source"], rng=0)
    assert pred.dispersion_ is not None and np.median(pred.dispersion_) < 0.8
    rng = np.random.default_rng(9)
    y = w["strong"].values
    variants = {"zoib": y, "squared": y ** 2,
                "noisy": np.clip(y + rng.uniform(-0.3, 0.3, y.shape), 0, 1)}
    for name, v in variants.items():
        targets = ResponseMatrix(v, item_ids=w["strong"].item_ids)
        runs = [pred.replay(targets, rng=s) for s in range(8)]
        err = np.concatenate([(r.design_score - r.full_score).to_numpy() for r in runs])
        se = np.sqrt(np.mean(err ** 2))
        assert abs(err.mean()) < 3 * se / np.sqrt(err.size) + 0.003, name
        cover = np.concatenate([((r.full_score >= r.score_lo) & (r.full_score <= r.score_hi))
                                .to_numpy() for r in runs])
        assert 0.90 <= cover.mean() <= 0.99, (name, cover.mean())


def test_replay_and_live_session_agree_on_continuous_scores(continuous_world):
    """The replay (``atlas simulate``) and a live session (``atlas evaluate``) of one target
    with the same seed ask the same items and give the same prediction on continuous scores
    (the posterior after a fractional answer is the quasi-likelihood's in both)."""
    w = continuous_world
    pred = BenchmarkPredictor(30).fit(w["bank"], w["source"], rng=0)
    one = ResponseMatrix(w["strong"].values[:1], item_ids=w["strong"].item_ids)
    rep = pred.replay(one, rng=5)
    s = pred.session(rng=5)
    y = dict(zip(map(str, w["strong"].item_ids), w["strong"].values[0]))
    while not s.done:
        for item in s.next_items(1):
            s.record(item, y[item])
    p = s.prediction()
    assert p.score == pytest.approx(float(rep.score[0]), abs=1e-12)
    assert (p.lower, p.upper) == pytest.approx((float(rep.score_lo[0]), float(rep.score_hi[0])))
