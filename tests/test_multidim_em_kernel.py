"""The blocked E-step of the multidimensional 2PL's EM (irt/multidimem.py) against the plain
computation: every subject at every node, log-sum-exp, weighted expected counts."""
import numpy as np
import pytest
from scipy.special import log_expit, logsumexp

from atlascat.irt.multidim import product_grid
from atlascat.irt.multidimem import GridEStep


def _reference(y, obs, w, z, logw):
    y1 = np.where(obs, y, 0.0)
    y0 = obs - y1
    ll = y1 @ log_expit(z).T + y0 @ log_expit(-z).T + logw
    norm = logsumexp(ll, axis=1)
    post = np.exp(ll - norm[:, None]) * w[:, None]
    return float(w @ norm), post.T @ y1, post.T @ obs.astype(float)


def _answers(n, j, missing, seed):
    rng = np.random.default_rng(seed)
    y = (rng.random((n, j)) < 0.6).astype(float)
    y[n // 2:] = y[: n - n // 2]                    # repeated patterns, merged by the kernel
    y[rng.random(y.shape) < missing] = np.nan
    return y, ~np.isnan(y), rng.integers(1, 4, n).astype(float)


@pytest.mark.parametrize("missing", [0.0, 0.1])
@pytest.mark.parametrize("k", [2, 3])
def test_blocked_estep_equals_the_plain_computation(k, missing):
    y, obs, w = _answers(300, 9, missing, seed=k)
    nodes, logw = product_grid(k, 7)
    rng = np.random.default_rng(5)
    estep = GridEStep(y, obs, w, logw, block_bytes=8 * len(logw) * 37)   # several blocks
    assert estep.block == 37 and len(estep.weights) < len(y)
    for _ in range(3):   # the first call and the shifted later ones (new logits each time)
        z = nodes @ rng.normal(0, 1.5, (9, k)).T + rng.normal(0, 1, 9)
        loglik, r, n = estep(z)
        want = _reference(y, obs, w, z, logw)
        assert loglik == pytest.approx(want[0], rel=1e-12)
        np.testing.assert_allclose(r, want[1], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(np.broadcast_to(n, want[2].shape), want[2], rtol=1e-10, atol=1e-12)


def test_a_shift_far_off_falls_back_to_row_maxima():
    y, obs, w = _answers(120, 6, 0.1, seed=3)
    nodes, logw = product_grid(2, 9)
    z = nodes @ np.full((6, 2), 0.8).T
    for bad in (900.0, -900.0):   # exp would overflow / underflow to zero
        estep = GridEStep(y, obs, w, logw)
        estep.data[:, -1] = bad
        loglik, r, _ = estep(z)
        want = _reference(y, obs, w, z, logw)
        assert loglik == pytest.approx(want[0], rel=1e-12)
        np.testing.assert_allclose(r, want[1], rtol=1e-10, atol=1e-12)

