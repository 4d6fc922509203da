"""Ability estimation: EAP parity with mirt, ML/MAP/WLE against brute-force root finders,
zero/perfect patterns, missing data, bias, and the public ``estimate_ability`` frame."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq, minimize_scalar

from atlascat.errors import ConfigError, ResponseDataError
from atlascat.irt import ability, models
from atlascat.irt.bank import ItemBank
from atlascat.responses import ResponseMatrix


def make_bank(rng, n, model):
    a = rng.lognormal(0.2, 0.35, n)
    b = rng.normal(0.0, 1.2, n)
    c = rng.uniform(0.05, 0.3, n) if model in ("3pl", "4pl") else None
    u = rng.uniform(0.85, 0.99, n) if model == "4pl" else None
    if model == "1pl":
        a = np.full(n, 1.3)
    return ItemBank([f"i{k}" for k in range(n)], a, b, c, u)


def simulate(rng, bank, theta):
    p = bank.probability(theta)
    return (rng.random(p.shape) < p).astype(float)


def loglik(theta, y, bank):
    obs = ~np.isnan(y)
    lp, lq = models.log_probability(np.atleast_1d(theta), *bank.params)
    return float(np.where(obs, np.where(obs, y, 0) * lp[0] + (1 - np.where(obs, y, 0)) * lq[0],
                          0).sum())


def warm_g(theta, y, bank):
    """Warm's estimating function and I from models.dprobability / d2probability (an independent
    path from the library's log-safe pieces); vectorized over a 1-D array of thetas."""
    obs = ~np.isnan(y)
    t = np.atleast_1d(np.asarray(theta, dtype=float))
    p = models.probability(t, *bank.params)
    d1 = models.dprobability(t, *bank.params)
    d2 = models.d2probability(t, *bank.params)
    q = 1 - p
    s = np.sum(np.where(obs, (np.nan_to_num(y) - p) * d1 / (p * q), 0), axis=-1)
    info = np.sum(np.where(obs, d1**2 / (p * q), 0), axis=-1)
    j = np.sum(np.where(obs, d1 * d2 / (p * q), 0), axis=-1)
    g = s + j / (2 * info)
    return (g, info) if np.ndim(theta) else (g[0], info[0])


# --------------------------------------------------------------------------- EAP parity (mirt)
@pytest.mark.parametrize("bench", ["arc", "truthfulqa"])
def test_eap_matches_mirt_on_real_data(shared_data, bench):
    rm = ResponseMatrix.read(shared_data / "openllm" / f"tiny_{bench}.csv.gz")
    bank = ItemBank.read(shared_data / "reference" / "mirt_tiny" / f"{bench}_items.csv")
    ref = pd.read_csv(shared_data / "reference" / "mirt_tiny" / f"{bench}_persons.csv")
    # mirt's fscores integrates on its grid alone: quadrature="fixed" is its computation
    df = ability.estimate_ability(rm, bank, "eap", quadpts=61, theta_range=(-6, 6),
                                  quadrature="fixed")
    assert len(df) == len(ref) > 3000
    assert np.max(np.abs(df["theta"].to_numpy() - ref["F1"].to_numpy())) <= 1e-3
    assert np.max(np.abs(df["se"].to_numpy() - ref["SE_F1"].to_numpy())) <= 1e-3
    # in fact it is exact up to rounding
    assert np.max(np.abs(df["theta"].to_numpy() - ref["F1"].to_numpy())) < 1e-8
    # the reference's grid (the default is 121), integrated as mirt does
    theta, se = ability.eap(rm, bank, quadpts=61, quadrature="fixed")
    np.testing.assert_allclose(theta, df["theta"].to_numpy())


