"""The adaptive test's MAP / ML / WLE estimators (``CATConfig(estimator=...)``).

Parity with catR's ``thetaEst`` / ``semTheta`` (data/catr_estimators/make_reference.R: a 4PL
bank, 12 subjects, 20 items each in a fixed order, after every step); the estimating
equations at the estimate; agreement with the full-test scoring of ``atlascat.irt.ability``;
a batched simulation equal to one-examinee sessions; the config round trip.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.cat.config import CATConfig, Estimation
from atlascat.cat.session import CATSession
from atlascat.cat.simulate import simulate_cat
from atlascat.errors import ConfigError
from atlascat.irt.ability import estimate_ability, estimating_terms
from atlascat.irt.bank import ItemBank

DATA = Path(__file__).parent / "data"
CATR = {"eap": "EAP", "map": "BM", "ml": "ML", "wle": "WL"}


@pytest.fixture(scope="module")
def catr():
    bank = ItemBank.read(DATA / "catr_4pl" / "bank.csv")
    answers = pd.read_csv(DATA / "catr_4pl" / "responses.csv").set_index("id")
    return bank, answers, pd.read_csv(DATA / "catr_estimators" / "reference.csv")


def _replay(bank, answers, ref, method):
    """ATLAS's theta, SE (EAP: the posterior SD, catR's eapSem) after every step of ref's
    item sequences, in ref's row order."""
    cfg = CATConfig.reference(estimator=method, min_items=20, max_items=20, se_stop=None)
    ids = list(bank.item_ids)
    theta, se = [], []
    steps = ref[ref["method"] == CATR[method]]
    for subject, rows in steps.groupby("subject", sort=False):
        s = CATSession(bank, cfg, rng=0)
        for item, y in zip(rows["item"], rows["response"]):
            assert int(answers.iloc[subject][ids[item]]) == y
            s.record(ids[item], y)
            theta.append(s.theta)
            se.append(s.posterior_sd if method == "eap" else s.se)
    return np.array(theta), np.array(se), steps


@pytest.mark.parametrize("method", ["eap", "map", "ml", "wle"])
def test_every_step_equals_catr_theta_est_and_sem_theta(catr, method):
    """theta and SE after each of 240 steps equal catR's. EAP: to 1e-10 (the same trapezoid
    sums). MAP / ML / WLE: to 1e-8 against catR's root refined to tol 1e-13 (``theta_tight``,
    semTheta there), and within 2e-4 of thetaEst itself, whose uniroot stops at its default
    tolerance (1.2e-4 in theta). ML's all-right / all-wrong patterns: catR's bounds +-4, SE
    1 / sqrt(I) there."""
    bank, answers, ref = catr
    theta, se, steps = _replay(bank, answers, ref, method)
    tight = 1e-10 if method == "eap" else 1e-8
    np.testing.assert_allclose(theta, steps["theta_tight"], rtol=0, atol=tight)
    np.testing.assert_allclose(se, steps["se_tight"], rtol=0, atol=tight)
    np.testing.assert_allclose(theta, steps["theta"], rtol=0, atol=2e-4)
    if method == "ml":
        at = np.abs(steps["theta"].to_numpy()) == 4.0
        assert at.sum() > 20 and np.all(np.abs(theta[at]) == 4.0)


@pytest.fixture(scope="module")
def bank3pl():
    rng = np.random.default_rng(5)
    n = 150
    return ItemBank([f"i{j}" for j in range(n)], rng.lognormal(0.1, 0.3, n),
                    rng.normal(0, 1.2, n), rng.uniform(0, 0.25, n))


def _answers(res, bank):
    """The scored answers of every examinee as a (n, J) matrix in bank order (NaN: not asked)."""
    adm = res.administered
    persons = res.persons
    y = np.full((len(persons), len(bank)), np.nan)
    row = {s: i for i, s in enumerate(persons["subject_id"])}
    y[adm["subject_id"].map(row), bank.index_of(list(adm["item_id"]))] = adm["score"]
    return y


