"""Model fit: M2 (mirt's LSAT values, exact moment covariance, p-value calibration, power),
S-X2 (mirt's LSAT7 values, Lord-Wingersky), person fit lz*, Q3, partition-wise M2."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp
from scipy.stats import chi2, kstest, ncx2

from atlascat.errors import ConfigError, ResponseDataError
from atlascat.irt import fit, models
from atlascat.irt.bank import ItemBank
from atlascat.irt.quadrature import normal_quadrature
from atlascat.responses import ResponseMatrix


# ------------------------------------------------------------------------------- helpers
def mml(y, w, model):
    """Independent marginal ML fit of a 1PL (common slope) or 2PL by BFGS with the analytic
    gradient; 61 nodes on [-6, 6], N(0, 1), like mirt's EM."""
    quad = normal_quadrature()
    th = quad.nodes
    n = y.shape[1]

    def unpack(x):
        return (x[:n], x[n:]) if model == "2pl" else (np.full(n, x[0]), x[1:])

    def nll(x):
        a, d = unpack(x)
        z = th[:, None] * a + d
        lp, lq = -np.logaddexp(0, -z), -np.logaddexp(0, z)
        ll = models.loglik_matrix(y, lp, lq) + quad.log_weights
        lse = logsumexp(ll, axis=1)
        post = np.exp(ll - lse[:, None])
        g = post.T @ (w[:, None] * y) - (post.T @ w)[:, None] * np.exp(lp)
        ga, gd = (th[:, None] * g).sum(0), g.sum(0)
        return -(w * lse).sum(), -(np.r_[ga, gd] if model == "2pl" else np.r_[ga.sum(), gd])

    x0 = np.r_[np.ones(n), np.zeros(n)] if model == "2pl" else np.r_[1.0, np.zeros(n)]
    res = minimize(nll, x0, jac=True, method="BFGS", options={"gtol": 1e-9})
    a, d = unpack(res.x)
    return a, d


def bank_from(a, b, c=None, u=None, ids=None):
    n = len(a)
    return ItemBank(ids if ids is not None else [f"i{k}" for k in range(n)], a, b, c, u)


def simulate(rng, bank, n):
    p = bank.probability(rng.normal(size=n))
    return (rng.random(p.shape) < p).astype(float)


def patterns(y):
    pats, cnt = np.unique(y, axis=0, return_counts=True)
    return pats, cnt.astype(float)


@pytest.fixture(scope="module")
def lsat7(shared_data):
    rm = ResponseMatrix.read(shared_data / "classic" / "lsat7_patterns.csv", freq_column="freq")
    a, d = mml(rm.values, rm.weights, "2pl")
    return rm, bank_from(a, -d / a, ids=rm.item_ids)


# ----------------------------------------------------------------------- mirt reference values
def test_lsat7_2pl_matches_mirt(lsat7):
    rm, bank = lsat7
    # our MML reproduces mirt's published estimates (classic/README.md)
    np.testing.assert_allclose(bank.a, [0.988, 1.081, 1.706, 0.7651, 0.7358], atol=1e-2)
    np.testing.assert_allclose(bank.d, [1.8561, 0.808, 1.8043, 0.486, 1.8545], atol=1e-2)
    res = fit.m2(rm, bank, estimated="2pl")
    # mirt test suite: M2 = 11.93841 on 5 df (15 moments - 10 parameters)
    assert res.df == 5 and res.n == 1000
    assert res.M2 == pytest.approx(11.93841, abs=1e-3)
    assert res.p == pytest.approx(chi2.sf(res.M2, 5))
    assert 0 < res.RMSEA_5 < res.RMSEA < res.RMSEA_95
    assert 0 < res.CFI < 1 and 0 < res.TLI < 1 and 0 < res.SRMSR < 0.1
    # S-X2 (mirt test suite, tolerance 1e-2), 4 score groups - 2 parameters = 2 df each
    sx = fit.sx2(rm, bank, estimated="2pl")
    np.testing.assert_allclose(sx["S_X2"], [4.749440, 14.451071, 1.270381, 5.237400, 0.941125],
                               atol=1e-2)
    assert list(sx["df_S_X2"]) == [2] * 5
    assert list(sx["item_id"]) == list(rm.item_ids)