# ------------------------------------------------------------------------------- IRF pieces
@pytest.mark.parametrize("model", ["2pl", "3pl", "4pl"])
def test_irf_pieces_match_models(rng, model):
    bank = make_bank(rng, 30, model)
    theta = np.linspace(-8, 8, 41)
    p, dp, r, curv = ability._irf_pieces(theta, *bank.params)
    np.testing.assert_allclose(p, models.probability(theta, *bank.params), rtol=1e-12)
    # models.* form 1 - sigma by subtraction (we use exp(-|z|)): agreement to ~1e-8 relative
    np.testing.assert_allclose(dp, models.dprobability(theta, *bank.params), rtol=1e-7,
                               atol=1e-300)
    np.testing.assert_allclose(dp * curv, models.d2probability(theta, *bank.params),
                               rtol=1e-6, atol=1e-14)
    np.testing.assert_allclose(dp * r, models.item_information(theta, *bank.params),
                               rtol=1e-9, atol=1e-300)


def test_score_is_derivative_of_loglik_and_j_is_dinfo_for_2pl(rng):
    bank = make_bank(rng, 25, "2pl")
    y = simulate(rng, bank, np.array([0.3]))[0]
    y[::4] = np.nan
    h = 1e-5
    for t in (-1.2, 0.4, 2.0):
        s, i, j = ability.estimating_terms(np.array([t]), y[None], bank)
        fd = (loglik(t + h, y, bank) - loglik(t - h, y, bank)) / (2 * h)
        assert s[0] == pytest.approx(fd, rel=1e-6, abs=1e-8)
        obs = ~np.isnan(y)
        sub = bank.subset(obs)
        di = (sub.test_information(np.array([t + h])) - sub.test_information(np.array([t - h])))
        assert j[0] == pytest.approx(di[0] / (2 * h), rel=1e-6)
        assert i[0] == pytest.approx(sub.test_information(np.array([t]))[0], rel=1e-10)


# ------------------------------------------------------------------------------------- WLE
@pytest.mark.parametrize("model", ["2pl", "3pl", "4pl"])
def test_wle_solves_warm_equation_brute_force(rng, model):
    bank = make_bank(rng, 30, model)
    theta = rng.normal(0, 1.2, 200)
    y = simulate(rng, bank, theta)
    y[rng.random(y.shape) < 0.2] = np.nan
    res = ability.wle(y, bank)
    assert np.all(np.isfinite(res.theta))
    grid = np.linspace(-10, 10, 801)
    for i in range(200):
        gv = warm_g(grid, y[i], bank)[0]
        roots = [brentq(lambda t: warm_g(t, y[i], bank)[0], grid[k], grid[k + 1], xtol=1e-13)
                 for k in np.flatnonzero((gv[:-1] > 0) & (gv[1:] <= 0))]
        assert roots, f"pattern {i}: no root found by the brute-force scan"
        # several roots (3PL): Warm's penalized likelihood log L + log(I)/2 picks one
        best = max(roots, key=lambda t: loglik(t, y[i], bank)
                   + 0.5 * np.log(warm_g(t, y[i], bank)[1]))
        assert abs(res.theta[i] - best) < 1e-6, (i, res.theta[i], roots)
        assert res.se[i] == pytest.approx(1 / np.sqrt(warm_g(best, y[i], bank)[1]), rel=1e-5)


@pytest.mark.parametrize("model", ["1pl", "2pl", "3pl", "4pl"])
def test_zero_and_perfect_patterns(rng, model):
    bank = make_bank(rng, 20, model)
    y = np.vstack([np.ones(20), np.zeros(20), simulate(rng, bank, np.array([0.0]))])
    y[2, 0], y[2, 1] = 1.0, 0.0
    for method in ("wle", "map", "eap"):
        df = ability.estimate_ability(y, bank, method)
        assert np.all(np.isfinite(df["theta"])) and np.all(np.isfinite(df["se"]))
        assert df["theta"][0] > df["theta"][2] > df["theta"][1]
        assert (df["flag"] == "ok").all()
    df = ability.estimate_ability(y, bank, "ml")
    assert df["theta"][0] == np.inf and df["theta"][1] == -np.inf
    assert list(df["flag"][:2]) == ["perfect", "zero"]
    assert np.all(df["se"][:2] == np.inf)
    assert np.isfinite(df["theta"][2]) and df["flag"][2] == "ok"
    assert not df[["theta", "se"]].isna().any().any()


