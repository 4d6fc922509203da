"""irt/arrays.namespace: NumPy arrays take a fast path (no array_api_compat import) and the
optional import is attempted once per process, failed or not (a core-only install otherwise
retried the failed import on every kernel call)."""
import builtins

import numpy as np
import pytest

from atlascat.irt import arrays


@pytest.fixture
def fresh_cache(monkeypatch):
    """An empty import cache for the test, restored afterwards."""
    monkeypatch.setattr(arrays, "_COMPAT", [])
    return arrays


def _count_compat_imports(monkeypatch, fail: bool):
    calls = []
    real_import = builtins.__import__

    def spy(name, *args, **kwargs):
        if name == "array_api_compat":
            calls.append(name)
            if fail:
                raise ImportError("array_api_compat is not installed (simulated)")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", spy)
    return calls


def test_numpy_arrays_do_not_import_array_api_compat(fresh_cache, monkeypatch):
    calls = _count_compat_imports(monkeypatch, fail=True)
    assert arrays.namespace(np.ones(3)) is np
    assert arrays.namespace(np.ones(3), np.float64(1.0), 2.0, None) is np
    assert calls == []
    assert arrays._COMPAT == []   # not even tried


def test_a_failed_import_is_attempted_once(fresh_cache, monkeypatch):
    calls = _count_compat_imports(monkeypatch, fail=True)
    for _ in range(5):
        assert arrays._compat() is None
    assert calls == ["array_api_compat"]


def test_without_array_api_compat_other_arrays_use_their_own_namespace(fresh_cache,
                                                                      monkeypatch):
    calls = _count_compat_imports(monkeypatch, fail=True)

    class Space:
        pass

    class Arr:
        def __array_namespace__(self):
            return Space

    for _ in range(3):
        assert arrays.namespace(Arr(), Arr()) is Space
    assert calls == ["array_api_compat"]


def test_a_successful_import_is_cached(fresh_cache, monkeypatch):
    pytest.importorskip("array_api_compat")
    calls = _count_compat_imports(monkeypatch, fail=False)
    first = arrays._compat()
    assert first is not None and arrays._compat() is first
    assert len(calls) == 1


def test_no_alias_of_the_arrays_module_is_left():
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("atlascat.irt._xp")


def test_has_nan_and_the_transposed_mask():
    """has_nan, block by block, finds a NaN in any block (infinities are not NaN);
    observed_t(v) @ w is the boolean mask's product (~isnan(v)).T @ w bit for bit."""
    rng = np.random.default_rng(3)
    v = rng.random((257, 77))
    v[5, 6] = np.inf
    for cells in (1 << 20, 77 * 10, 5):                 # one block; 10 rows; 1 row a block
        assert not arrays.has_nan(v, cells) and not arrays.has_nan(np.asfortranarray(v), cells)
        for r in (0, 129, 256):
            u = v.copy()
            u[r, 70] = np.nan
            assert arrays.has_nan(u, cells) and arrays.has_nan(np.asfortranarray(u), cells)
    v[100, 7] = np.nan
    v[rng.random(v.shape) < 0.4] = np.nan
    w, W = rng.random(257), rng.random((257, 3))
    ot = arrays.observed_t(v)
    assert ot.shape == (77, 257) and ot.dtype == np.float64 and ot.flags.c_contiguous
    assert np.array_equal(arrays.observed_t(v, np.isnan(v), rows=7), ot)   # 257 = 36 x 7 + 5
    for a in (w, W):
        assert np.array_equal(ot @ a, (~np.isnan(v)).T @ a)
