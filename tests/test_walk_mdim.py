"""Psychometrician's walk of the multidimensional 2PL against mirt 1.45.1.

Fixtures in tests/data/walk_mdim (made by make_fixtures.R there): a simulated 2-factor 2PL set
(1000 subjects x 20 items, simple structure plus four cross-loadings) and mirt's fits of it,
``mirt(data, 1)`` and ``mirt(data, 2)`` (TOL = 1e-5): log-likelihoods, AIC/BIC, ``anova``,
varimax loadings and communalities."""
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.errors import ConfigError
from atlascat.irt.multidim import MultidimIRT, procrustes, tucker_congruence, varimax

DATA = Path(__file__).parent / "data" / "walk_mdim"


@pytest.fixture(scope="module")
def twofactor():
    return pd.read_csv(DATA / "twofactor.csv", index_col=0)


@pytest.fixture(scope="module")
def fits(twofactor):
    kw = dict(prior_a_sd=None, prior_d_sd=None, tol=1e-5)   # plain ML, as mirt
    return {k: MultidimIRT(k, **kw).fit(twofactor) for k in (1, 2)}


def _standardised(A):
    """mirt's factor loadings: a / 1.702 / sqrt(1 + |a|^2 / 1.702^2)."""
    return A / 1.702 / np.sqrt(1 + (A ** 2).sum(1) / 1.702 ** 2)[:, None]


def _up_to_sign_and_order(x, ref):
    """Largest |x - ref| over the column orders and signs of x (two columns)."""
    return min(np.abs(x[:, order] * signs - ref).max()
               for order in ([0, 1], [1, 0]) for signs in ([1, 1], [1, -1], [-1, 1], [-1, -1]))


def test_loglik_criteria_and_anova_match_mirt(fits, twofactor):
    ref = pd.read_csv(DATA / "twofactor_mirt_fit.csv")
    n, j = twofactor.shape
    for k, row in zip((1, 2), ref.itertuples()):
        m = fits[k]
        assert m.converged_
        assert m.loglik_ == pytest.approx(row.logLik, abs=1e-3)
        n_par = j * (k + 1) - k * (k - 1) // 2          # exploratory: K(K-1)/2 rotation constraints
        assert n_par == row.df == m.n_parameters_
        assert m.aic_ == pytest.approx(row.AIC, abs=2e-3)
        assert m.bic_ == pytest.approx(row.BIC, abs=2e-3)
    x2 = 2 * (fits[2].loglik_ - fits[1].loglik_)
    assert x2 == pytest.approx(ref.X2[1], abs=2e-3)


def test_loadings_and_communalities_match_mirt(fits):
    ref = pd.read_csv(DATA / "twofactor_mirt_items.csv")
    lam = _standardised(fits[2].bank_.loadings)
    target = ref[["f1_varimax", "f2_varimax"]].to_numpy()
    assert np.abs((lam ** 2).sum(1) - ref.h2).max() < 1e-4           # communalities
    assert np.abs(fits[2].bank_.intercepts - ref.d).max() < 1e-3
    aligned, _ = procrustes(lam, target)
    assert tucker_congruence(aligned, target).min() > 0.9999
    # mirt's varimax (GPArotation::Varimax) has no Kaiser normalization; ours does by default
    raw, _ = varimax(lam, normalize=False)
    assert _up_to_sign_and_order(raw, target) < 1e-3
    kaiser, _ = varimax(lam)
    assert 1e-3 < _up_to_sign_and_order(kaiser, target) < 0.05
    # the truth is recovered too (oblique truth, orthogonal fit: congruence, not equality)
    truth = pd.read_csv(DATA / "twofactor_true.csv")[["a1", "a2"]].to_numpy()
    assert tucker_congruence(procrustes(fits[2].bank_.loadings, truth)[0], truth).min() > 0.98


def test_dimensionality_check_in_plain_words(twofactor):
    from atlascat import calibrate
    from atlascat.irt.dimensionality import DimensionalityWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = calibrate(twofactor, model="2pl", filter=False)
    msgs = [str(w.message) for w in caught if issubclass(w.category, DimensionalityWarning)]
    assert res.settings["dimensionality"]["second_dimension"]
    assert len(msgs) == 1 and msgs[0].startswith("the items measure two things, not one")
    rng = np.random.default_rng(7)
    theta = rng.normal(size=1000)
    a, d = np.linspace(0.9, 2.0, 20), np.linspace(-1.5, 1.5, 20)
    y = (rng.random((1000, 20)) < 1 / (1 + np.exp(-(np.outer(theta, a) + d)))).astype(float)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = calibrate(y, model="2pl", filter=False)
    assert res.settings["dimensionality"]["one_trait"]
    assert not [w for w in caught if issubclass(w.category, DimensionalityWarning)]


@pytest.mark.parametrize("setting", [
    dict(n_dims=2.5), dict(max_iter=0), dict(quadpts=0), dict(quadpts=1), dict(prior_a_sd=0),
    dict(prior_d_sd=-1.0), dict(tol=-1e-4), dict(n_dims=True), dict(mh_steps=0), dict(n_dims=20),
])
def test_bad_settings_are_one_line_config_errors(setting, twofactor):
    """Before: 2.5 dims ran as 2, max_iter=0 / quadpts=0 as the defaults, quadpts=1 on a one-node
    grid, a zero prior sd divided by zero, 20 dims on 20 items crashed on a broadcast."""
    with pytest.raises(ConfigError) as err:
        MultidimIRT(**{"n_dims": 2, **setting}).fit(twofactor)
    assert "\n" not in str(err.value)


def test_non_convergence_warns(twofactor):
    with pytest.warns(UserWarning, match="did not converge in 3 iterations"):
        m = MultidimIRT(2, max_iter=3).fit(twofactor.iloc[:200])
    assert not m.converged_


def test_select_dimension_default_dims_fit_the_items(twofactor):
    """Before: the default dims (1..5) on a 3-item set fitted 4 and 5 factors and crashed on a
    broadcast; now the default stops below the number of items, and a fit stopped at max_iter
    is the table's converged column, not a warning per fit."""
    from atlascat.irt.multidim import select_dimension

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sel = select_dimension(twofactor.iloc[:300, :3], max_iter=2)
    assert sel.table.n_dims.tolist() == [1, 2] and not sel.table.converged.any()


def test_dimensionality_message_says_the_part_judged(twofactor):
    """Before: "Horn's parallel analysis on 250 models x 20 items" for 1000 models (the check
    draws a random 250): it now says so."""
    from atlascat.irt.dimensionality import Dimensionality, parallel_analysis

    d = parallel_analysis(twofactor.to_numpy(float), rng=1)
    d = Dimensionality(**{**d.__dict__, "residual": d.second, "residual_threshold": d.second_threshold})
    assert d.second_dimension
    assert "on a random 250 of the 1000 models x 20 items)" in d.message()
    assert Dimensionality.from_dict(d.to_dict()) == d
    small = parallel_analysis(twofactor.to_numpy(float)[:200], rng=1)
    assert (small.n_models, small.n_models_total) == (200, 200)
    weighted = parallel_analysis(twofactor.to_numpy(float)[:40], weights=np.ones(40), rng=1)
    assert "40 models x 20 items" in weighted._judged()


def test_a_residual_factor_stronger_than_the_first_is_worded_as_times():
    """The warning read "leaves a factor of 121% of it unexplained"; past the first factor's
    strength it says "1.2 times the first's strength"."""
    from atlascat.irt.dimensionality import _share

    assert _share(0.45) == "45% of the first's strength"
    assert _share(1.21) == "1.2 times the first's strength"
