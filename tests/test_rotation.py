"""Oblique rotation of the multidimensional 2PL (oblimin, geomin) against mirt 1.45.1.

Fixtures in tests/data/oblimin (made by make_fixtures.R there): a simulated 2-factor 2PL set
(2000 subjects x 12 items, factor correlation 0.5, four cross-loadings), mirt's fit of it
(``mirt(y, 2, itemtype='2PL')``) with its unrotated standardized loadings and
``summary(mod, rotate=...)``'s rotF and fcor for oblimin, geominQ, oblimin with gam = 0.5 and
varimax; and mirt's ``Rotate`` of a fixed 15 x 3 loading matrix (oblimin, geominQ)."""
import itertools
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.errors import ConfigError
from atlascat.irt.multidim import MultidimBank, MultidimIRT
from atlascat.irt.rotation import (factor_loadings, geomin, oblimin, oblique, rotate,
                                   standardized_loadings)

DATA = Path(__file__).parent / "data" / "oblimin"


def _matched(L, phi, ref_L, ref_phi):
    """Largest |difference| of loadings and of Phi over the column orders and signs of (L, phi):
    a rotation is identified up to both, and the same reordering applies to Phi's rows and
    columns."""
    k = L.shape[1]
    best = (np.inf, np.inf)
    for order in itertools.permutations(range(k)):
        for signs in itertools.product((1.0, -1.0), repeat=k):
            s = np.array(signs)
            dl = np.abs(L[:, order] * s - ref_L).max()
            dp = np.abs(phi[np.ix_(order, order)] * np.outer(s, s) - ref_phi).max()
            if dl < best[0]:
                best = (dl, dp)
    return best


@pytest.fixture(scope="module")
def mirt2():
    return (pd.read_csv(DATA / "corr2f_mirt_loadings.csv"),
            pd.read_csv(DATA / "corr2f_mirt_phi.csv").set_index("rotation").phi12)


def _phi2(r):
    return np.array([[1.0, r], [r, 1.0]])


@pytest.mark.parametrize("name,method,kwargs", [
    ("oblimin", "oblimin", {}), ("geomin", "geomin", {}), ("biquartimin", "oblimin", {"gamma": 0.5}),
])
def test_rotation_of_mirts_loadings_equals_mirts_summary(mirt2, name, method, kwargs):
    ref, phi12 = mirt2
    F = ref[["F1", "F2"]].to_numpy()
    assert np.abs(standardized_loadings(ref[["a1", "a2"]].to_numpy()) - F).max() < 1e-12
    res = rotate(F, method, **kwargs)
    assert res.converged
    dl, dp = _matched(res.loadings, res.phi, ref[[f"{name}1", f"{name}2"]].to_numpy(),
                      _phi2(phi12[name]))
    assert dl < 1e-4 and dp < 1e-4, (dl, dp)   # measured: 1e-15 (the same iterates as GPFoblq)


@pytest.mark.parametrize("name", ["oblimin", "geomin"])
def test_three_factors_match_mirts_rotate(name):
    ref = pd.read_csv(DATA / "three_mirt_loadings.csv")
    phi = pd.read_csv(DATA / "three_mirt_phi.csv")
    res = rotate(ref[["F1", "F2", "F3"]].to_numpy(), name)
    ref_phi = phi[phi.rotation == name][["phi1", "phi2", "phi3"]].to_numpy()
    dl, dp = _matched(res.loadings, res.phi, ref[[f"{name}{i}" for i in (1, 2, 3)]].to_numpy(),
                      ref_phi)
    assert dl < 1e-4 and dp < 1e-4, (dl, dp)


def test_varimax_summary_matches_mirt(mirt2):
    ref, _ = mirt2
    fl = factor_loadings(ref[["a1", "a2"]].to_numpy(), ref.item_id, "varimax")
    dl, dp = _matched(fl.table[["F1", "F2"]].to_numpy(), fl.phi.to_numpy(),
                      ref[["varimax1", "varimax2"]].to_numpy(), np.eye(2))
    assert dl < 1e-4 and dp == 0


