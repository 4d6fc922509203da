"""Parity with mirt 1.45.1 on ordinal items: mirt's Science data (graded and gpcm) and a
simulated 20-item, 5-category set (graded). References made once by
tests/data/mirt_poly/make_reference.R (never run from the tests).

mirt stops its EM when no parameter moved by more than TOL = 1e-4 in one cycle; on Science
that point lies up to 0.01 from the maximum in the slopes (mirt's own TOL = 1e-8 fit moves
there, *_tight files). Log-likelihoods are compared with mirt's default fit (ours must be at
least as high), parameters with the maximum (mirt at TOL = 1e-8), EAP scores with mirt's
default fit's and, on mirt's own parameters, exactly.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from atlascat.irt.ability import estimate_ability
from atlascat.irt.calibrate import calibrate
from atlascat.irt.polybank import PolyBank

REF = Path(__file__).parent / "data" / "mirt_poly"
CASES = [("science", "graded", "science_graded"), ("science", "gpcm", "science_gpcm"),
         ("sim_graded", "graded", "sim_graded")]


def _data(name):
    return pd.read_csv(REF / f"{name}.csv").set_index("subject_id")


def _items(ref):
    it = pd.read_csv(REF / f"{ref}_items.csv")
    return it.item_id.astype(str).to_numpy(), it.iloc[:, 1:].to_numpy(float)


@pytest.fixture(scope="module")
def fits():
    return {(d, m): calibrate(_data(d), model=m) for d, m, _ in CASES}


@pytest.mark.parametrize("data, model, ref", CASES)
class TestMirtParity:
    def test_loglik_aic_bic(self, fits, data, model, ref):
        res = fits[data, model]
        s = json.loads((REF / f"{ref}_summary.json").read_text())
        assert res.converged
        assert res.loglik >= s["loglik"] - 0.01
        top = json.loads((REF / f"{ref}_tight_summary.json").read_text())["loglik"]
        assert res.loglik <= top + 1e-6             # the same likelihood, not another one
        k = int(res.bank.n_cat.sum())                # a1 and K-1 intercepts per item
        n = len(res.subject_ids)
        assert abs(-2 * res.loglik + 2 * k - s["aic"]) < 0.05
        assert abs(-2 * res.loglik + np.log(n) * k - s["bic"]) < 0.05

    def test_parameters_at_the_maximum(self, fits, data, model, ref):
        ids, tight = _items(f"{ref}_tight")
        res = fits[data, model]
        assert res.bank.item_ids.tolist() == ids.tolist()
        assert_allclose(res.bank.params, tight, atol=2e-3)
        # and within mirt's own stopping error of its default fit
        assert_allclose(res.bank.params, _items(ref)[1], atol=0.1)

    def test_eap_scores(self, fits, data, model, ref):
        eap = pd.read_csv(REF / f"{ref}_eap.csv")
        res = fits[data, model]
        ours = estimate_ability(_data(data), res.bank, "eap")
        # mirt's default gpcm fit on Science stops 0.08 from the maximum: its EAPs move 0.014
        assert_allclose(ours.theta, eap.theta, atol=0.02 if model == "gpcm" else 0.01)
        assert_allclose(ours.se, eap.se, atol=0.005)
        # the calibration's own EAP is atlas score's (mirt's fscores: 121 nodes), whatever
        # grid the fit took (61 nodes)
        assert_allclose(res.theta, ours.theta, atol=1e-10)
        assert_allclose(res.theta_se, ours.se, atol=1e-10)
        # on mirt's parameters, mirt's EAP exactly
        ids, p = _items(ref)
        bank = PolyBank(ids, p, model, res.bank.levels)
        on_mirt = estimate_ability(_data(data), bank, "eap")
        assert_allclose(on_mirt.theta, eap.theta, atol=1e-5)   # mirt's CSV: 15 digits
        assert_allclose(on_mirt.se, eap.se, atol=1e-5)


def test_simulated_truth_recovered():
    """The simulated set's generating parameters (simdata, 1000 subjects) are recovered within
    sampling error."""
    truth = pd.read_csv(REF / "sim_graded_truth.csv").iloc[:, 1:].to_numpy(float)
    res = calibrate(_data("sim_graded"), model="graded")
    assert_allclose(res.bank.params[:, 0], truth[:, 0], atol=0.35)
    assert np.mean(np.abs(res.bank.params[:, 1:] - truth[:, 1:])) < 0.15


@pytest.mark.parametrize("model", ["graded", "gpcm"])
@pytest.mark.parametrize("method", ["map", "ml", "wle"])
def test_map_ml_wle_on_mirt_parameters(model, method):
    """mirt's fscores MAP / ML / WLE (with SE) on its own Science fit: thetas within mirt's
    optimizer tolerance, SEs from the observed information (WLE: -dg/dtheta)."""
    ids, p = _items(f"science_{model}")
    bank = PolyBank(ids, p, model, [np.arange(1, 5.0)] * len(ids))
    ref = pd.read_csv(REF / f"science_{model}_{method}.csv")
    ours = estimate_ability(_data("science"), bank, method)
    fin = np.isfinite(ref.theta.to_numpy())
    assert_allclose(ours.theta[fin], ref.theta[fin], atol=2e-5)
    assert_allclose(ours.se[fin], ref.se[fin], atol=5e-4)
    assert (ours.theta[~fin].to_numpy() == ref.theta[~fin].to_numpy()).all()  # ML: +-inf
