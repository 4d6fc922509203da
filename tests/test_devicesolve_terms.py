"""The device solver's log-likelihood and score terms at one theta per subject
(atlascat.irt.devicesolve): ``_loglik_at`` takes P and Q from the same function as
``_terms_at`` (``_pq``), over the same blocks of subjects (``_by_blocks``); the numbers are
those of the formulas written out, to the last bit."""
from __future__ import annotations

import numpy as np
import pytest

from atlascat.irt import devicesolve as ds


def written_out(theta, y1, y0, obs, params):
    """log L, S, I, J of every subject at its theta, the 4PL's formulas in one pass."""
    a, b, c, u = params
    z = np.clip((theta[:, None] - b) * a, -ds._Z_CLIP, ds._Z_CLIP)
    e = np.exp(-z)
    s = 1.0 / (e + 1.0)
    t = e * s
    p, q = c + (u - c) * s, (1.0 - u) + (u - c) * t
    dp = (a * (u - c)) * s * t
    r, curv = dp / (p * q), (t - s) * a
    info = dp * r * obs
    return (np.sum(y1 * np.log(p) + y0 * np.log(q), axis=1),
            np.sum(y1 * (dp / p) - y0 * (p * r), axis=1), np.sum(info, axis=1),
            np.sum(info * curv, axis=1))


@pytest.mark.parametrize("block_cells", [1 << 25, 64])   # one block; many blocks of 2 subjects
def test_loglik_and_terms_are_the_formulas_to_the_bit(monkeypatch, block_cells):
    monkeypatch.setattr(ds, "_BLOCK_CELLS", block_cells)
    rng = np.random.default_rng(0)
    n, m = 37, 30
    params = (np.exp(rng.normal(0, 0.5, m)), rng.normal(0, 1.5, m), rng.uniform(0, 0.3, m),
              rng.uniform(0.85, 1.0, m))
    theta = np.concatenate([rng.normal(0, 1, n - 3), [-40.0, 0.0, 40.0]])   # z clipped too
    obs = (rng.random((n, m)) < 0.8).astype(float)
    y1 = (rng.random((n, m)) < 0.6) * obs
    y0 = obs - y1
    ll, s, i, j = written_out(theta, y1, y0, obs, params)
    np.testing.assert_array_equal(ds._loglik_at(theta, y1, y0, params, np), ll)
    for got, want in zip(ds._terms_at(theta, y1, y0, obs, params, np), (s, i, j)):
        np.testing.assert_array_equal(got, want)