def test_end_to_end_atlas_fit_then_oblimin_matches_mirt(mirt2):
    """ATLAS's own fit (plain ML, as mirt; the bank is varimax-rotated) then mirt's summary:
    measured 3.7e-4 on the loadings (oblimin; geomin 3.3e-4) and 7.4e-5 on Phi; the fits
    themselves differ by 8e-5 on the communalities and 3e-5 on the log-likelihood."""
    ref, phi12 = mirt2
    y = pd.read_csv(DATA / "corr2f.csv", index_col=0)
    m = MultidimIRT(2, prior_a_sd=None, prior_d_sd=None, tol=1e-5).fit(y)
    assert m.loglik_ == pytest.approx(pd.read_csv(DATA / "corr2f_mirt_phi.csv").logLik[0], abs=1e-3)
    for name in ("oblimin", "geomin"):
        fl = m.bank_.factor_loadings(name)
        assert list(fl.table.index) == list(ref.item_id)
        assert np.abs(fl.table.h2.to_numpy() - ref.h2.to_numpy()).max() < 1e-3
        dl, dp = _matched(fl.table[["F1", "F2"]].to_numpy(), fl.phi.to_numpy(),
                          ref[[f"{name}1", f"{name}2"]].to_numpy(), _phi2(phi12[name]))
        assert dl < 1e-3 and dp < 1e-3, (name, dl, dp)


def test_walk_fixture_oblimin_matches_too():
    """The 20-item set of tests/data/walk_mdim carries mirt's oblimin loadings and Phi."""
    walk = Path(__file__).parent / "data" / "walk_mdim"
    ref = pd.read_csv(walk / "twofactor_mirt_items.csv")
    phi12 = pd.read_csv(walk / "twofactor_mirt_fit.csv").oblimin_phi12[1]
    fl = MultidimBank(ref.item_id, ref[["a1", "a2"]].to_numpy(), ref.d).factor_loadings()
    dl, dp = _matched(fl.table[["F1", "F2"]].to_numpy(), fl.phi.to_numpy(),
                      ref[["f1_oblimin", "f2_oblimin"]].to_numpy(), _phi2(phi12))
    assert dl < 1e-4 and dp < 1e-4


def _random_orthogonal(k, rng):
    q, r = np.linalg.qr(rng.normal(size=(k, k)))
    return q * np.sign(np.diag(r))


def _criterion(L, method):
    """The criteria written out: quartimin 1/4 sum_j sum_{k != l} l_jk^2 l_jl^2; geomin
    sum_j (prod_k (l_jk^2 + 0.01))^(1/K)."""
    L2 = L**2
    if method == "oblimin":
        return ((L2.sum(1) ** 2 - (L2**2).sum(1)) / 4).sum()
    return np.prod(L2 + 0.01, axis=1).__pow__(1 / L.shape[1]).sum()


@pytest.mark.parametrize("method", ["oblimin", "geomin"])
def test_criterion_decreases_to_a_local_minimum_and_phi_is_a_correlation(method):
    rng = np.random.default_rng(3)
    A = pd.read_csv(DATA / "three_mirt_loadings.csv")[["F1", "F2", "F3"]].to_numpy()
    res = oblique(A, method)
    assert res.converged and res.criterion == pytest.approx(_criterion(res.loadings, method), rel=1e-12)
    assert np.allclose(np.diag(res.phi), 1.0) and np.allclose(res.phi, res.phi.T)
    assert np.linalg.eigvalsh(res.phi).min() > 0
    # A theta = L theta*: the pattern times T^T gives back the unrotated loadings
    assert np.abs(res.loadings @ res.T.T - A).max() < 1e-12
    # each iteration lowers the criterion, from its value at T = I
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        steps = [oblique(A, method, max_iter=i).criterion for i in range(6)]
    values = [_criterion(A, method), *steps]
    assert all(b < a for a, b in zip(values, values[1:])) and res.criterion <= values[-1]
    # no nearby admissible T (unit-length columns) has a lower criterion
    for _ in range(20):
        X = res.T + 1e-3 * rng.normal(size=res.T.shape)
        X /= np.sqrt((X**2).sum(0))
        assert _criterion(A @ np.linalg.inv(X).T, method) >= res.criterion - 1e-12


@pytest.mark.parametrize("method", ["oblimin", "geomin"])
def test_recovers_a_hidden_oblique_simple_structure(method):
    """Pattern P (each item on one of three factors) with factor correlations Phi; the unrotated
    loadings A = P C Q (C C^T = Phi, Q a random rotation) fit the same model. Quartimin's
    criterion is zero at P, so it recovers P and Phi exactly; geomin's delta pulls a little."""
    rng = np.random.default_rng(11)
    P = np.zeros((18, 3))
    for f in range(3):
        P[6 * f:6 * f + 6, f] = rng.uniform(0.5, 0.8, 6)
    Phi = np.array([[1.0, 0.4, 0.3], [0.4, 1.0, 0.5], [0.3, 0.5, 1.0]])
    A = P @ np.linalg.cholesky(Phi) @ _random_orthogonal(3, rng)
    res = rotate(A, method)
    dl, dp = _matched(res.loadings, res.phi, P, Phi)
    tol = (1e-4, 1e-4) if method == "oblimin" else (0.02, 0.03)
    assert dl < tol[0] and dp < tol[1], (dl, dp)
    assert oblimin(A).criterion < 1e-9