def test_wle_less_biased_than_ml(rng):
    bank = make_bank(rng, 20, "2pl")
    true = np.repeat([-1.5, -0.5, 0.5, 1.5], 2000)
    y = simulate(rng, bank, true)
    w = ability.wle(y, bank).theta
    m = ability.ml(y, bank).theta
    keep = np.isfinite(m)        # ML is infinite on zero/perfect patterns
    bias_w = np.array([np.mean(w[keep & (true == t)] - t) for t in np.unique(true)])
    bias_m = np.array([np.mean(m[keep & (true == t)] - t) for t in np.unique(true)])
    assert np.mean(np.abs(bias_w)) < np.mean(np.abs(bias_m))
    assert np.mean(np.abs(bias_w)) < 0.5 * np.mean(np.abs(bias_m))
    # ML's bias points outwards (Lord 1983), WLE's is close to zero
    assert bias_m[0] < 0 < bias_m[-1]


# ------------------------------------------------------------------------------- ML and MAP
@pytest.mark.parametrize("model", ["2pl", "3pl", "4pl"])
def test_ml_maximizes_likelihood(rng, model):
    bank = make_bank(rng, 25, model)
    y = simulate(rng, bank, rng.normal(size=60))
    res = ability.ml(y, bank)
    for i in np.flatnonzero(np.isfinite(res.theta))[:40]:
        grid = np.linspace(-10, 10, 2001)
        lp, lq = models.log_probability(grid, *bank.params)
        ll = models.loglik_matrix(y[i:i + 1], lp, lq)[0]
        k = int(np.argmax(ll))
        opt = minimize_scalar(lambda t: -loglik(t, y[i], bank),
                              bounds=(grid[max(k - 1, 0)], grid[min(k + 1, 2000)]),
                              method="bounded", options={"xatol": 1e-10})
        assert abs(res.theta[i] - opt.x) < 1e-5
        info = models.test_information(np.array([res.theta[i]]), *bank.params)[0]
        assert res.se[i] == pytest.approx(1 / np.sqrt(info), rel=1e-8)


def test_map_solves_posterior_mode(rng):
    bank = make_bank(rng, 20, "3pl")
    y = simulate(rng, bank, rng.normal(size=50))
    res = ability.map_estimate(y, bank, prior_mean=0.5, prior_sd=0.8)
    for i in range(50):
        opt = minimize_scalar(lambda t: -(loglik(t, y[i], bank) - 0.5 * ((t - 0.5) / 0.8) ** 2),
                              bounds=(-6, 6), method="bounded", options={"xatol": 1e-10})
        assert abs(res.theta[i] - opt.x) < 1e-5
        info = models.test_information(np.array([res.theta[i]]), *bank.params)[0]
        assert res.se[i] == pytest.approx(1 / np.sqrt(info + 1 / 0.8**2), rel=1e-8)


