"""The adaptive test on a bank of continuous scores: the bank's ``dispersion`` column
(each item's phi_j, Var(y | theta) = phi_j P Q) enters the CAT's posterior, its SE and its item
information (the extended quasi-likelihood, :mod:`atlascat.irt.dispersion`); a bank of 0/1
answers has no such column and runs exactly as before."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from atlascat.cat.config import CATConfig
from atlascat.cat.session import CATSession
from atlascat.cat.simulate import simulate_cat
from atlascat.cat.tables import _tables, bank_fingerprint
from atlascat.errors import BankError
from atlascat.irt.ability import estimate_ability
from atlascat.irt.bank import ItemBank
from atlascat.irt.calibrate import Calibrator
from atlascat.irt.dispersion import bank_dispersion, without_dispersion
from atlascat.responses import ResponseMatrix


def beta_scores(mu, phi, rng):
    """Beta scores with mean ``mu`` and variance phi mu (1 - mu): Beta(mu k, (1 - mu) k),
    k = 1 / phi - 1."""
    k = 1.0 / np.asarray(phi, float) - 1.0
    m = np.clip(mu, 1e-4, 1 - 1e-4)
    return rng.beta(m * k, (1.0 - m) * k)


def make_bank(J=150, seed=0, phi=None):
    rng = np.random.default_rng(seed)
    a, b = rng.lognormal(0.0, 0.3, J), rng.normal(0.0, 1.2, J)
    meta = None if phi is None else pd.DataFrame({"dispersion": np.broadcast_to(phi, (J,))})
    return ItemBank([f"i{j}" for j in range(J)], a, b, metadata=meta)


def test_binary_calibration_writes_no_dispersion_and_the_cat_is_unchanged():
    rng = np.random.default_rng(3)
    truth = make_bank(40, 1)
    theta = rng.normal(size=400)
    coins = (rng.random((400, 40)) < truth.probability(theta)).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bank = Calibrator(model="2pl", dispersion="auto").fit(ResponseMatrix(coins)).bank_
    assert bank.metadata is None
    ones = bank.with_metadata(pd.DataFrame({"item_id": bank.item_ids, "dispersion": 1.0}))
    assert bank_dispersion(ones) is None and bank_fingerprint(ones) == bank_fingerprint(bank)
    tab = _tables(bank, CATConfig())
    assert tab.lp_post is tab.lp and tab.lq_post is tab.lq
    cfg = CATConfig().replace(se_stop=0.3, se_method="information")
    y = coins[:25]
    r0 = simulate_cat(bank, cfg, responses=y, rng=5).persons
    r1 = simulate_cat(ones, cfg, responses=y, rng=5).persons
    pd.testing.assert_frame_equal(r0.drop(columns="seconds"), r1.drop(columns="seconds"))


def test_continuous_calibration_writes_the_dispersion_and_it_round_trips(tmp_path):
    rng = np.random.default_rng(4)
    truth = make_bank(30, 2)
    theta = rng.normal(size=1500)
    y = beta_scores(truth.probability(theta), 0.3, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = Calibrator(model="2pl", dispersion="auto").fit(ResponseMatrix(y))
    phi = bank_dispersion(cal.bank_)
    np.testing.assert_allclose(phi, cal.result_.settings["dispersion"], atol=5e-5)
    assert np.all(np.abs(phi - 0.3) < 0.08)
    path = cal.bank_.write(tmp_path / "bank.csv")
    np.testing.assert_array_equal(bank_dispersion(ItemBank.read(path)), phi)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = Calibrator(model="2pl").fit(ResponseMatrix(y)).bank_
    assert plain.metadata is None                  # the default calibration carries none


def test_the_posterior_and_information_are_divided_by_the_dispersion():
    """Every item administered: the CAT's theta and SE are the extended quasi-likelihood's EAP
    and posterior SD (estimate_ability on the same bank), and the information SE is
    1/sqrt(sum a^2 P Q / phi + 1)."""
    rng = np.random.default_rng(5)
    J = 40
    phi = rng.uniform(0.1, 0.6, J)
    bank = make_bank(J, 3, phi)
    y = beta_scores(bank.probability(rng.normal(size=6)), phi, rng)
    cfg = CATConfig().replace(se_stop=None, max_items=J, quadpts=61, theta_range=(-6, 6),
                              quadrature_rule="rectangle")
    res = simulate_cat(bank, cfg, responses=y, rng=0).persons
    # the CAT's posterior lives on its grid alone: the EAP on that grid (quadrature="fixed")
    ref = estimate_ability(y, bank, "eap", quadpts=61, theta_range=(-6, 6), quadrature="fixed")
    np.testing.assert_allclose(res.theta, ref.theta, atol=1e-9)
    np.testing.assert_allclose(res.posterior_sd, ref.se, atol=1e-9)
    plain = estimate_ability(y, without_dispersion(bank), "eap", quadpts=61, theta_range=(-6, 6),
                             quadrature="fixed")
    assert np.all(ref.se < plain.se * 0.8)
    info_cfg = cfg.replace(se_method="information")
    res = simulate_cat(bank, info_cfg, responses=y, rng=0).persons
    th = res.theta.to_numpy()
    p = bank.probability(th)
    info = (np.asarray(bank.a) ** 2 * p * (1 - p) / phi).sum(1)
    np.testing.assert_allclose(res.se, 1 / np.sqrt(info + 1.0), rtol=1e-10)
    s = CATSession(bank, info_cfg, rng=0)       # a live session: the same arithmetic
    for _ in range(J):
        j = s.next_item()
        s.record(j, float(y[0, bank.index_of(j)]))
    assert s.theta == pytest.approx(th[0], abs=1e-12)


def test_continuous_scores_stop_early_with_an_honest_se():
    """Beta scores with phi = 0.2 on the bank's true items: with the dispersion the CAT stops
    at SE 0.3 after a fraction of the items and its 95% interval covers the true theta about
    95% of the time; the Bernoulli posterior (no column) asks for far more items."""
    rng = np.random.default_rng(6)
    bank = make_bank(150, 4, 0.2)
    theta = rng.normal(size=400)
    y = beta_scores(bank.probability(theta), 0.2, rng)
    cfg = CATConfig().replace(se_stop=0.3, max_items=150, min_items=1)
    with_phi = simulate_cat(bank, cfg, responses=y, rng=1).persons
    plain = simulate_cat(without_dispersion(bank), cfg, responses=y, rng=1).persons
    cover = np.mean(np.abs(with_phi.theta - theta) <= 1.96 * with_phi.se)
    assert 0.90 <= cover <= 0.99
    assert with_phi.n_items.mean() < 0.4 * plain.n_items.mean()
    assert np.mean(np.abs(plain.theta - theta) <= 1.96 * plain.se) > 0.985   # too wide


def test_model_answers_follow_the_bank_dispersion():
    """thetas=: on a bank with a dispersion column the answers are the Beta scores of
    :func:`draw_scores` (they used to be coins, scored without the column); a column of 1s is
    the 0/1 bank exactly."""
    bank = make_bank(60, 5, 0.3)
    cfg = CATConfig().replace(se_stop=0.4)
    thetas = np.linspace(-2, 2, 12)
    a = simulate_cat(bank, cfg, thetas=thetas, rng=2)
    b = simulate_cat(without_dispersion(bank), cfg, thetas=thetas, rng=2)
    ones = simulate_cat(make_bank(60, 5, 1.0), cfg, thetas=thetas, rng=2)
    pd.testing.assert_frame_equal(ones.persons.drop(columns="seconds"),
                                  b.persons.drop(columns="seconds"))
    assert not a.persons["theta"].equals(b.persons["theta"])
    assert a.persons["se"].mean() < b.persons["se"].mean()   # the quasi-likelihood's SE


def test_a_bad_dispersion_column_is_one_clear_error():
    bank = make_bank(5, 6)
    bad = bank.with_metadata(pd.DataFrame({"item_id": bank.item_ids,
                                           "dispersion": [0.5, 0.2, "x", 0.3, 0.1]}))
    with pytest.raises(BankError, match="dispersion"):
        simulate_cat(bad, CATConfig(), responses=np.ones((2, 5)), rng=0)


@pytest.mark.parametrize("method", ["eap", "wle", "ml", "map"])
def test_scores_on_a_bank_with_dispersions_divide_every_term(method):
    """estimate_ability on a bank with a dispersion column: EAP is the posterior of
    sum_j [y log P + (1 - y) log Q] / phi_j on the grid; ML, MAP and WLE solve the quasi-score
    equations with S, I, J each summed over w_j = 1 / phi_j, SE 1/sqrt(I (+ 1 for MAP))."""
    rng = np.random.default_rng(7)
    J = 40
    phi = rng.uniform(0.1, 0.6, J)
    bank = make_bank(J, 7, phi)
    y = beta_scores(bank.probability(rng.normal(size=30)), phi, rng)
    y[rng.random(y.shape) < 0.2] = np.nan
    # EAP: the formula on the 61-node grid, integrated on that grid alone (quadrature="fixed")
    got = estimate_ability(y, bank, method, quadpts=61, theta_range=(-6, 6), quadrature="fixed")
    seen, w = ~np.isnan(y), 1.0 / phi
    yv = np.where(seen, y, 0.0)
    a, b = np.asarray(bank.a), np.asarray(bank.b)
    if method == "eap":
        nodes = np.linspace(-6, 6, 61)
        p = expit(a * (nodes[:, None] - b))
        lpost = (yv * w) @ np.log(p).T + (np.where(seen, 1 - yv, 0) * w) @ np.log(1 - p).T
        lpost -= 0.5 * nodes ** 2
        post = np.exp(lpost - lpost.max(1, keepdims=True))
        post /= post.sum(1, keepdims=True)
        np.testing.assert_allclose(got.theta, post @ nodes, atol=1e-10)
        return
    th = got.theta.to_numpy()[:, None]
    p = expit(a * (th - b))
    d1 = a * p * (1 - p)
    s = (seen * w * (yv - p) * d1 / (p * (1 - p))).sum(1)
    info = (seen * w * d1 ** 2 / (p * (1 - p))).sum(1)
    jj = (seen * w * d1 * a * (1 - 2 * p) * d1 / (p * (1 - p))).sum(1)
    g = {"ml": s, "map": s - th[:, 0], "wle": s + jj / (2 * info)}[method]
    np.testing.assert_allclose(g, 0.0, atol=1e-6)
    extra = 1.0 if method == "map" else 0.0
    np.testing.assert_allclose(got.se, 1 / np.sqrt(info + extra), rtol=1e-8)


def test_benchmark_calibrates_continuous_scores_with_the_dispersion():
    from atlascat.studies.config import BenchmarkConfig
    from atlascat.studies.protocol import _with_dispersion

    rng = np.random.default_rng(8)
    cont = ResponseMatrix(rng.random((20, 10)))
    coins = ResponseMatrix((rng.random((20, 10)) < 0.5).astype(float))
    cfg = BenchmarkConfig()
    assert _with_dispersion(cfg, cont).calibrate_options == {"dispersion": "auto"}
    assert _with_dispersion(cfg, coins) is cfg
    mine = BenchmarkConfig(calibrate_options={"dispersion": None})
    assert _with_dispersion(mine, cont) is mine


def test_cost_aware_stop_on_continuous_scores_uses_the_quasi_information():
    """value_per_se x (SE - 1/sqrt(1/SE^2 + I_j*/phi)) < cost stops the test: a value just
    above the first item's threshold keeps it going, just below stops it."""
    bank = make_bank(80, 9, 0.2)
    base = CATConfig().replace(se_stop=None, max_items=80, min_items=1, cost_per_item=1.0,
                               se_method="posterior")
    s = CATSession(bank, base, rng=0)
    j = s.next_item()
    s.record(j, 0.6)
    eng, row = s._engine, np.array([0])
    best, info = eng.best_remaining(row)
    assert info[0] == pytest.approx(float(np.ravel(bank.information(s.theta))[best[0]]) / 0.2)
    gain = s.se - 1.0 / np.sqrt(1.0 / s.se ** 2 + info[0])
    for factor, stops in ((0.99, True), (1.01, False)):
        cfg = base.replace(value_per_se=factor / gain)
        t = CATSession(bank, cfg, rng=0)
        t.record(t.next_item(), 0.6)
        assert t.done is stops


