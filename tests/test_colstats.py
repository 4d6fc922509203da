"""The answer counts of 0/1 matrices (atlascat.irt.colstats) and what shares them: the
constant-item check, the identification checks and the start values' block sums."""
import warnings

import numpy as np
import pytest

from atlascat.irt import calibrate as C
from atlascat.irt import colstats, defaults, start
from atlascat.irt.colstats import binary_counts


def _binary(rng, n=150, m=23, missing=0.4):
    y = (rng.random((n, m)) < rng.uniform(0.1, 0.9, m)).astype(float)
    y[rng.random((n, m)) < missing] = np.nan
    return y


@pytest.mark.parametrize("cells", [1, 7, 100, 1 << 21])
def test_counts_equal_the_masks(rng, cells):
    y = _binary(rng)
    y[3, :] = -0.0                                  # -0.0 is an answer 0
    c = binary_counts(y, cells=cells)
    obs = ~np.isnan(y)
    assert np.array_equal(c.seen, obs.sum(axis=0)) and np.array_equal(c.right, (y == 1).sum(0))
    assert np.array_equal(c.row_seen, obs.sum(axis=1))
    assert np.array_equal(c.row_right, (y == 1).sum(axis=1))
    assert c.has_missing and not binary_counts(np.nan_to_num(y), cells=cells).has_missing


@pytest.mark.parametrize("bad", [0.5, np.inf, -1.0, 2.0])
def test_counts_refuse_other_scores(rng, bad):
    y = _binary(rng)
    y[-1, -1] = bad                                 # in the last block
    assert binary_counts(y, cells=50) is None
    assert binary_counts(y.astype(np.float32)) is None


def test_constant_and_without_equal_the_extremes(rng):
    y = _binary(rng, n=60, m=12)
    y[:, 2] = np.where(np.isnan(y[:, 2]), np.nan, 1.0)   # constant 1
    y[:, 5] = np.where(np.isnan(y[:, 5]), np.nan, 0.0)   # constant 0
    y[:, 7] = np.nan                                      # never answered: not "constant"
    c = binary_counts(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        extremes = np.fmin.reduce(y, axis=0) == np.fmax.reduce(y, axis=0)
    assert np.array_equal(c.constant(), extremes) and extremes[[2, 5]].all()
    kept, direct = c.without(extremes, y), binary_counts(y[:, ~extremes])
    for f in ("seen", "right", "row_seen", "row_right"):
        assert np.array_equal(getattr(kept, f), getattr(direct, f))


def test_identification_problems_the_same_with_counts(rng):
    y = _binary(rng, n=40, m=30)
    y[:, 4] = np.where(np.isnan(y[:, 4]), np.nan, 0.0)
    y[:2, 4] = 1.0                                        # two answers in the rarer category
    c = binary_counts(y)
    for w in (None, rng.integers(1, 3, 40).astype(float)):
        for model in ("2pl", "3pl", "rasch"):
            assert defaults.identification_problems(y, w, model, None, None, counts=c) == \
                defaults.identification_problems(y, w, model, None, None)
    dense = np.nan_to_num(y)
    assert defaults.identification_problems(dense, None, "2pl", None, None,
                                            counts=binary_counts(dense)) == \
        defaults.identification_problems(dense, None, "2pl", None, None)


def _start_by_products(y, w, model):
    """The start values through the full-size zero-filled copy and mask (one product each)."""
    n, m = y.shape
    nan = np.isnan(y)
    obs, yf = (~nan).astype(float), np.where(nan, 0.0, y)
    k, tot = obs.sum(axis=1), yf.sum(axis=1)
    inv = 1.0 / np.maximum(k - 1.0, 1.0)
    ti = tot * inv
    V = obs.T @ np.stack([w, w * ti, w * ti * ti], axis=1)
    U = yf.T @ np.stack([w, w * inv, w * tot * inv**2, w * ti, w * inv**2], axis=1)
    from scipy.special import ndtri

    return start._from_sums(model, *V.T, *U.T, U[:, 1], ndtri)


@pytest.mark.parametrize("model", ["2pl", "3pl", "4pl", "rasch"])
def test_binary_start_values_equal_the_full_products(rng, model, monkeypatch):
    y = _binary(rng, n=400, m=40)
    w = rng.integers(1, 4, 400).astype(float)
    im = C._ItemModel(model)
    want = _start_by_products(y, w, im)
    got = start.start_values(y, w, im)
    given = start.start_values(y, w, im, counts=binary_counts(y))
    assert np.array_equal(got, given)
    fin = np.isfinite(want)
    assert np.array_equal(fin, np.isfinite(got)) and np.array_equal(want[~fin], got[~fin])
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-12, atol=1e-13)
    # many blocks of rows give the same sums to rounding
    monkeypatch.setattr(start, "_binary_sums",
                        lambda v, V, U, cells=3 * 40, f=start._binary_sums: f(v, V, U, cells))
    np.testing.assert_allclose(start.start_values(y, w, im), got, rtol=1e-12, atol=1e-13)


