"""Standard errors from the observed information (atlascat.irt.information, atlascat.irt.se):
parity with mirt 1.45.1 (tests/data/mirt_se/, made by make_reference.R there) and brute-force
finite-difference Hessians of the marginal log-likelihood / log-posterior."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

from atlascat.errors import ConfigError
from atlascat.irt.calibrate import calibrate
from atlascat.irt.estep import grid_log_weights
from atlascat.irt.information import (binary_log_prob, category_indices,
                                      observed_information)
from atlascat.irt.quadrature import normal_quadrature
from atlascat.responses import ResponseMatrix

REF = Path(__file__).parent / "data" / "mirt_se"
QUAD = normal_quadrature(61)


def mirt_items(name):
    df = pd.read_csv(REF / f"{name}_items.csv")
    return df[df.se.notna()].reset_index(drop=True)


def mirt_fit(name):
    return json.loads((REF / f"{name}_fit.json").read_text())


@pytest.fixture(scope="module")
def lsat7(shared_data):
    df = pd.read_csv(shared_data / "classic" / "lsat7_patterns.csv")
    ids = [f"Item.{i}" for i in range(1, 6)]
    return ResponseMatrix(df.drop(columns="freq").to_numpy(float), item_ids=ids,
                          weights=df["freq"].to_numpy(float))


def marginal_loglik(log_prob, params, y, w, log_w):
    """sum_i w_i log sum_q pi_q prod_j P_{j, y_ij}(x_q), straight from the definition."""
    lp = log_prob(params, QUAD.nodes)                           # (m, Q, C)
    L = np.zeros((y.shape[0], len(QUAD.nodes)))
    for j in range(y.shape[1]):
        obs = y[:, j] >= 0
        L[obs] += lp[j][:, y[obs, j]].T
    return float(np.sum(w * logsumexp(L + log_w, axis=1)))


def fd_hessian(f, x, h=1e-4):
    n = len(x)
    H = np.empty((n, n))
    for i in range(n):
        for j in range(i, n):
            def at(si, sj):
                z = x.copy()
                z[i] += si * h
                z[j] += sj * h
                return f(z)
            H[i, j] = H[j, i] = (at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) / (4 * h * h)
    return H


# ---------------------------------------------------------------------------- mirt parity
class TestMirtParity:
    def test_lsat7_2pl_standard_errors_within_2pct(self, lsat7):
        res = calibrate(lsat7, model="2pl", prior_a=None, se=True)
        ref = mirt_items("lsat7_2pl")
        got = res.standard_errors("mirt")
        for p in ("a1", "d"):
            want = ref[ref.parameter == p].se.to_numpy()
            np.testing.assert_allclose(got[f"{p}_se"], want, rtol=0.02)
            np.testing.assert_allclose(got[p], ref[ref.parameter == p].value, atol=2e-3)

    def test_lsat7_rasch_standard_errors_and_latent_variance(self, lsat7):
        res = calibrate(lsat7, model="rasch", se=True)
        ref = mirt_items("lsat7_rasch")
        np.testing.assert_allclose(res.standard_errors("mirt")["d_se"], ref.se, rtol=0.02)
        fit = mirt_fit("lsat7_rasch")
        assert res.se.latent_variance_se == pytest.approx(fit["latent_variance_se"], rel=0.02)
        assert res.latent_variance == pytest.approx(fit["latent_variance"], abs=2e-3)

    @pytest.mark.parametrize("model,name", [("2pl", "lsat7_2pl"), ("rasch", "lsat7_rasch")])
    def test_information_criteria(self, lsat7, model, name):
        res = calibrate(lsat7, model=model, prior_a=None)
        fit = mirt_fit(name)
        ic = res.information_criteria()
        assert ic["n_parameters"] == fit["n_parameters"]
        assert ic["loglik"] >= fit["loglik"] - 0.01
        for k in ("AIC", "BIC", "SABIC", "HQ"):
            assert ic[k.lower()] == pytest.approx(fit[k], abs=0.05)
        assert res.aic == ic["aic"] and res.bic == ic["bic"]
        assert res.to_dict()["sabic"] == ic["sabic"]

    def test_anova_rasch_vs_2pl_equals_mirt(self, lsat7):
        from atlascat.irt.compare import anova

        r1 = calibrate(lsat7, model="rasch")
        r2 = calibrate(lsat7, model="2pl", prior_a=None)
        got = anova(r2, r1)            # any order: sorted by parameters, as mirt's rows
        want = pd.read_csv(REF / "anova_lsat7_rasch_2pl.csv").set_index("model")
        assert list(got.index) == ["rasch", "2pl"]
        assert list(got.columns) == ["AIC", "SABIC", "HQ", "BIC", "logLik", "X2", "df", "p"]
        for col in ("AIC", "SABIC", "HQ", "BIC", "logLik"):
            np.testing.assert_allclose(got[col], want[col], atol=0.05)
        assert got.loc["2pl", "X2"] == pytest.approx(want.loc["2pl", "X2"], abs=0.01)
        assert got.loc["2pl", "df"] == want.loc["2pl", "df"] == 4
        assert got.loc["2pl", "p"] == pytest.approx(want.loc["2pl", "p"], abs=1e-4)
        assert np.isnan(got.loc["rasch", "X2"])


# ---------------------------------------------------------------------------- polytomous
def graded_log_prob(params, nodes):
    """Samejima's graded model in mirt's form: P*(k) = sigma(a1 x + d_k), P(k) = P*(k) -
    P*(k + 1) (a test-local model: the generic interface takes any such function)."""
    a, d = params[:, :1], params[:, 1:]
    z = a[:, :, None] * nodes[None, None, :] + d[:, :, None]           # (m, K-1, Q)
    star = 1.0 / (1.0 + np.exp(-z))
    m, k1, q = star.shape
    full = np.concatenate([np.ones((m, 1, q)), star, np.zeros((m, 1, q))], axis=1)
    return np.log(np.clip(full[:, :-1] - full[:, 1:], 1e-300, None)).transpose(0, 2, 1)


def gpcm_log_prob(params, nodes):
    """Muraki's GPCM in mirt's form: P(k) proportional to exp(k a1 x + d_k), d_0 = 0."""
    a, d = params[:, :1], params[:, 1:]
    k = np.arange(d.shape[1] + 1)
    dd = np.concatenate([np.zeros((len(a), 1)), d], axis=1)
    z = k[None, None, :] * a[:, :, None] * nodes[None, :, None] + dd[:, None, :]
    return z - logsumexp(z, axis=2, keepdims=True)


@pytest.mark.parametrize("name,log_prob", [("science_graded", graded_log_prob),
                                           ("science_gpcm", gpcm_log_prob)])
def test_polytomous_standard_errors_at_mirts_estimates(name, log_prob):
    """The generic information on mirt's Science estimates gives mirt's SEs (within 2%)."""
    ref = mirt_items(name)
    sci = pd.read_csv(REF / "science.csv")
    y = sci.to_numpy() - 1                                  # categories 1..4 -> 0..3
    items = list(sci.columns)
    params = np.array([ref[ref.item == it].value.to_numpy() for it in items])
    free = np.ones_like(params, dtype=bool)
    info = observed_information(log_prob, params, free, y, None, QUAD.nodes, QUAD.log_weights)
    se = np.sqrt(np.diag(info.covariance())).reshape(params.shape)
    want = np.array([ref[ref.item == it].se.to_numpy() for it in items])
    np.testing.assert_allclose(se, want, rtol=0.02)
    np.testing.assert_allclose(info.gradient, 0.0, atol=0.05)   # mirt's estimate: a stationary point


def test_ordinal_standard_errors_at_mirts_converged_gpcm_are_mirts():
    """ordinal_standard_errors (exact d log P, poly.dlog_prob) at mirt's GPCM estimates of
    Science at TOL 1e-8 (a stationary point) gives mirt's SEs within 1e-6 relative (central
    differences of log P gave 1.3e-5)."""
    from atlascat.irt.se import ordinal_standard_errors

    ref = mirt_items("science_gpcm_tight")
    sci = pd.read_csv(REF / "science.csv")
    items = list(sci.columns)
    params = np.array([ref[ref.item == it].value.to_numpy() for it in items])
    s = ordinal_standard_errors(sci.to_numpy() - 1.0, None, params, "gpcm", item_ids=items,
                                nodes=QUAD.nodes, log_weights=QUAD.log_weights, model="gpcm")
    got = s.frame("mirt").set_index("item_id")
    want = ref.pivot(index="item", columns="parameter", values="se").loc[items]
    for p in ("a1", "d1", "d2", "d3"):
        np.testing.assert_allclose(got[f"{p}_se"], want[p], rtol=1e-6)


# ---------------------------------------------------------------------------- analytic checks
def _binary_data(rng, n=600, m=6, c=0.0):
    a = rng.uniform(0.7, 2.0, m)
    b = rng.normal(0, 1, m)
    th = rng.normal(size=n)
    p = c + (1 - c) / (1 + np.exp(-a * (th[:, None] - b)))
    y = (rng.random((n, m)) < p).astype(float)
    y[rng.random((n, m)) < 0.05] = np.nan                     # missing cells too
    return y


def test_2pl_information_is_minus_the_brute_force_hessian(rng):
    y = _binary_data(rng)
    res = calibrate(y, model="2pl", prior_a=None, se=True)
    s = res.se
    yc = category_indices(y)
    P = s.params.copy()

    def loglik(v):
        q = P.copy()
        q[:, :2] = v.reshape(-1, 2)
        return marginal_loglik(binary_log_prob, q, yc, np.ones(len(y)), QUAD.log_weights)

    H = fd_hessian(loglik, P[:, :2].reshape(-1))
    np.testing.assert_allclose(s.info.matrix, -H, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(s.covariance, np.linalg.inv(-H), rtol=5e-3, atol=1e-6)
    # the exact derivatives of log P agree with central differences of it
    info_num = observed_information(binary_log_prob, P, s.free, yc, None, QUAD.nodes,
                                    QUAD.log_weights)
    np.testing.assert_allclose(info_num.matrix, s.info.matrix, rtol=1e-5, atol=1e-5)


def test_rasch_information_includes_the_latent_variance(rng):
    y = _binary_data(rng, m=5)
    res = calibrate(y, model="rasch", se=True)
    s = res.se
    yc = category_indices(y)
    P = s.params.copy()

    def loglik(v):
        q = P.copy()
        q[:, 1] = v[:-1]
        return marginal_loglik(binary_log_prob, q, yc, np.ones(len(y)),
                               grid_log_weights(QUAD.nodes, v[-1]))

    H = fd_hessian(loglik, np.append(P[:, 1], res.latent_variance))
    np.testing.assert_allclose(s.info.matrix, -H, rtol=2e-3, atol=2e-3)
    assert s.latent_variance_se == pytest.approx(np.sqrt(np.linalg.inv(-H)[-1, -1]), rel=5e-3)
    # the 1PL on N(0, 1): a = sigma, se(a) = se(sigma^2) / (2 sigma) by the delta method
    one = res.standard_errors("ours", scale="standard")
    sd = np.sqrt(res.latent_variance)
    np.testing.assert_allclose(one["a_se"], s.latent_variance_se / (2 * sd), rtol=1e-6)


def test_3pl_with_priors_is_the_posterior_mode_information(rng):
    y = _binary_data(rng, n=800, m=5, c=0.15)
    res = calibrate(y, model="3pl", prior_a="lognorm(0,0.5)", prior_c="beta(5,17)", se=True)
    s = res.se
    assert s.posterior_mode
    from atlascat.irt.itemmodel import ItemModel
    from atlascat.irt.priors import parse_prior

    im = ItemModel("3pl", parse_prior("lognorm(0,0.5)", "a"), parse_prior("beta(5,17)", "c"))
    yc = category_indices(y)
    P = s.params.copy()

    def logpost(v):
        q = P.copy()
        q[:, :3] = v.reshape(-1, 3)
        th = np.column_stack([np.log(q[:, 0]), q[:, 1], q[:, 2], np.zeros(len(q))])
        return (marginal_loglik(binary_log_prob, q, yc, np.ones(len(y)), QUAD.log_weights)
                + float(np.sum(im.log_prior(th, np))))

    H = fd_hessian(logpost, P[:, :3].reshape(-1))
    np.testing.assert_allclose(s.info.matrix, -H, rtol=5e-3, atol=5e-3)
    ours = res.standard_errors("ours")
    assert list(ours.columns) == ["item_id", "a", "a_se", "b", "b_se", "c", "c_se"]
    # c = sigma(logit g): se(c) = c (1 - c) se(logit g)
    se_lg = np.sqrt(np.diag(s.covariance))[2::3]
    np.testing.assert_allclose(ours["c_se"], ours["c"] * (1 - ours["c"]) * se_lg, rtol=1e-6)


@pytest.mark.slow
def test_100_item_3pl_standard_errors_take_seconds(rng):
    n, m = 1000, 100
    a, b = rng.lognormal(0, 0.3, m), rng.normal(0, 1, m)
    th = rng.normal(size=n)
    y = (rng.random((n, m)) < 0.15 + 0.85 / (1 + np.exp(-a * (th[:, None] - b)))).astype(float)
    res = calibrate(y, model="3pl")
    from atlascat.irt.calibrate import _standard_errors  # the SE step alone
    from atlascat.irt.itemmodel import ItemModel
    from atlascat.irt.priors import parse_prior

    im = ItemModel("3pl", parse_prior(res.settings["prior_a"], "a"),
                   parse_prior(res.settings["prior_c"], "c"))
    th_int = im.internal(res.bank.a, res.bank.d, res.bank.c, res.bank.u)
    t0 = time.perf_counter()
    se = _standard_errors(y, None, {"th": th_int, "var": 1.0}, im, res.bank.item_ids, "3pl",
                          61, (-6.0, 6.0))
    assert time.perf_counter() - t0 < 30.0
    assert np.all(np.isfinite(se.frame()["a1_se"]))


# ---------------------------------------------------------------------------- bad input
def test_bad_input_one_line_each(lsat7, rng):
    from atlascat.irt.compare import anova

    with pytest.raises(ConfigError, match="joint calibration"):
        calibrate(lsat7, model="2pl", se=True, partition_size=2)
    r2 = calibrate(lsat7, model="2pl", prior_a=None)
    with pytest.raises(ConfigError, match="no standard errors; calibrate with se=True"):
        r2.standard_errors()
    r1 = calibrate(lsat7, model="rasch")
    r1b = calibrate(lsat7, model="1pl")
    with pytest.raises(ConfigError, match="same number of parameters"):
        anova(r1, r1b)
    with pytest.raises(ConfigError, match="at least two"):
        anova(r1)
    other = ResponseMatrix(lsat7.values[::-1].copy(), item_ids=lsat7.item_ids,
                           weights=lsat7.weights[::-1] + 1)
    with pytest.raises(ConfigError, match="different data"):
        anova(r1, calibrate(other, model="2pl", prior_a=None))
    with pytest.raises(ConfigError, match="integer category"):
        category_indices(np.array([[0.5, 1.0]]))
    with pytest.raises(ConfigError, match="format must be"):
        calibrate(lsat7, model="rasch", se=True).standard_errors("catR")


def test_same_data_as_patterns_or_rows(lsat7):
    """A matrix and its pattern table are the same data for anova."""
    from atlascat.irt.compare import anova

    rows = np.repeat(lsat7.values, lsat7.weights.astype(int), axis=0)
    full = ResponseMatrix(rows[::-1].copy(), item_ids=lsat7.item_ids)
    table = anova(calibrate(lsat7, model="rasch"), calibrate(full, model="2pl", prior_a=None))
    assert table.loc["2pl", "X2"] == pytest.approx(12.1916, abs=0.01)


def test_fingerprint_of_answers_is_that_of_the_unique_rows_of_the_scores(rng):
    """0/1 answers are fingerprinted through one-byte codes sorted as bytes: the same hash as
    the scores' unique rows in numerical order (the rule for any scores), with weights,
    repeated rows and item ids in any order; partial credit and -0.0 take the rule itself."""
    import hashlib

    from atlascat.irt.calibrate import _fingerprint

    def by_unique_rows(values, w, item_ids):
        order = np.argsort(np.asarray(item_ids).astype(str))
        rows, inv = np.unique(np.nan_to_num(values[:, order], nan=-1.0), axis=0,
                              return_inverse=True)
        freq = np.bincount(inv.reshape(-1), weights=w, minlength=len(rows))
        h = hashlib.sha1(np.ascontiguousarray(rows).tobytes())
        h.update(np.round(np.asarray(freq, dtype=float), 9).tobytes())
        h.update("|".join(np.asarray(item_ids)[order].astype(str)).encode())
        return h.hexdigest()[:16]

    y = (rng.random((90, 12)) < 0.5).astype(float)
    y[rng.random(y.shape) < 0.3] = np.nan
    y = np.concatenate([y, y[:40], y[5:9]])
    ids = np.array(rng.permutation([f"q{j}" for j in range(12)]), dtype=object)
    part, negzero = y.copy(), y.copy()
    part[3, 4], negzero[3, 4] = 0.5, -0.0
    for values in (y, np.asfortranarray(y), part, negzero):
        for w in (None, rng.random(len(y))):
            assert _fingerprint(values, w, ids) == by_unique_rows(values, w, ids)
    assert _fingerprint(y, None, ids) != _fingerprint(y[::-1][1:], None, ids)


def test_background_thread_returns_the_value_or_raises_the_error():
    """The fingerprint's thread on a GPU fit (calibrate._in_background): its value, or its
    exception raised where the result is asked for."""
    from atlascat.irt.calibrate import _in_background

    assert _in_background(sorted, [3, 1, 2]).result() == [1, 2, 3]
    with pytest.raises(ZeroDivisionError):
        _in_background(divmod, 1, 0).result()


@pytest.mark.parametrize("model", ["graded", "gpcm"])
def test_science_ordinal_fit_standard_errors_and_criteria(model):
    """calibrate(..., model="graded" | "gpcm", se=True) on mirt's Science data: SEs within 2%
    of mirt's, log-likelihood >= mirt's - 0.01, AIC/BIC/SABIC/HQ within 0.05. mirt's default
    TOL stops its GPCM short of the maximum (Future's a1 2.204, SE 0.646; converged 2.237,
    SE 0.671): the GPCM's SEs are compared with mirt's at TOL = 1e-8."""
    sci = pd.read_csv(REF / "science.csv")
    res = calibrate(sci, model=model, se=True)
    ref = mirt_items("science_graded" if model == "graded" else "science_gpcm_tight")
    got = res.standard_errors("mirt")
    for p in ("a1", "d1", "d2", "d3"):
        want = ref[ref.parameter == p]
        np.testing.assert_allclose(got[f"{p}_se"], want.se, rtol=0.02)
        # (the parameters' own parity, tighter, is tests/test_polytomous_parity.py's)
        np.testing.assert_allclose(got[p], want.value, atol=2e-2)
    fit = mirt_fit(f"science_{model}")
    ic = res.information_criteria()
    assert ic["n_parameters"] == fit["n_parameters"] == 16
    assert ic["loglik"] >= fit["loglik"] - 0.01
    for k in ("AIC", "BIC", "SABIC", "HQ"):
        assert ic[k.lower()] == pytest.approx(fit[k], abs=0.05)
    ours = res.standard_errors("ours")           # b_k = -d_k / a by the delta method
    assert list(ours.columns[:5]) == ["item_id", "a", "a_se", "b1", "b1_se"]


def test_mixed_binary_and_ordinal_information_is_minus_the_brute_force_hessian(rng):
    """0/1 and 0-3 graded items together (NaN-padded parameters, -inf log-probabilities in the
    categories an item lacks): minus the finite-difference Hessian of the marginal
    log-likelihood (an identity at any parameter value: the generating one here)."""
    from atlascat.irt import polytomous as poly
    from atlascat.irt.se import ordinal_standard_errors

    n = 500
    th = rng.normal(size=n)
    cuts = [-1.2, 0.0, 1.1]
    cols = [(rng.random(n) < 1 / (1 + np.exp(-(1.2 * th + d)))).astype(float)
            for d in (-0.5, 0.3, 1.0)]
    cols += [np.digitize(1.1 * th + rng.logistic(size=n), cuts).astype(float) for _ in range(3)]
    y = np.column_stack(cols)
    y[rng.random(y.shape) < 0.05] = np.nan
    nan = np.nan
    P = np.array([[1.2, -0.5, nan, nan], [1.2, 0.3, nan, nan], [1.2, 1.0, nan, nan]]
                 + [[1.1] + [-c for c in cuts]] * 3)
    s = ordinal_standard_errors(y, None, P, "graded", item_ids=[f"q{j}" for j in range(6)],
                                nodes=QUAD.nodes, log_weights=QUAD.log_weights, model="graded")
    assert s.free.sum() == 3 * 2 + 3 * 4
    yc = category_indices(y)

    def loglik(v):
        q = P.copy()
        q[s.free] = v
        return marginal_loglik(lambda p, x: poly.log_prob("graded", p, x), q, yc, np.ones(n),
                               QUAD.log_weights)

    H = fd_hessian(loglik, P[s.free])
    np.testing.assert_allclose(s.info.matrix, -H, rtol=5e-3, atol=5e-3)
    frame = s.frame("mirt")
    assert frame.loc[:2, "d2_se"].isna().all() and frame.loc[3:, "d3_se"].notna().all()


def test_4pl_information_is_minus_the_brute_force_hessian_of_the_log_posterior(rng):
    """The upper asymptote's derivatives (logit u) and its beta prior, the 4PL with priors."""
    y = _binary_data(rng, n=1000, m=5, c=0.1)
    res = calibrate(y, model="4pl", prior_a="lognorm(0,0.5)", prior_c="beta(5,17)",
                    prior_u="beta(17,5)", se=True)
    s = res.se
    from atlascat.irt.itemmodel import ItemModel
    from atlascat.irt.priors import parse_prior

    im = ItemModel("4pl", parse_prior("lognorm(0,0.5)", "a"), parse_prior("beta(5,17)", "c"),
                   parse_prior("beta(17,5)", "c"))
    yc = category_indices(y)
    P = s.params.copy()

    def logpost(v):
        q = v.reshape(-1, 4)
        th = np.column_stack([np.log(q[:, 0]), q[:, 1], q[:, 2], q[:, 3]])
        return (marginal_loglik(binary_log_prob, q, yc, np.ones(len(y)), QUAD.log_weights)
                + float(np.sum(im.log_prior(th, np))))

    H = fd_hessian(logpost, P.reshape(-1))
    np.testing.assert_allclose(s.info.matrix, -H, rtol=5e-3, atol=5e-3)
    assert list(res.standard_errors("mirt").columns[1:]) == [
        "a1", "a1_se", "d", "d_se", "g", "g_se", "u", "u_se"]