def test_lsat6_1pl_matches_mirt(shared_data):
    rm = ResponseMatrix.read(shared_data / "classic" / "lsat6_patterns.csv", freq_column="freq")
    a, d = mml(rm.values, rm.weights, "1pl")
    bank = bank_from(a, -d / a, ids=rm.item_ids)
    # mirt's Rasch fit: latent variance 0.57 <=> common slope sqrt(0.57) (up to reflection)
    assert abs(a[0]) == pytest.approx(np.sqrt(0.57), abs=1e-2)
    res = fit.m2(rm, bank, estimated="1pl")
    # mirt test suite: M2 = 5.291576 (tol 1e-2), df = 15 - 6 = 9
    assert res.df == 9
    assert res.M2 == pytest.approx(5.291576, abs=1e-2)


MIRT_LSAT6_RASCH_M2 = 5.291576   # mirt's test suite: mirt(LSAT6, 1, "Rasch"); M2(mod)


def test_lsat6_rasch_m2_counts_the_latent_variance(shared_data):
    """mirt's Rasch: slopes 1, latent variance estimated (a free parameter with its own
    Jacobian column); the 1PL form of the same fit (the calibration's bank) gives the same M2
    on the same 9 df."""
    from atlascat.irt.calibrate import calibrate

    rm = ResponseMatrix.read(shared_data / "classic" / "lsat6_patterns.csv", freq_column="freq")
    res = calibrate(rm, "rasch", mirt_defaults=True)
    sd = np.sqrt(res.latent_variance)
    assert res.latent_variance == pytest.approx(0.57, abs=1e-2)
    np.testing.assert_allclose(res.bank.a, sd)
    mirt_form = bank_from(np.ones(5), -res.bank.d, ids=rm.item_ids)     # a = 1, b = -d
    rasch = fit.m2(rm, mirt_form, estimated="rasch", prior_sd=sd)
    assert rasch.df == 9 and rasch.n_free == 6
    assert rasch.M2 == pytest.approx(MIRT_LSAT6_RASCH_M2, abs=1e-2)
    assert fit.m2(rm, res.bank, estimated="1pl").M2 == pytest.approx(rasch.M2, abs=1e-3)
    # mirt's reference fit on this machine (tests/data/mirt_lsat6_rasch.csv, mirt 1.45.1)


def test_lsat6_rasch_cli_calibrate_then_fit(shared_data, tmp_path):
    """`atlas calibrate --model rasch` writes the bank on the N(0, 1) scale, so `atlas fit`
    reproduces mirt's M2 (it gave 5.027: a = 1 with the variance 0.57 left behind)."""
    import json

    from atlascat.cli import main

    data = shared_data / "classic" / "lsat6_patterns.csv"
    bank = tmp_path / "lsat6.csv"
    assert main(["calibrate", str(data), "--freq-column", "freq", "--model", "rasch",
                 "--mirt-defaults", "-o", str(bank), "--quiet"]) == 0
    out = tmp_path / "fit.json"
    assert main(["fit", str(data), "--freq-column", "freq", "--bank", str(bank), "--json",
                 "-o", str(out), "--no-items"]) == 0
    rep = json.loads(out.read_text())
    assert rep["df"] == 9
    assert rep["M2"] == pytest.approx(MIRT_LSAT6_RASCH_M2, abs=1e-2)


def test_rasch_variance_column_matches_finite_differences(rng):
    n, sd = 4, 0.8
    bank = bank_from(np.ones(n), rng.normal(0, 1, n))
    quad = normal_quadrature(31, (-6, 6), 0.0, sd)
    P, blocks = fit._jacobian_blocks(quad.nodes, bank, "rasch", quad.weights, 0.0, sd)
    delta = fit._delta_matrix(P, quad.weights, blocks)
    assert delta.shape[1] == fit.free_parameters(n, "rasch") == n + 1
    i, j = np.triu_indices(n, 1)

    def moments(var):
        w = normal_quadrature(31, (-6, 6), 0.0, np.sqrt(var)).weights
        return np.r_[w @ P, ((P * w[:, None]).T @ P)[i, j]]

    h = 1e-6
    fd = (moments(sd**2 + h) - moments(sd**2 - h)) / (2 * h)
    np.testing.assert_allclose(delta[:, -1], fd, atol=1e-8)


