"""The ordinal adaptive test's MAP / ML / WLE estimators (``CATConfig(estimator=...)`` on a
:class:`PolyBank`).

Parity with catR's ``thetaEst`` / ``semTheta`` for ``model = "GRM"`` and ``"GPCM"``
(data/catr_ordinal/make_reference.R: 15-item banks, 8 subjects x 12 items in a fixed order,
after every step, including all-lowest and all-highest patterns); a batched simulation equal
to one-examinee sessions; a snapshot resumed mid-test continues bit for bit.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.cat.config import CATConfig
from atlascat.cat.ordinal import OrdinalCATSession, simulate_ordinal_cat
from atlascat.irt import polytomous as poly
from atlascat.irt.polybank import PolyBank

DATA = Path(__file__).parent / "data" / "catr_ordinal"
CATR = {"eap": "EAP", "map": "BM", "ml": "ML", "wle": "WL"}


def _bank(model: str) -> PolyBank:
    """catR's (alpha, beta_k) / (alpha, delta_k) as mirt's slope-intercept a1, d1.."""
    raw = pd.read_csv(DATA / f"{model.lower()}_bank.csv").to_numpy()
    ours = "graded" if model == "GRM" else "gpcm"
    d = poly.intercepts(ours, raw[:, 0], raw[:, 1:])
    return PolyBank([f"q{j}" for j in range(len(raw))], np.column_stack([raw[:, 0], d]), ours)


@pytest.fixture(scope="module")
def reference():
    return pd.read_csv(DATA / "reference.csv")


def _replay(bank, steps, method):
    cfg = CATConfig.reference(estimator=method, min_items=12, max_items=12, se_stop=None)
    ids = list(bank.item_ids)
    theta, se = [], []
    for _, rows in steps.groupby("subject", sort=False):
        s = OrdinalCATSession(bank, cfg, rng=0)
        for item, y in zip(rows["item"], rows["response"]):
            s._pending = int(item)          # the reference's order, not the test's own choice
            s.record(ids[item], int(y))
            theta.append(s.theta)
            se.append(s.posterior_sd if method == "eap" else s.se)
    return np.array(theta), np.array(se)


@pytest.mark.parametrize("model", ["GRM", "GPCM"])
@pytest.mark.parametrize("method", ["eap", "map", "ml", "wle"])
def test_every_step_equals_catr(reference, model, method):
    """theta and SE after each of 96 steps equal catR's: EAP to 1e-10 (the same trapezoid
    sums); MAP / ML / WLE to 1e-8 against catR's root refined to 1e-13 and within 2e-4 of
    ``thetaEst`` (uniroot's default tolerance). ML's all-lowest / all-highest patterns: the
    bounds -4 / 4, as catR."""
    bank = _bank(model)
    steps = reference[(reference["model"] == model) & (reference["method"] == CATR[method])]
    theta, se = _replay(bank, steps, method)
    tight = 1e-10 if method == "eap" else 1e-8
    np.testing.assert_allclose(theta, steps["theta_tight"], rtol=0, atol=tight)
    np.testing.assert_allclose(se, steps["se_tight"], rtol=0, atol=tight)
    np.testing.assert_allclose(theta, steps["theta"], rtol=0, atol=2e-4)
    if method == "ml":
        at = np.abs(steps["theta"].to_numpy()) == 4.0
        assert at.sum() >= 24 and np.all(np.abs(theta[at]) == 4.0)


@pytest.fixture(scope="module")
def graded_bank():
    rng = np.random.default_rng(3)
    n, k = 60, 5
    a = rng.uniform(0.8, 2.0, n)
    d = np.sort(rng.normal(0, 1.5, (n, k - 1)), axis=1)[:, ::-1]   # d1 > d2 > ...
    return PolyBank([f"i{j}" for j in range(n)], np.column_stack([a, d]), "graded")


@pytest.mark.parametrize("method", ["map", "ml", "wle"])
def test_a_batch_equals_sessions_and_a_resumed_session_continues(graded_bank, method):
    """A cohort simulated at once asks each examinee what its own session asks, with the same
    theta and SE bit for bit; a session snapshotted after 6 items and resumed ends as the
    uninterrupted one."""
    cfg = CATConfig(estimator=method, min_items=15, max_items=15, se_stop=None)
    thetas = np.array([-2.5, -0.3, 0.4, 2.8])
    p = poly.prob(graded_bank.models, graded_bank.params, thetas)          # (J, 4, K)
    u = np.random.default_rng(2).random((len(graded_bank), 4, 1))
    ratings = pd.DataFrame((u > np.cumsum(p, axis=2)).sum(axis=2).T.astype(float),
                           index=[str(i) for i in range(4)], columns=graded_bank.item_ids)
    rngs = [np.random.default_rng([11, i]) for i in range(4)]
    res = simulate_ordinal_cat(graded_bank, cfg, responses=ratings, rng=rngs)
    for i in range(4):
        mine = res.administered[res.administered["subject_id"] == str(i)]
        s = OrdinalCATSession(graded_bank, cfg, rng=np.random.default_rng([11, i]))
        snap = None
        while (item := s.next_item()) is not None:
            s.record(item, ratings.loc[str(i), item])
            if s.n_items == 6:
                snap = s.to_dict()
        assert list(s.history()["item_id"]) == list(mine["item_id"])
        np.testing.assert_array_equal(s.history()["theta"], mine["theta"])
        np.testing.assert_array_equal(s.history()["se"], mine["se"])
        r = OrdinalCATSession.from_dict(snap, graded_bank)
        while (item := r.next_item()) is not None:
            r.record(item, ratings.loc[str(i), item])
        assert (r.theta, r.se) == (s.theta, s.se)


def test_the_estimate_solves_its_equation_and_differs_from_eap(graded_bank):
    """WLE's theta is a root of S + J / (2 I) over the answered items (checked by finite
    differences of the log-likelihood), and ML/WLE read a strong examinee higher than the
    shrunken EAP."""
    from atlascat.cat import ordinal_estimators as OE

    thetas = np.array([2.5])
    out = {m: simulate_ordinal_cat(graded_bank, CATConfig(estimator=m, min_items=20, max_items=20,
                                                          se_stop=None), thetas=thetas, rng=4)
           for m in ("eap", "wle", "ml")}
    adm = out["wle"].administered
    items = np.asarray(graded_bank.index_of(list(adm["item_id"])))[None, :]
    cats = adm["category"].to_numpy()[None, :]
    th = out["wle"].persons["theta"].to_numpy()
    s, i, j = OE.terms(graded_bank, th, items, cats)
    assert abs(s[0] + j[0] / (2 * i[0])) < 1e-8
    lp = lambda t: float(np.sum(np.log(poly.prob(graded_bank.models, graded_bank.params, t)  # noqa: E731
                                       [items[0], 0, cats[0]])))
    h = 1e-5
    assert abs((lp(th + h) - lp(th - h)) / (2 * h) - s[0]) < 1e-5
    assert out["ml"].persons["theta"][0] > out["eap"].persons["theta"][0]


def test_a_mixed_banks_terms_are_the_models_own():
    """On a bank of graded and GPCM items, S, I and J over the answered items (each (item,
    theta) pair evaluated once, intercepts shifted) equal the item response functions' own
    derivatives at that theta."""
    from atlascat.cat import ordinal_estimators as OE

    rng = np.random.default_rng(0)
    a = rng.uniform(0.8, 2.0, 12)
    d = np.sort(rng.normal(0, 1.5, (12, 3)), axis=1)[:, ::-1]
    d[6:] = rng.normal(0, 1, (6, 3))
    bank = PolyBank([f"q{j}" for j in range(12)], np.column_stack([a, d]),
                    ["graded"] * 6 + ["gpcm"] * 6)
    items = np.array([[0, 7, 3, 11, 8, -1], [6, 1, 2, -1, -1, -1]])
    cats = np.array([[0, 3, 2, 1, 0, -1], [2, 1, 3, -1, -1, -1]])
    theta = np.array([-0.7, 1.3])
    s, i, j = OE.terms(bank, theta, items, cats)
    for r in range(2):
        x = theta[r:r + 1]
        p = poly.prob(bank.models, bank.params, x)[:, 0]
        d1 = poly.dprob_dtheta(bank.models, bank.params, x)[:, 0]
        d2 = poly.d2prob_dtheta2(bank.models, bank.params, x)[:, 0]
        it, ct = items[r][items[r] >= 0], cats[r][items[r] >= 0]
        assert s[r] == pytest.approx(np.sum(d1[it, ct] / p[it, ct]), rel=1e-10)
        assert i[r] == pytest.approx(np.sum(d1[it] ** 2 / p[it]), rel=1e-10)
        assert j[r] == pytest.approx(np.sum(d1[it] * d2[it] / p[it]), rel=1e-10)
