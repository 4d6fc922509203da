"""atlascat.irt.special against scipy.special: the logistic function and its log to a unit in the
last place (NumPy's exp and SciPy's may round differently), logsumexp bit for bit (the same
algorithm on the same NumPy calls), edge cases included."""
from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import special as sp

from atlascat.irt import special


@pytest.fixture
def x(rng):
    return np.concatenate([rng.normal(0.0, 5.0, 20000), rng.uniform(-40.0, 40.0, 20000),
                           np.linspace(-800.0, 800.0, 3201), [0.0, -0.0, 1e-300, -1e-300,
                                                              np.inf, -np.inf]])


class TestLogistic:
    def test_expit_matches_scipy_to_one_ulp(self, x):
        ours, ref = special.expit(x), sp.expit(x)
        assert_allclose(ours, ref, rtol=4.5e-16, atol=0)
        assert_array_equal(ours[-2:], [1.0, 0.0])
        assert np.all((ours >= 0) & (ours <= 1))

    def test_log_expit_matches_scipy_to_one_ulp(self, x):
        ours, ref = special.log_expit(x), sp.log_expit(x)
        assert_allclose(ours, ref, rtol=4.5e-16, atol=0)
        assert special.log_expit(-800.0) == -800.0  # exact far in the tail, where log(expit) is -inf
        assert special.log_expit(800.0) == 0.0
        edge = np.array([800.0, np.inf, 0.0, -0.0, np.nan])
        assert_array_equal(np.signbit(special.log_expit(edge)), np.signbit(sp.log_expit(edge)))

    def test_scalars_give_scalars(self):
        for f in (special.expit, special.log_expit):
            v = f(0.3)
            assert np.ndim(v) == 0 and isinstance(v, np.floating)
        assert special.expit(0.0) == 0.5


class TestLogsumexp:
    @pytest.mark.parametrize("axis", [None, 0, 1, -1])
    @pytest.mark.parametrize("keepdims", [False, True])
    def test_equals_scipy_bit_for_bit(self, rng, axis, keepdims):
        a = rng.normal(0.0, 30.0, (50, 61))
        a[3, 7] = a[3, 8] = a[3].max() + 1.0  # a repeated maximum
        ours = special.logsumexp(a, axis=axis, keepdims=keepdims)
        ref = sp.logsumexp(a, axis=axis, keepdims=keepdims)
        assert np.shape(ours) == np.shape(ref)
        assert_array_equal(ours, ref)

    def test_infinities_and_nan(self):
        a = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.nan, 1.0], [2.0, 2.0]])
        assert_array_equal(special.logsumexp(a, axis=1), sp.logsumexp(a, axis=1))
        assert special.logsumexp([-np.inf]) == -np.inf
        assert special.logsumexp(np.log([0.25, 0.25, 0.5])) == pytest.approx(0.0, abs=1e-16)