def test_pattern_frequencies_equal_expanded_rows(lsat7):
    rm, bank = lsat7
    full = rm.expand()
    assert full.n_subjects == 1000
    a, b = fit.m2(rm, bank, estimated="2pl"), fit.m2(full, bank, estimated="2pl")
    assert a.M2 == pytest.approx(b.M2, rel=1e-10) and a.SRMSR == pytest.approx(b.SRMSR)
    np.testing.assert_allclose(fit.sx2(rm, bank)["S_X2"], fit.sx2(full, bank)["S_X2"])


# ---------------------------------------------------------------- exact moment machinery
@pytest.mark.parametrize("model", ["2pl", "3pl", "4pl"])
def test_xi_and_delta_against_full_enumeration(rng, model):
    n = 4
    a, b = rng.uniform(0.6, 2.0, n), rng.normal(0, 1, n)
    c = rng.uniform(0.05, 0.3, n) if model != "2pl" else None
    u = rng.uniform(0.85, 0.98, n) if model == "4pl" else None
    bank = bank_from(a, b, c, u)
    quad = normal_quadrature(21, (-5, 5))
    P, blocks = fit._jacobian_blocks(quad.nodes, bank, model)
    xi, pi1, pi2, _ = fit._xi_matrix(P, quad.weights)
    pats = np.array(list(itertools.product([0, 1], repeat=n)), dtype=float)
    i, j = np.triu_indices(n, 1)

    def moments_and_probs(a_, d_, c_, u_):
        Pq = models.probability(quad.nodes, a_, -d_ / a_, c_, u_)
        lik = np.prod(np.where(pats[:, None, :] == 1, Pq[None], 1 - Pq[None]), axis=2)
        prob = lik @ quad.weights
        mom = np.hstack([pats, pats[:, i] * pats[:, j]])
        return mom, prob

    mom, prob = moments_and_probs(bank.a, bank.d, bank.c, bank.u)
    mu = prob @ mom
    np.testing.assert_allclose(mu, np.r_[pi1, pi2], rtol=1e-12)
    exact = (mom * prob[:, None]).T @ mom - np.outer(mu, mu)
    np.testing.assert_allclose(xi, exact, atol=1e-14)
    # Jacobian by central differences in (a, d, c, u)
    delta = fit._delta_matrix(P, quad.weights, blocks)
    params = [bank.a.copy(), bank.d.copy(), bank.c.copy(), bank.u.copy()]
    order = {"2pl": [1, 0], "3pl": [1, 0, 2], "4pl": [1, 0, 2, 3]}[model]
    h = 1e-6
    col = 0
    for k in order:
        for item in range(n):
            up = [p.copy() for p in params]
            dn = [p.copy() for p in params]
            up[k][item] += h
            dn[k][item] -= h
            fd = (moments_and_probs(*up)[1] - moments_and_probs(*dn)[1]) @ mom / (2 * h)
            np.testing.assert_allclose(delta[:, col], fd, atol=1e-7)
            col += 1
    assert col == delta.shape[1] == fit.free_parameters(n, model)


def test_null_model_closed_form_equals_general_m2(rng):
    bank = bank_from(rng.uniform(0.8, 2, 6), rng.normal(size=6))
    y = simulate(rng, bank, 800)
    N = len(y)
    p1 = y.mean(0)
    i, j = np.triu_indices(6, 1)
    p2 = (y.T @ y / N)[i, j]
    Pn = p1[None, :]
    xin, _, _, _ = fit._xi_matrix(Pn, np.ones(1))
    dn = fit._delta_matrix(Pn, np.ones(1), [((p1 * (1 - p1))[None, :], False)])
    general = fit._m2_stat(np.r_[np.zeros(6), p2 - p1[i] * p1[j]], xin, dn, N)
    assert fit.null_m2(p1, p2, N) == pytest.approx(general, rel=1e-9)


def test_rmsea_interval_inverts_noncentral_chi2():
    lo, hi = fit.rmsea_ci(250.0, 100, 1000)
    assert ncx2.cdf(250.0, 100, lo**2 * 1000 * 100) == pytest.approx(0.95, abs=1e-8)
    assert ncx2.cdf(250.0, 100, hi**2 * 1000 * 100) == pytest.approx(0.05, abs=1e-8)
    point = np.sqrt((250 / 100 - 1) / 999)
    assert lo < point < hi
    # M2 far below df: F(M2; df, 0) < 0.05, neither bound has a root -> both 0 (mirt's rule)
    assert fit.rmsea_ci(50.0, 100, 1000) == (0.0, 0.0)
    # M2 a bit below df: lower bound 0, upper bound positive
    lo, hi = fit.rmsea_ci(95.0, 100, 1000)
    assert lo == 0.0 and hi > 0