@pytest.mark.parametrize("method", ["map", "ml", "wle"])
def test_simulated_estimates_solve_their_equations_and_equal_full_test_scoring(bank3pl, method):
    """After a 3PL test of 12 items: the estimating equation is 0 at theta (ML:
    sum a (y - P)(P - c) / (P (1 - c)) = S, MAP: S - theta, WLE: S + J / (2 I)), and theta and
    SE equal ``estimate_ability(method)`` (``atlas score --method``) on the same answers,
    bounds [-4, 4]; ML's all-right / all-wrong examinees sit at the bounds, SE 1 / sqrt(I)."""
    thetas = np.r_[np.linspace(-2.5, 2.5, 38), 9.0, -9.0]   # the last two: all right / wrong
    cfg = CATConfig.fixed_length(12, estimator=method, theta_range=(-4, 4))
    res = simulate_cat(bank3pl, cfg, thetas=thetas, rng=np.random.default_rng(1))
    theta, se = res.persons["theta"].to_numpy(), res.persons["se"].to_numpy()
    y = _answers(res, bank3pl)
    s, i, j = estimating_terms(theta, y, bank3pl)
    g = {"ml": s, "map": s - theta, "wle": s + j / (2 * i)}[method]
    inner = np.abs(theta) < 4
    assert np.all(np.abs(g[inner]) <= 1e-8 * i[inner])
    np.testing.assert_allclose(se, 1 / np.sqrt(i + (method == "map")), rtol=1e-12)
    a, b, c, _ = bank3pl.params   # ML's score in the textbook form (Baker and Kim, 2004)
    p = bank3pl.probability(theta)
    textbook = np.nansum(a * (y - p) * (p - c) / (p * (1 - c)), axis=1)
    np.testing.assert_allclose(textbook[inner], s[inner], atol=1e-9)
    full = estimate_ability(y, bank3pl, method, bounds=(-4, 4))
    np.testing.assert_allclose(theta[inner], full["theta"].to_numpy()[inner], atol=1e-7)
    np.testing.assert_allclose(se[inner], full["se"].to_numpy()[inner], atol=1e-7)
    if method == "ml":
        assert theta[-2] == 4.0 and theta[-1] == -4.0
        assert np.all(np.isfinite(se))
    elif method == "wle":   # the all-right pattern's root is beyond 4 (5.1): bounded as catR
        assert theta[-2] == 4.0 and inner[:-2].all() and inner[-1]
        assert estimate_ability(y[-2:-1], bank3pl, "wle")["theta"].iloc[0] > 4
    else:
        assert inner.all()


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("method", ["map", "ml", "wle"])
def test_batched_simulation_equals_one_examinee_sessions(bank3pl, method, k):
    """Rows do not see each other: examinee i of simulate_cat and a CATSession with the same
    generators give the same items, thetas and SEs, bit for bit; also in rounds of k = 4
    items (the round's virtual answers and their undoing include the estimator's sums)."""
    cfg = CATConfig(estimator=method, se_stop=0.35, min_items=5, max_items=40)
    thetas = np.linspace(-2, 2, 12)
    res = simulate_cat(bank3pl, cfg, thetas=thetas, rng=np.random.default_rng(7), batch_size=k)
    rng = np.random.default_rng(7)
    sel, ans = rng.spawn(12), rng.spawn(12)
    a, b, c, u = bank3pl.params
    for i in range(12):
        s = CATSession(bank3pl, cfg, rng=sel[i])
        while items := s.next_items(k):
            j = bank3pl.index_of(items)
            p = c[j] + (u[j] - c[j]) / (1 + np.exp(-a[j] * (thetas[i] - b[j])))
            s.record_many(items, [float(ans[i].random() < pj) for pj in p])
        batch = res.selected_items(str(i))
        assert list(batch["item_id"]) == list(s.history["item_id"])
        np.testing.assert_array_equal(batch["theta"], s.history["theta"])
        np.testing.assert_array_equal(batch["se"], s.history["se"])


def test_estimator_setting_round_trips_and_is_checked():
    c = CATConfig(estimator="wle")
    assert c.estimation.method == "wle" and c.to_dict()["estimator"] == "wle"
    assert CATConfig.from_dict(c.to_dict()) == c
    assert CATConfig(estimation=Estimation(method="map")) == CATConfig(estimator="map")
    assert "estimator" not in CATConfig().to_dict()   # the stored form of an EAP config
    assert CATConfig.from_dict(CATConfig().to_dict()).estimation.method == "eap"
    with pytest.raises(ConfigError, match="estimator must be one of"):
        CATConfig(estimator="bm")
    with pytest.raises(ConfigError, match="posterior"):
        CATConfig(estimator="ml", se_method="posterior")


@pytest.mark.parametrize("method", ["ml", "map"])
def test_cost_stop_uses_the_estimators_information_se(bank3pl, method):
    """The cost rule's expected SE after the best item is 1 / sqrt(I + I_best (+ 1/sigma^2 for
    MAP only)): the test stops exactly where value x (SE - that) < cost first holds."""
    from atlascat.irt.models import item_information

    cfg = CATConfig(estimator=method, min_items=3, max_items=60, se_stop=None,
                    value_per_se=40.0, cost_per_item=1.0, randomesque=1)
    a, b, c, u = bank3pl.params
    s = CATSession(bank3pl, cfg, rng=3)
    coin = np.random.default_rng(4)
    stopped = False
    while (item := s.next_item()) is not None:
        s.record(item, float(coin.random() < 0.6))
        used = np.isin(bank3pl.item_ids, s.administered)
        info = item_information(s.theta, a, b, c, u)
        total = info[used].sum() + (1.0 if method == "map" else 0.0)
        best = info[~used].max()
        expect = s.n_items >= 3 and 40.0 * (s.se - 1 / np.sqrt(total + best)) < 1.0
        assert s.se == pytest.approx(1 / np.sqrt(total), rel=1e-10)
        assert (s.stop_reason == "cost") == expect, s.n_items
        stopped = stopped or expect
    assert stopped


@pytest.mark.parametrize("method", ["map", "ml", "wle"])
def test_continuous_scores_equal_full_test_scoring(method):
    """A bank with a ``dispersion`` column (scores in [0, 1], every term divided by phi_j):
    the adaptive test's estimate equals ``estimate_ability`` on the same answers."""
    rng = np.random.default_rng(2)
    n = 80
    meta = pd.DataFrame({"dispersion": rng.uniform(0.3, 0.9, n)})
    bank = ItemBank([f"i{j}" for j in range(n)], rng.lognormal(0.1, 0.3, n),
                    rng.normal(0, 1, n), metadata=meta)
    p = bank.probability(np.linspace(-1.5, 1.5, 10))
    scores = np.clip(p + rng.normal(0, 0.15, p.shape), 0, 1)
    cfg = CATConfig.fixed_length(12, estimator=method, theta_range=(-4, 4))
    res = simulate_cat(bank, cfg, responses=scores, rng=np.random.default_rng(1))
    y = _answers(res, bank)
    full = estimate_ability(y, bank, method, bounds=(-4, 4))
    np.testing.assert_allclose(res.persons["theta"], full["theta"], atol=1e-7)
    np.testing.assert_allclose(res.persons["se"], full["se"], atol=1e-7)
