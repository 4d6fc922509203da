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