def test_kaiser_normalization_and_gamma_change_the_solution():
    A = pd.read_csv(DATA / "three_mirt_loadings.csv")[["F1", "F2", "F3"]].to_numpy()
    plain, kaiser, bi = oblimin(A), oblimin(A, normalize=True), oblimin(A, gamma=0.5)
    assert kaiser.converged and np.abs(kaiser.loadings @ kaiser.T.T - A).max() < 1e-12
    assert 1e-5 < np.abs(plain.loadings - kaiser.loadings).max()
    assert bi.phi[0, 1] != pytest.approx(plain.phi[0, 1], abs=1e-4)
    assert geomin(A, delta=0.1).phi[0, 1] != pytest.approx(geomin(A).phi[0, 1], abs=1e-4)


@pytest.mark.parametrize("call", [
    lambda A: rotate(A, "promax"), lambda A: oblique(A, "varimax"), lambda A: oblique(A[:, :1]),
    lambda A: geomin(A, delta=0.0), lambda A: oblique(A, start=np.eye(2)),
    lambda A: oblique(A, tol=0.0), lambda A: oblique(A, max_iter=-1), lambda A: oblique(A, max_iter=2.5),
    lambda A: MultidimIRT(2, rotation="oblimin").fit(np.zeros((5, 4))),
])
def test_bad_rotation_settings_are_one_line_config_errors(call):
    A = np.random.default_rng(0).normal(size=(6, 3))
    with pytest.raises(ConfigError) as err:
        call(A)
    assert "\n" not in str(err.value)


def test_one_factor_and_none_leave_the_loadings():
    A = np.random.default_rng(0).normal(size=(6, 1))
    res = rotate(A, "oblimin")
    assert res.method == "none" and np.allclose(np.abs(res.loadings), np.abs(A))
    A2 = np.random.default_rng(1).normal(size=(6, 2))
    none = rotate(A2, "none")
    assert np.allclose(np.abs(none.loadings), np.abs(A2)) and np.array_equal(none.phi, np.eye(2))
    assert (none.loadings[np.abs(none.loadings).argmax(0), [0, 1]] > 0).all()   # mirt's signs


def test_atlas_info_shows_rotated_loadings_and_factor_correlations(tmp_path, capsys):
    from atlascat.cli import main

    ref, phi12 = pd.read_csv(DATA / "corr2f_mirt_loadings.csv"), None
    MultidimBank(ref.item_id, ref[["a1", "a2"]].to_numpy(), ref.d).write(tmp_path / "mb.csv")
    assert main(["info", str(tmp_path / "mb.csv")]) == 0
    out = capsys.readouterr().out
    assert "oblimin rotation" in out and "factor correlations" in out
    phi12 = pd.read_csv(DATA / "corr2f_mirt_phi.csv").set_index("rotation").phi12
    assert f"{phi12['oblimin']:.3f}" in out
    assert main(["info", str(tmp_path / "mb.csv"), "--rotate", "geomin", "--json"]) == 0
    import json

    got = json.loads(capsys.readouterr().out)
    assert got["kind"] == "multidim_bank" and got["rotation"] == "geomin"
    assert got["factor_correlations"][0][1] == pytest.approx(phi12["geomin"], abs=1e-6)
    assert got["loadings"]["i01"]["F2"] == pytest.approx(ref.geomin2[0], abs=1e-6)
    for argv, needle in ((["--rotate", "promax"], "unknown rotation 'promax'"),
                         (["--theta", "0"], "2-dimensional 2PL bank")):
        assert main(["info", str(tmp_path / "mb.csv"), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and "\n" not in err
    resp = tmp_path / "resp.csv"
    pd.read_csv(DATA / "corr2f.csv").head(50).to_csv(resp, index=False)
    assert main(["info", str(resp), "--rotate", "oblimin"]) == 2
    assert "--rotate rotates the factors" in capsys.readouterr().err