def test_missing_responses_are_skipped(rng):
    bank = make_bank(rng, 30, "3pl")
    y = simulate(rng, bank, rng.normal(size=40))
    mask = rng.random(30) < 0.5
    y_nan = y.copy()
    y_nan[:, ~mask] = np.nan
    sub = bank.subset(mask)
    for method in ("eap", "wle", "map", "ml"):
        full = ability.estimate_ability(y_nan, bank, method)
        part = ability.estimate_ability(y[:, mask], sub, method)
        np.testing.assert_allclose(full["theta"], part["theta"], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(full["se"], part["se"], rtol=1e-9, atol=1e-9)
        assert (full["n_items"] == mask.sum()).all()


def test_no_items_and_partial_credit(rng):
    bank = make_bank(rng, 10, "2pl")
    y = np.full((2, 10), np.nan)
    y[1] = np.linspace(0, 1, 10)           # partial credit scores act as Bernoulli pseudo-counts
    df = ability.estimate_ability(y, bank, "wle")
    assert df["flag"][0] == "no_items" and np.isnan(df["theta"][0])
    assert np.isfinite(df["theta"][1])
    g, _ = warm_g(df["theta"][1], y[1], bank)
    assert abs(g) < 1e-8
    df = ability.estimate_ability(y, bank, "eap", prior_mean=0.2)
    assert df["flag"][0] == "no_items" and df["theta"][0] == pytest.approx(0.2, abs=1e-6)


# --------------------------------------------------------------------------------- frame API
def test_estimate_ability_frame_and_errors(rng):
    bank = make_bank(rng, 8, "2pl")
    y = simulate(rng, bank, rng.normal(size=5))
    rm = ResponseMatrix(y, [f"m{k}" for k in range(5)], bank.item_ids, on_empty="keep")
    df = ability.estimate_ability(rm, bank, "map")
    assert list(df.columns) == ["subject_id", "theta", "se", "n_items", "flag"]
    assert list(df["subject_id"]) == [f"m{k}" for k in range(5)]
    assert df.attrs["method"] == "map"
    with pytest.raises(ConfigError, match="unknown scoring method"):
        ability.estimate_ability(rm, bank, "bayes")
    extra = ResponseMatrix(np.c_[y, y[:, :1]], [f"m{k}" for k in range(5)],
                           list(bank.item_ids) + ["zzz"], on_empty="keep")
    with pytest.raises(ResponseDataError, match="not in the bank"):
        ability.estimate_ability(extra, bank, extra_items="error")
    with pytest.warns(UserWarning, match="not in the bank"):  # the default (issue 19)
        ability.estimate_ability(extra, bank)
    df2 = ability.estimate_ability(extra, bank, "map", extra_items="ignore")
    np.testing.assert_allclose(df2["theta"], df["theta"])
    with pytest.raises(ResponseDataError):
        ability.estimate_ability(y[:, :3], bank)
    with pytest.raises(ConfigError):
        ability.wle(y, bank, bounds=(2, -2))


def test_ml_perfect_pattern_on_steep_items_diverges():
    """Where P rounds to 1 (a = 4 far above b), the score must stay positive: a perfect
    pattern has no finite ML estimate (hypothesis found 'ok' at theta 9.69 before the score
    was written without y - P)."""
    from atlascat.irt.ability import estimate_ability, estimating_terms

    bank = ItemBank(["i0", "i1"], [4.0, 4.0], [-3.0, 0.5], [0.0, 0.0])
    right = estimate_ability(np.ones((1, 2)), bank, "ml")
    assert right["flag"].iloc[0] == "perfect" and right["theta"].iloc[0] == np.inf
    wrong = estimate_ability(np.zeros((1, 2)), bank, "ml")
    assert wrong["flag"].iloc[0] == "zero" and wrong["theta"].iloc[0] == -np.inf
    s, _, _ = estimating_terms(np.array([10.0, -10.0]), np.array([[1.0, 1.0], [0.0, 0.0]]), bank)
    assert s[0] > 0 > s[1]


def test_ml_and_map_take_the_higher_of_two_narrow_modes():
    """Steep 4PL items (a up to 10.5): pattern s30's likelihood has modes at -1.305 and -0.051
    whose grid values (step 0.25) rank them the wrong way round; the refined objectives do not.
    Reference: mirt 1.45.1 fscores ML / MAP on the fixed bank (data/mirt_scores/make_steep_4pl.R)."""
    ref_dir = Path(__file__).parent / "data" / "mirt_scores"
    bank = ItemBank.read(ref_dir / "steep_4pl_items.csv")          # mirt's X, a1, d, g, u
    y = pd.read_csv(ref_dir / "steep_4pl_patterns.csv").set_index("id")[list(bank.item_ids)]
    ref = pd.read_csv(ref_dir / "steep_4pl_scores.csv").set_index("id").loc[y.index]
    ml = ability.ml(y.to_numpy(float), bank)
    mp = ability.map_estimate(y.to_numpy(float), bank)
    np.testing.assert_allclose(ml.theta, ref["ml_theta"], atol=2e-5)
    np.testing.assert_allclose(mp.theta, ref["map_theta"], atol=2e-5)
    s30 = y.to_numpy(float)[0]
    assert loglik(ml.theta[0], s30, bank) > loglik(-1.3054, s30, bank) + 0.01