def test_kl_selection_is_the_quasi_likelihoods_on_a_bank_with_dispersions():
    """KL information over an interval, like Fisher's, is the quasi-log-likelihood's: each
    item's divided by its phi_j; two items alike but for phi, the less dispersed one is picked."""
    from atlascat.cat.selection import ItemParams, KLInterval

    phi = np.array([0.25, 0.5, 1.0])
    a, b, zeros, ones = np.full(3, 1.3), np.zeros(3), np.zeros(3), np.ones(3)
    crit = KLInterval()
    theta, n = np.array([-0.4, 0.3]), np.array([2, 5])
    plain = crit.scores(theta, n, None, ItemParams(a, b, zeros, ones))
    quasi = crit.scores(theta, n, None, ItemParams(a, b, zeros, ones, dispersion=phi))
    np.testing.assert_allclose(quasi, plain / phi, rtol=1e-12)
    assert np.all(quasi.argmax(axis=1) == 0)
    bank = make_bank(3, 0, phi)
    bank = ItemBank(bank.item_ids, a, b, metadata=bank.metadata)
    for seed in range(3):   # the first item is drawn near theta0; then the least dispersed
        session = CATSession(bank, CATConfig().replace(selection="kl", randomesque=1), rng=seed)
        first = session.next_item()
        session.record(first, 0.6)
        rest = [j for j in ("i0", "i1", "i2") if j != first]
        assert session.next_item() == rest[0]
