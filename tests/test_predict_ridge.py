"""atlascat.predict.regression and the predictor's ridge part (brute-force references,
simulated two-dimensional truth)."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from atlascat.errors import ConfigError
from atlascat.irt.calibrate import Calibrator
from atlascat.predict import BenchmarkPredictor
from atlascat.predict import regression as reg
from atlascat.responses import ResponseMatrix


def _brute(X, s, lam, leave=None):
    """Ridge with an intercept by its normal equations, fitted without row ``leave``."""
    keep = np.ones(len(s), bool) if leave is None else np.arange(len(s)) != leave
    Xk, sk = X[keep], s[keep]
    mx, ms = Xk.mean(0), sk.mean()
    Xc = Xk - mx
    beta = np.linalg.solve(Xc.T @ Xc + lam * np.eye(X.shape[1]), Xc.T @ (sk - ms))
    return lambda x: ms + (x - mx) @ beta


def _brute_choice(X, s):
    """The grid penalty of least leave-one-out error, by refitting S times per penalty."""
    errs = [np.mean([(s[i] - _brute(X, s, lam, i)(X[i])) ** 2 for i in range(len(s))])
            for lam in reg.PENALTIES]
    return reg.PENALTIES[int(np.argmin(errs))]


def test_ridge_scores_equal_refits_with_the_loo_chosen_penalty():
    """Per row: the penalty chosen by PRESS is the one brute-force leave-one-out refits choose;
    the prediction and each source model's leave-one-out prediction equal explicit refits."""
    rng = np.random.default_rng(3)
    n_src, n_items = 25, 40
    answers = (rng.random((n_src, n_items)) < rng.uniform(0.2, 0.8, n_items)).astype(float)
    scores = answers.mean(1) + rng.normal(0, 0.02, n_src)
    item = np.array([rng.choice(n_items, 8, replace=False) for _ in range(4)])
    valid = np.ones(item.shape, bool)
    valid[3, 6:] = False                          # a row with two draws not made
    target = (rng.random(item.shape) < 0.6).astype(float)
    got = reg.ridge_scores(answers, scores, item, valid, target_answers=target)
    loo_rows = np.array([0, 5, 11, 24])
    got_loo = reg.ridge_scores(answers, scores, item, valid, loo_rows=loo_rows)
    for t in range(4):
        X = answers[:, item[t][valid[t]]]
        lam = _brute_choice(X, scores)
        want = _brute(X, scores, lam)(target[t][valid[t]])
        assert got[t] == pytest.approx(want, abs=1e-10)
        i = loo_rows[t]
        assert got_loo[t] == pytest.approx(_brute(X, scores, lam, i)(X[i]), abs=1e-10)


def test_constant_columns_predict_the_mean():
    answers = np.ones((20, 5))
    scores = np.linspace(0.2, 0.9, 20)
    out = reg.ridge_scores(answers, scores, np.array([[0, 1, 2]]), np.ones((1, 3), bool),
                           target_answers=np.zeros((1, 3)))
    assert out[0] == pytest.approx(scores.mean())


def test_pack_answers_round_trip():
    a = np.array([[0.0, 1.0, np.nan], [0.5, 0.2, 0.333]])
    back = reg.unpack_answers(reg.pack_answers(a), a.shape)
    assert np.isnan(back[0, 2]) and np.array_equal(back[:, :2], a[:, :2])
    assert abs(back[1, 2] - 0.333) <= 0.002                 # partial credit: 1/250 steps


@pytest.fixture(scope="module")
def two_parts():
    """A benchmark of two parts measuring two unrelated abilities: 70% of the items weakly
    discriminating, 30% sharply, so one theta follows the sharp part while the score is mostly
    the other; targets drawn like the source models."""
    rng = np.random.default_rng(6)
    n_items = 200
    part = (np.arange(n_items) >= 0.7 * n_items).astype(int)
    a = np.where(part == 0, 0.8, 2.0) * rng.lognormal(0.0, 0.2, n_items)
    b = rng.normal(0.0, 1.0, n_items)

    def answers(n):
        theta = rng.normal(size=(n, 2))
        p = 1 / (1 + np.exp(-a[None] * (theta[:, part] - b[None])))
        return (rng.random(p.shape) < p).astype(float)

    ids = [f"i{j}" for j in range(n_items)]
    src = answers(150)
    src[rng.random(src.shape) < 0.02] = np.nan         # missing cells: imputed for the ridge
    source = ResponseMatrix(src, item_ids=ids)
    targets = ResponseMatrix(answers(300), item_ids=ids)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                # the defaults' notice
        bank = Calibrator().fit(source).bank_
    return source, targets, bank