# ------------------------------------------------------------------- calibration and power
@pytest.mark.parametrize("model", ["2pl", "3pl"])
def test_m2_pvalues_uniform_under_true_parameters(model):
    rng = np.random.default_rng(11 if model == "2pl" else 12)
    n = 10
    c = rng.uniform(0.1, 0.25, n) if model == "3pl" else None
    bank = bank_from(rng.uniform(0.8, 2.0, n), rng.uniform(-1.5, 1.5, n), c)
    ps = []
    for _ in range(100):
        res = fit.m2(simulate(rng, bank, 1000), bank, estimated="none", null_model=False)
        ps.append(res.p)
    assert res.df == 55 and res.n_free == 0          # parameters known: no df subtracted
    assert kstest(ps, "uniform").pvalue > 0.01


def test_1pl_on_3pl_with_strong_guessing_misfits(rng):
    n = 12
    b = np.linspace(-1.0, 2.5, n)
    rng.shuffle(b)
    c = np.r_[np.zeros(6), np.full(6, 0.5)]
    truth = bank_from(np.full(n, 2.5), b, c)
    pats, cnt = patterns(simulate(rng, truth, 2000))
    a1, d1 = mml(pats, cnt, "1pl")
    res = fit.m2(pats, bank_from(a1, -d1 / a1), estimated="1pl", weights=cnt)
    assert res.df == 78 - 13
    assert res.RMSEA > 0.05 and res.p < 1e-6
    ok = fit.m2(pats, truth, estimated="none", weights=cnt)
    assert ok.RMSEA < 0.02 and ok.p > 0.001


def test_m2_input_checks(rng):
    bank = bank_from(rng.uniform(0.8, 2, 5), rng.normal(size=5))
    y = simulate(rng, bank, 200)
    y[0, 0] = np.nan
    res = fit.m2(y, bank, estimated="2pl")      # the row's other answers count (pairwise)
    assert res.n == 200 and res.n_dropped == 0
    y[1, 1] = 0.5
    with pytest.raises(ResponseDataError, match="0/1"):
        fit.m2(y, bank)
    with pytest.raises(ConfigError, match="estimated"):
        fit.m2(simulate(rng, bank, 50), bank, estimated="5pl")
    with pytest.raises(ConfigError, match="degrees of freedom"):
        fit.m2(simulate(rng, bank_from([1, 1.5], [0, 1]), 50), bank_from([1, 1.5], [0, 1]),
               estimated="2pl")
    empty_col = simulate(rng, bank, 50)
    empty_col[:, 2] = np.nan
    with pytest.raises(ResponseDataError, match="no response at all"):
        fit.m2(empty_col, bank)
    big = bank_from(np.ones(fit.MAX_M2_ITEMS + 1), np.zeros(fit.MAX_M2_ITEMS + 1))
    with pytest.raises(ConfigError, match="m2_partitioned"):
        fit.m2(np.zeros((3, len(big))), big)


def test_partitioned_m2_equals_per_partition_m2(rng):
    assert [len(p) for p in fit.partition_items(839, 100)] == [105] * 7 + [104]
    bank = bank_from(rng.uniform(0.8, 2, 24), rng.normal(size=24), rng.uniform(0, .2, 24))
    y = simulate(rng, bank, 600)
    table, summary = fit.m2_partitioned(y, bank, partition_size=8, rng=np.random.default_rng(3),
                                        estimated="3pl")
    parts = fit.partition_items(24, 8, np.random.default_rng(3))
    assert len(table) == summary["n_partitions"] == 3
    for k, idx in enumerate(parts):
        one = fit.m2(y[:, idx], bank.subset(idx), estimated="3pl")
        assert table["M2"][k] == pytest.approx(one.M2) and table["df"][k] == 8 + 28 - 24
    assert summary["RMSEA"] == pytest.approx(table["RMSEA"].mean())


