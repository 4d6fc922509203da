"""Accuracy reconstruction: p-IRT identities, simulated data, the ARC dense matrix, gp-IRT lambda."""
from __future__ import annotations

import numpy as np
import pytest

from atlascat import catalogue
from atlascat.errors import ConfigError
from atlascat.studies import reconstruction as rc
from atlascat.irt.ability import estimate_ability
from atlascat.irt.bank import ItemBank
from atlascat.responses import ResponseMatrix


def make_bank(rng, n):
    return ItemBank([f"i{k}" for k in range(n)], rng.lognormal(0.2, 0.3, n),
                    rng.normal(0, 1, n), rng.uniform(0, 0.25, n))


def test_pirt_formula(rng):
    bank = make_bank(rng, 40)
    theta = rng.normal(size=6)
    y = (rng.random((6, 40)) < bank.probability(theta)).astype(float)
    # everything administered: p-IRT is the observed accuracy
    np.testing.assert_allclose(rc.pirt(y, bank, theta), y.mean(axis=1))
    # nothing administered: the test characteristic curve / n
    none = np.full_like(y, np.nan)
    np.testing.assert_allclose(rc.pirt(none, bank, theta), bank.probability(theta).mean(axis=1))
    # lambda-weighted form: |A|/|T| * ybar_A + (1 - |A|/|T|) * mean_unseen P
    adm = rng.random(y.shape) < 0.3
    ya = np.where(adm, y, np.nan)
    p = bank.probability(theta)
    lam = adm.sum(1) / 40
    expect = lam * np.nanmean(ya, axis=1) + (1 - lam) * (np.where(adm, 0, p).sum(1) / (~adm).sum(1))
    np.testing.assert_allclose(rc.pirt(ya, bank, theta), expect)
    # target subset by ids and by mask agree; infinite ML thetas are fine
    ids = bank.item_ids[:10]
    mask = np.zeros(40, bool)
    mask[:10] = True
    np.testing.assert_allclose(rc.pirt(ya, bank, theta, items=ids), rc.pirt(ya, bank, theta, items=mask))
    assert np.all(np.isfinite(rc.pirt(ya, bank, np.r_[np.inf, -np.inf, theta[2:]])))
    with pytest.raises(ConfigError):
        rc.gpirt(ya, bank, theta, 1.5)
    g = rc.gpirt(ya, bank, theta, 0.25)
    np.testing.assert_allclose(g, 0.25 * np.nanmean(ya, axis=1) + 0.75 * rc.pirt(ya, bank, theta))


def test_random_administration_is_uniform_and_respects_missing(rng):
    obs = rng.random((300, 50)) < 0.8
    mask = rc.random_administration(obs, 10, rng)
    assert np.all(mask.sum(1) == np.minimum(10, obs.sum(1)))
    assert not np.any(mask & ~obs)
    full = rc.random_administration(np.ones((4000, 20), bool), 5, rng)
    np.testing.assert_allclose(full.mean(0), 0.25, atol=0.03)


def test_pirt_beats_sample_mean_when_the_model_holds(rng):
    bank = make_bank(rng, 300)
    theta = rng.normal(size=800)
    y = (rng.random((800, 300)) < bank.probability(theta)).astype(float)
    frame, summary = rc.pirt_experiment(y, bank, 30, rng=rng)
    assert summary["n_target_items"] == 300 and summary["n_dropped_items"] == 0
    assert summary["mae_pirt"] < 0.9 * summary["mae_sample"]
    # lambda: the model holds, so p-IRT's error is small next to the sample mean's variance
    est = rc.estimate_gpirt_lambda(y, bank, 30, rng=rng)
    assert 0 < est.lam < 0.5
    assert est.lam == pytest.approx(est.mse_pirt / (est.mse_pirt + est.var_sample))
    # a wrong bank (flat item curves, a = 0.3: theta shrinks to the prior) makes p-IRT biased;
    # lambda moves towards the sample mean. (A common shift of b would not: theta absorbs it.)
    wrong = ItemBank(bank.item_ids, np.full(300, 0.3), bank.b, bank.c)
    est_wrong = rc.estimate_gpirt_lambda(y, wrong, 30, rng=rng)
    assert est_wrong.mse_pirt > 2 * est.mse_pirt
    assert est_wrong.lam > est.lam + 0.15
    val = rc.estimate_gpirt_lambda(y, wrong, 30, rng=rng, method="validation")
    assert val.mae_by_lambda.idxmin() == val.lam


def test_pirt_on_arc_dense_matrix():
    """Acceptance: 100 random items per model, published ARC bank, ids normalized; items of the
    matrix that the bank lacks are dropped from the target (they cannot be predicted)."""
    rm = catalogue.load_responses("arc")
    bank = catalogue.load_paper_bank("arc")
    n_extra = sum(i not in bank for i in rm.item_ids)
    assert n_extra > 0
    frame, s = rc.pirt_experiment(rm, bank, 100, rng=np.random.default_rng(0))
    assert s["n_dropped_items"] == n_extra and s["n_target_items"] == rm.n_items - n_extra
    assert (frame["n_administered"] == 100).all()
    # the paper reports ~0.03; on this matrix p-IRT reaches ~0.02 and beats the raw sample mean
    assert s["mae_pirt"] < 0.03
    assert s["mae_pirt"] < s["mae_sample"]
    # gp-IRT: lambda from half of the models, evaluated on the other half
    half = np.random.default_rng(1).permutation(rm.n_subjects)
    cal = rm.subset(subjects=half[: rm.n_subjects // 2])
    test = rm.subset(subjects=half[rm.n_subjects // 2:])
    est = rc.estimate_gpirt_lambda(cal, bank, 100, rng=np.random.default_rng(2), n_draws=1)
    assert 0 < est.lam < 1
    _, s2 = rc.pirt_experiment(test, bank, 100, rng=np.random.default_rng(3), lam=est.lam)
    assert s2["mae_gpirt"] <= s2["mae_pirt"] + 1e-3
    assert s2["mae_gpirt"] < s2["mae_sample"]


def test_reconstruct_accuracy_frame(rng):
    bank = make_bank(rng, 20)
    theta = rng.normal(size=5)
    y = (rng.random((5, 20)) < bank.probability(theta)).astype(float)
    y[:, 10:] = np.nan
    rm = ResponseMatrix(y, [f"m{k}" for k in range(5)], bank.item_ids, on_empty="keep")
    out = rc.reconstruct_accuracy(rm, bank, lam=0.3)
    assert list(out.columns) == ["subject_id", "n_administered", "accuracy_observed",
                                 "accuracy_pirt", "accuracy_gpirt"]
    assert (out["n_administered"] == 10).all()
    th = estimate_ability(rm, bank)["theta"]
    np.testing.assert_allclose(out["accuracy_pirt"], rc.pirt(y, bank, th))