def test_anova_of_fits_with_priors_has_no_test(lsat7):
    """A prior makes the fit a posterior mode: as mirt's anova, the table then gives logPost and
    df, no X2 or p (the maximum-likelihood fits, as atlas anova makes them, keep the test)."""
    import warnings

    from atlascat.irt.compare import anova

    rasch = calibrate(lsat7, model="rasch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = anova(rasch, calibrate(lsat7, model="2pl"))        # auto: a ~ lognorm(0, 1)
        assert "X2" not in table.columns and table.loc["2pl", "df"] == 4
        assert table.loc["2pl", "logPost"] < table.loc["2pl", "logLik"]
        assert np.isfinite(anova(rasch, calibrate(lsat7, model="2pl", prior_a=None))
                           .loc["2pl", "X2"])


def test_science_partial_credit_model_is_mirts_rasch_and_nested_in_the_gpcm():
    """calibrate(..., model="pcm", se=True): mirt's "Rasch" of ordinal items (slopes 1, the
    latent variance estimated) on Science: log-likelihood >= mirt's - 0.01, intercepts within
    2e-3, their SEs and the variance's within 2%, 13 parameters; the bank on N(0, 1) with
    a = sigma; anova(pcm, gpcm) is mirt's (X2 13.185 on 3 df)."""
    from atlascat.irt.compare import anova

    sci = pd.read_csv(REF / "science.csv")
    pcm = calibrate(sci, model="pcm", se=True)
    fit = mirt_fit("science_pcm")
    ic = pcm.information_criteria()
    assert ic["n_parameters"] == fit["n_parameters"] == 13
    assert ic["loglik"] >= fit["loglik"] - 0.01
    for k in ("AIC", "BIC", "SABIC", "HQ"):
        assert ic[k.lower()] == pytest.approx(fit[k], abs=0.05)
    assert pcm.latent_variance == pytest.approx(fit["latent_variance"], rel=2e-3)
    assert pcm.se.latent_variance_se == pytest.approx(fit["latent_variance_se"], rel=0.02)
    ref = mirt_items("science_pcm")
    got = pcm.standard_errors("mirt")                 # as fitted: a = 1, d's and their SEs
    assert "a1" not in got
    for p in ("d1", "d2", "d3"):
        want = ref[ref.parameter == p]
        np.testing.assert_allclose(got[p], want.value, atol=2e-3)
        np.testing.assert_allclose(got[f"{p}_se"], want.se, rtol=0.02)
    np.testing.assert_allclose(pcm.bank.params[:, 0], np.sqrt(pcm.latent_variance))
    assert set(pcm.bank.models) == {"gpcm"}
    table = anova(pcm, calibrate(sci, model="gpcm"))
    want = pd.read_csv(REF / "anova_science_pcm_gpcm.csv").set_index("model")
    assert list(table.index) == ["pcm", "gpcm"] and table.loc["gpcm", "df"] == 3
    assert table.loc["gpcm", "X2"] == pytest.approx(want.loc["gpcm", "X2"], abs=0.02)
    assert table.loc["gpcm", "p"] == pytest.approx(want.loc["gpcm", "p"], rel=0.02)