# ----------------------------------------------------------------------------------- S-X2
def test_summed_score_distribution_and_leave_one_out(rng):
    n = 7
    P = rng.uniform(0.001, 0.999, (5, n))
    P[0, :3] = [1e-9, 1 - 1e-9, 0.5]
    f = fit.summed_score_distribution(P)
    pats = np.array(list(itertools.product([0, 1], repeat=n)))
    lik = np.prod(np.where(pats[None] == 1, P[:, None, :], 1 - P[:, None, :]), axis=2)
    brute = np.stack([lik[:, pats.sum(1) == k].sum(1) for k in range(n + 1)], axis=1)
    np.testing.assert_allclose(f, brute, atol=1e-15)
    loo = fit._leave_one_out(f, P)
    for i in range(n):
        direct = fit.summed_score_distribution(np.delete(P, i, axis=1))
        np.testing.assert_allclose(loo[:, i, :], direct, atol=1e-12)


def test_sx2_pvalues_roughly_uniform_under_the_model():
    rng = np.random.default_rng(7)
    bank = bank_from(rng.uniform(0.8, 2, 15), rng.normal(size=15), rng.uniform(0, .2, 15))
    ps = np.concatenate([fit.sx2(simulate(rng, bank, 2000), bank, estimated="none")["p_S_X2"]
                         for _ in range(12)])
    assert kstest(ps, "uniform").pvalue > 0.01
    # a misfitting item (true slope 3x the bank's) is caught
    wrong = bank_from(np.r_[bank.a[:1] * 3, bank.a[1:]], bank.b, bank.c)
    sx = fit.sx2(simulate(rng, wrong, 3000), bank, estimated="none")
    assert sx["p_S_X2"][0] < 1e-4 and sx["df_S_X2"][0] > 5


# ------------------------------------------------------------------------------ person fit
def test_lz_star_standard_normal_and_flags_aberrant(rng):
    bank = bank_from(rng.uniform(0.8, 2.0, 60), rng.normal(size=60))
    y = simulate(rng, bank, 3000)
    pf = fit.person_fit(y, bank, method="wle")
    z = pf["lz_star"].to_numpy()
    assert abs(np.nanmean(z)) < 0.1 and abs(np.nanstd(z) - 1) < 0.1
    # Snijders: the uncorrected lz has variance below 1 with estimated theta
    assert np.nanvar(pf["lz"]) < np.nanvar(z)
    hard = np.argsort(bank.b)
    odd = np.zeros((20, 60))
    odd[:, hard[30:]] = 1.0                        # right on the hard half, wrong on the easy
    pf2 = fit.person_fit(odd, bank, method="ml")
    assert np.all(pf2["lz_star"] < -3) and np.all(pf2["p_lz_star"] < 0.01)
    for method in ("map", "ml"):
        zz = fit.person_fit(y[:500], bank, method=method)["lz_star"]
        assert abs(np.nanmean(zz)) < 0.2
    allright = fit.person_fit(np.ones((1, 60)), bank, method="ml")
    assert np.isnan(allright["lz_star"][0])        # infinite ML theta: undefined, not a crash


# -------------------------------------------------------------------------------------- Q3
def test_q3_local_independence_and_dependence(rng):
    n = 20
    bank = bank_from(rng.uniform(1, 2, n), rng.normal(size=n))
    y = simulate(rng, bank, 3000)
    mat, summary = fit.q3(y, bank)
    # Yen (1984): E[Q3] is about -1/(n - 1) under local independence
    assert summary["mean"] == pytest.approx(-1 / (n - 1), abs=0.02)
    assert summary["n_pairs"] == n * (n - 1) // 2
    y2 = y.copy()
    flip = rng.random(len(y)) < 0.15
    y2[:, 1] = np.where(flip, 1 - y[:, 0], y[:, 0])  # item 1 nearly copies item 0
    mat2, s2 = fit.q3(y2, bank)
    top = s2["top_pairs"][0]
    assert {top["item_1"], top["item_2"]} == {"i0", "i1"} and top["q3"] > 0.2
    assert mat2.loc["i0", "i1"] == pytest.approx(top["q3"])
    y3 = y.copy()
    y3[rng.random(y.shape) < 0.2] = np.nan          # pairwise-complete residual correlations
    mat3, s3 = fit.q3(y3, bank)
    assert s3["mean"] == pytest.approx(-1 / (n - 1), abs=0.03)