def test_calibrate_shares_the_counts(rng, monkeypatch):
    """calibrate() counts the answers once; a constant item is dropped, as before, and the
    fit equals one on the data without it (to the rounding of the E-step's products, which
    differs between two copies of a matrix)."""
    y = _binary(rng, n=300, m=12, missing=0.3)
    y[:, 3] = np.where(np.isnan(y[:, 3]), np.nan, 1.0)
    calls = []
    real = C.binary_counts
    monkeypatch.setattr(C, "binary_counts", lambda v: calls.append(v.shape) or real(v))
    with pytest.warns(UserWarning, match="left out"):
        res = C.calibrate(y, "2pl", max_iter=5)
    assert calls == [(300, 12)] and res.dropped_items == ["3"]
    ref = C.calibrate(np.delete(y, 3, axis=1), "2pl", max_iter=5)
    np.testing.assert_allclose(np.asarray(res.bank.params), np.asarray(ref.bank.params),
                               rtol=1e-10, atol=1e-12)


def test_chunks_in_threads_give_the_same_counts_and_sums(rng, monkeypatch):
    """Chunks of rows run by threads: the counts exactly, the sums bit for bit whatever the
    number of threads (the chunks depend on the shape only), within rounding of one chunk."""
    y = _binary(rng, n=500, m=30)
    w = rng.random(500) + 0.5
    im = C._ItemModel("3pl")
    one = binary_counts(y), start.start_values(y, w, im)
    monkeypatch.setattr(colstats, "CHUNK_CELLS", 30 * 37)          # 14 chunks of 37 rows
    monkeypatch.setattr(colstats.os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    got = {}
    for threads in (1, 2, 4):
        monkeypatch.setattr(colstats, "MAX_THREADS", threads)
        c = binary_counts(y)
        for f in ("seen", "right", "row_seen", "row_right"):
            assert np.array_equal(getattr(c, f), getattr(one[0], f))
        got[threads] = start.start_values(y, w, im)
    assert np.array_equal(got[1], got[2]) and np.array_equal(got[1], got[4])
    fin = np.isfinite(one[1])
    np.testing.assert_allclose(got[4][fin], one[1][fin], rtol=1e-12, atol=1e-13)
    y[-1, 0] = 0.5                                                  # the last chunk: not 0/1
    assert binary_counts(y) is None


def _codes_whole(values, order):
    """The fingerprint's codes from full-size masks (NaN 0, +0.0 1, 1.0 2), columns in order."""
    bits = values.astype(np.float64).view(np.uint64)
    zero, one = bits == 0, bits == np.uint64(0x3FF0000000000000)
    if zero.sum() + one.sum() + np.isnan(values).sum() != values.size:
        return None
    return (zero.astype(np.uint8) + 2 * one.astype(np.uint8))[:, order]


@pytest.mark.parametrize("chunk", [None, 11 * 13])
def test_fingerprint_codes_by_blocks_equal_the_whole(rng, monkeypatch, chunk):
    y = _binary(rng, n=90, m=11)
    order = np.argsort(np.array([str(i) for i in range(11)]))
    if chunk:
        monkeypatch.setattr(colstats, "CHUNK_CELLS", chunk)
        monkeypatch.setattr(colstats.os, "sched_getaffinity", lambda pid: {0, 1, 2},
                            raising=False)
    assert np.array_equal(C._binary_codes(y, order), _codes_whole(y, order))
    assert np.array_equal(C._binary_codes(y.astype(np.float32), order), _codes_whole(y, order))
    for bad in (-0.0, 0.25):
        z = y.copy()
        z[-1, -1] = bad
        assert C._binary_codes(z, order) is None and _codes_whole(z, order) is None