def test_ridge_part_sharpens_a_benchmark_one_theta_cannot_follow(two_parts):
    """The calibrated model prediction G stacked with the ridge part is much closer on held-out
    targets than the IRT prediction alone, the pooled score closer, and the interval covers."""
    source, targets, bank = two_parts
    truth = targets.values.mean(1)
    res = {}
    for ridge in (False, True):
        p = BenchmarkPredictor(40, ridge=ridge).fit(bank, source, rng=0)
        arr = p._replay_arrays(targets.aligned_values(p.item_ids_), np.random.default_rng(1))
        score, lo, hi = p._combine(arr)[:3]
        res[ridge] = dict(g=np.abs(p._calibrated(arr) - truth).mean(),
                          score=np.abs(score - truth).mean(),
                          cover=((lo <= truth) & (truth <= hi)).mean(), gamma=p.gamma_)
    assert res[True]["g"] < 0.8 * res[False]["g"]
    assert res[True]["score"] < res[False]["score"]
    assert res[True]["cover"] >= 0.9
    assert res[False]["gamma"] is None and res[True]["gamma"] > 0.3


def test_ridge_part_round_trips_and_old_files_load_without_it(two_parts):
    source, targets, bank = two_parts
    p = BenchmarkPredictor(40).fit(bank, source, rng=0)
    d = json.loads(json.dumps(p.to_dict()))
    back = BenchmarkPredictor.from_dict(d)
    np.testing.assert_array_equal(back.replay(targets, rng=2).score, p.replay(targets, rng=2).score)
    s1, s2 = p.session(rng=4), back.session(rng=4)          # a live session predicts alike
    answers = targets.to_frame().iloc[0]
    for s in (s1, s2):
        while not s.done:
            for item in s.next_items(7):
                s.record(item, answers[item])
    assert s1.prediction() == s2.prediction()
    old = dict(d, version=3)                                  # a folder built before the ridge part
    old.pop("ridge")
    old["settings"] = {k: v for k, v in d["settings"].items()
                       if k not in ("ridge", "fitted_weight")}
    old["calibration"] = {k: v for k, v in d["calibration"].items()
                          if k not in ("gamma", "design_weight", "pooled_tau2")}
    v3 = BenchmarkPredictor.from_dict(old)
    assert v3.ridge is False and v3.gamma_ is None
    assert np.isfinite(v3.replay(targets, rng=2).score).all()
    bad = json.loads(json.dumps(d))
    bad["ridge"]["shape"] = [5, 5]
    with pytest.raises((ConfigError, ValueError)):
        BenchmarkPredictor.from_dict(bad)


def test_continuous_answers_predict_alike_once_read_back(two_parts):
    """Scores in [0, 1] are kept at predictor.json's precision (1/250) when fitted, so the
    predictor read back from its file (a bank folder's) predicts exactly as the fitted one,
    with the ridge part combined as below 40 source models (the mean of the two lines)."""
    source, targets, bank = two_parts
    rng = np.random.default_rng(3)
    frac = lambda rm: ResponseMatrix(rm.values * rng.uniform(0.3, 1.0, rm.values.shape),  # noqa: E731
                                     item_ids=rm.item_ids)
    src, tgt = frac(source.subset(subjects=np.arange(30))), frac(targets.subset(
        subjects=np.arange(40)))
    p = BenchmarkPredictor(40).fit(bank, src, rng=0)
    assert p.dispersion_ is not None and p.gamma_ is not None
    step = np.nanmax(np.abs(p.ridge_answers_ - src.values))
    assert 0 < step <= 0.002                          # rounded to 1/250, as stored
    back = BenchmarkPredictor.from_dict(json.loads(json.dumps(p.to_dict())))
    np.testing.assert_array_equal(back.ridge_answers_, p.ridge_answers_)
    np.testing.assert_array_equal(back.replay(tgt, seed=7).score, p.replay(tgt, seed=7).score)
