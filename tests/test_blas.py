"""BLAS threads (atlascat._blas): one thread for small products, the threads given back to large
E-steps, ATLAS_BLAS_THREADS=off as before, and the same results either way."""
from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import atlascat as at
from atlascat import _blas
from atlascat.errors import ConfigError


def blas_threads() -> int:
    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


@pytest.fixture
def two_threads(monkeypatch):
    """BLAS at two threads outside the limit (as OpenBLAS's default on a 2-core machine)."""
    monkeypatch.delenv("ATLAS_BLAS_THREADS", raising=False)
    with threadpool_limits(limits=2, user_api="blas"):
        if blas_threads() != 2:
            pytest.skip("this BLAS cannot run two threads")
        yield


def test_small_products_limits_and_restores(two_threads):
    with _blas.small_products():
        assert blas_threads() == 1
        with _blas.small_products():       # nested: still one, and nothing restored early
            assert blas_threads() == 1
        assert blas_threads() == 1
    assert blas_threads() == 2


def test_large_products_get_the_threads_back(two_threads):
    with _blas.small_products():
        with _blas.large_products(_blas.LARGE_PRODUCT_CELLS):
            assert blas_threads() == 2
        assert blas_threads() == 1
        with _blas.large_products(_blas.LARGE_PRODUCT_CELLS - 1):
            assert blas_threads() == 1


def test_off_leaves_blas_alone(two_threads, monkeypatch):
    monkeypatch.setenv("ATLAS_BLAS_THREADS", "off")
    with _blas.small_products():
        assert blas_threads() == 2
    monkeypatch.setenv("ATLAS_BLAS_THREADS", "3")
    assert _blas.blas_limit() == 3


@pytest.mark.parametrize("value", ["many", "-1"])
def test_bad_setting_is_a_config_error(monkeypatch, value):
    monkeypatch.setenv("ATLAS_BLAS_THREADS", value)
    with pytest.raises(ConfigError, match="ATLAS_BLAS_THREADS"):
        _blas.blas_limit()


def test_library_entry_points_run_limited(two_threads, monkeypatch):
    from atlascat.irt import ability

    seen = []
    real = ability.bank_estep

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(ability, "bank_estep", spy)
    bank = at.ItemBank([f"i{j}" for j in range(5)], np.ones(5), np.linspace(-1, 1, 5))
    ability.eap(np.ones((2, 5)), bank)
    # the adaptive default runs the kernel on the grid and on its check grid: each limited
    assert len(seen) == 2 and set(seen) == {1} and blas_threads() == 2
    seen.clear()
    ability.eap(np.ones((2, 5)), bank, quadrature="fixed")
    assert seen == [1] and blas_threads() == 2


def test_lz_star_many_is_predicts_lz_star():
    from atlascat.catalogue import load_score_link

    link = load_score_link("arc")
    rng = np.random.default_rng(3)
    items = list(link.item_ids)
    answers = [{it: float(rng.random() < 0.7) for it in rng.choice(items, n, replace=False)}
               for n in (5, 12, 40)]
    theta = np.array([0.1, -0.5, 1.2])
    lz = link.lz_star_many(theta, answers)
    assert np.isnan(lz[0])                      # fewer than MIN_FIT_ITEMS answers
    for i in (1, 2):
        assert link.predict(theta[i], 0.3, answers[i]).lz_star == pytest.approx(lz[i], abs=0)
        assert (link.predict(theta[i], 0.3, answers[i], lz_star=float(lz[i]))
                == link.predict(theta[i], 0.3, answers[i]))


def test_same_results_with_and_without_the_limit(two_threads, monkeypatch):
    rng = np.random.default_rng(0)
    y = (rng.random((400, 30)) < 0.6).astype(float)
    fits = {}
    for mode in ("off", "auto"):
        monkeypatch.setenv("ATLAS_BLAS_THREADS", mode)
        bank = at.calibrate(y, model="2pl").bank
        fits[mode] = (bank.params, at.estimate_ability(y, bank, method="eap")["theta"].to_numpy())
    np.testing.assert_allclose(fits["off"][0], fits["auto"][0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(fits["off"][1], fits["auto"][1], rtol=0, atol=1e-8)


def test_threads_share_one_limit_and_the_last_restores_it(monkeypatch):
    """BLAS's thread count belongs to the process: the first block in sets the limit, the last
    out restores it. (OpenBLAS ignores a count set from a worker thread once the main thread has
    set one, so the count seen inside is not asserted here; the CLI sets it from the main
    thread.)"""
    import threading

    monkeypatch.delenv("ATLAS_BLAS_THREADS", raising=False)
    before = blas_threads()
    inside, release = threading.Barrier(3, timeout=60), threading.Event()
    depth = []

    def worker():
        with _blas.small_products():
            inside.wait()
            release.wait(60)

    workers = [threading.Thread(target=worker) for _ in range(2)]
    for w in workers:
        w.start()
    inside.wait()
    depth.append(_blas._state["depth"])
    release.set()
    for w in workers:
        w.join()
    assert depth == [2] and _blas._state["depth"] == 0 and _blas._state["limiter"] is None
    assert blas_threads() == before
