"""IRT core: derivatives vs finite differences, information identities, numerical safety."""
import numpy as np
import pytest
from numpy.testing import assert_allclose

from atlascat.irt import models


@pytest.fixture
def params(rng):
    m = 40
    a = rng.uniform(0.3, 3.0, m)
    b = rng.normal(0, 1.5, m)
    c = rng.uniform(0, 0.35, m)
    u = rng.uniform(0.85, 1.0, m)
    return a, b, c, u


class TestProbability:
    def test_shape_grid_by_items(self, params):
        theta = np.linspace(-3, 3, 7)
        assert models.probability(theta, *params).shape == (7, 40)
        assert models.probability(0.5, *params).shape == (40,)
        assert models.item_information(theta[:, None] * np.ones(3), *params).shape == (7, 3, 40)

    def test_formula(self, params):
        a, b, c, u = params
        theta = np.array([-1.3, 0.2, 2.1])
        expected = c + (u - c) / (1 + np.exp(-a * (theta[:, None] - b)))
        assert_allclose(models.probability(theta, a, b, c, u), expected, rtol=1e-14)

    def test_log_probability_consistent_and_finite(self, params):
        theta = np.array([-50.0, -3.0, 0.0, 3.0, 50.0])
        log_p, log_q = models.log_probability(theta, *params)
        p = models.probability(theta, *params)
        assert_allclose(np.exp(log_p), p, rtol=1e-12)
        assert_allclose(np.exp(log_q), 1 - p, rtol=1e-9, atol=1e-15)
        extreme = models.log_probability(np.array([-1e4, 1e4]), [80.0], [0.0], [0.0], [1.0])
        assert np.all(np.isfinite(extreme[0])) and np.all(np.isfinite(extreme[1]))

    def test_defaults_are_2pl(self):
        assert_allclose(models.probability(0.0, [1.0], [0.0]), [0.5])


class TestDerivatives:
    @pytest.mark.parametrize("theta0", [-2.5, -0.4, 0.0, 1.1, 3.0])
    def test_first_and_second_derivative_match_central_differences(self, params, theta0):
        h = 1e-4
        p_plus = models.probability(theta0 + h, *params)
        p_minus = models.probability(theta0 - h, *params)
        fd1 = (p_plus - p_minus) / (2 * h)
        d1_plus = models.dprobability(theta0 + h, *params)
        d1_minus = models.dprobability(theta0 - h, *params)
        fd2 = (d1_plus - d1_minus) / (2 * h)
        d1 = models.dprobability(theta0, *params)
        d2 = models.d2probability(theta0, *params)
        big1 = np.abs(d1) > 1e-6
        big2 = np.abs(d2) > 1e-6
        assert_allclose(d1[big1], fd1[big1], rtol=1e-6)
        assert_allclose(d2[big2], fd2[big2], rtol=1e-6)


class TestInformation:
    def test_2pl_is_a2PQ(self, params):
        a, b, _, _ = params
        theta = np.linspace(-4, 4, 33)
        p = models.probability(theta, a, b)
        assert_allclose(models.item_information(theta, a, b), a**2 * p * (1 - p), rtol=1e-12, atol=1e-13)

    def test_3pl_closed_form(self, params):
        a, b, c, _ = params
        theta = np.linspace(-4, 4, 33)
        p = models.probability(theta, a, b, c)
        closed = a**2 * ((1 - p) / p) * ((p - c) / (1 - c)) ** 2
        assert_allclose(models.item_information(theta, a, b, c), closed, rtol=1e-10, atol=1e-13)

    def test_4pl_equals_definition(self, params):
        theta = np.linspace(-4, 4, 33)
        p = models.probability(theta, *params)
        dp = models.dprobability(theta, *params)
        assert_allclose(models.item_information(theta, *params), dp**2 / (p * (1 - p)), rtol=1e-9)

    def test_information_equals_expected_observed_information(self, params, rng):
        # Fisher information = E[-d2/dtheta2 log L] for one item; check by enumerating y in {0,1}
        theta = 0.7
        a, b, c, u = params
        h = 1e-4

        def loglik(t, y):
            lp, lq = models.log_probability(t, a, b, c, u)
            return y * lp + (1 - y) * lq

        p = models.probability(theta, a, b, c, u)
        expected = np.zeros_like(p)
        for y in (0.0, 1.0):
            d2 = (loglik(theta + h, y) - 2 * loglik(theta, y) + loglik(theta - h, y)) / h**2
            expected += np.where(y == 1, p, 1 - p) * (-d2)
        assert_allclose(models.item_information(theta, a, b, c, u), expected, rtol=1e-4, atol=1e-7)

    def test_safe_at_extremes(self):
        theta = np.array([-1e6, -40.0, 0.0, 40.0, 1e6])
        info = models.item_information(theta, [200.0, 0.01, -3.0], [0.0, 0.0, 0.0],
                                       [0.2, 0.0, 0.1], [1.0, 0.9, 1.0])
        assert np.all(np.isfinite(info)) and np.all(info >= 0)
        assert info[2, 0] > 1000  # steep item is very informative at its difficulty

    def test_test_information_is_sum(self, params):
        theta = np.linspace(-2, 2, 5)
        assert_allclose(models.test_information(theta, *params),
                        models.item_information(theta, *params).sum(-1))

    def test_expected_score(self, params):
        theta = np.array([0.0, 1.0])
        assert_allclose(models.expected_score(theta, *params),
                        models.probability(theta, *params).sum(-1))


def test_loglik_matrix_matches_direct_sum(params, rng):
    a, b, c, u = params
    y = (rng.random((6, 40)) < 0.6).astype(float)
    y[rng.random(y.shape) < 0.3] = np.nan
    nodes = np.linspace(-4, 4, 9)
    lp, lq = models.log_probability(nodes, a, b, c, u)
    ll = models.loglik_matrix(y, lp, lq)
    direct = np.array([[np.nansum(y[i] * lp[q] + (1 - y[i]) * lq[q]) for q in range(9)]
                       for i in range(6)])
    assert_allclose(ll, direct, rtol=1e-12)
