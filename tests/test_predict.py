"""atlascat.predict: the design-based benchmark-score predictor (simulated truth known)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from atlascat.errors import ConfigError, ResponseDataError
from atlascat.irt.bank import ItemBank
from atlascat.predict import BenchmarkPredictor, PredictSession
from atlascat.responses import ResponseMatrix

N_ITEMS = 300


def _simulate(theta, a, b, rng):
    p = 1.0 / (1.0 + np.exp(-a[None, :] * (theta[:, None] - b[None, :])))
    return (rng.random(p.shape) < p).astype(float)


@pytest.fixture(scope="module")
def world():
    """True 2PL items; 60 weak source models; a bank with wrong difficulties (+1 for the
    hardest half: +2.5, fitted on models that never solved them); strong targets outside the source."""
    rng = np.random.default_rng(7)
    a = rng.lognormal(0.0, 0.3, N_ITEMS)
    b = rng.normal(0.0, 1.2, N_ITEMS)
    ids = [f"i{j}" for j in range(N_ITEMS)]
    source = ResponseMatrix(_simulate(rng.normal(-1.0, 0.5, 60), a, b, rng), item_ids=ids)
    wrong_b = np.where(b > np.median(b), b + 2.5, b)
    bank = ItemBank(ids, a * 0.8, wrong_b)
    strong = ResponseMatrix(_simulate(rng.normal(2.0, 0.3, 80), a, b, rng), item_ids=ids)
    like = ResponseMatrix(_simulate(rng.normal(-1.0, 0.5, 80), a, b, rng), item_ids=ids)
    true_bank = ItemBank(ids, a, b)
    return dict(source=source, bank=bank, true_bank=true_bank, strong=strong, like=like)


@pytest.fixture(scope="module")
def predictor(world):
    return BenchmarkPredictor(40).fit(world["bank"], world["source"], rng=0)


def test_design_estimate_unbiased_and_covers_outside_the_source(world, predictor):
    """Strong targets, wrong item parameters: the design-based estimate stays unbiased, the
    interval covers ~95%, while the model-only prediction is far off."""
    runs = [predictor.replay(world["strong"], rng=s) for s in range(6)]
    err = np.concatenate([(r.design_score - r.full_score).to_numpy() for r in runs])
    model_err = np.concatenate([(r.model_score - r.full_score).to_numpy() for r in runs])
    se = np.sqrt(np.mean(err ** 2))
    assert abs(err.mean()) < 3 * se / np.sqrt(err.size) + 0.003    # unbiased
    assert abs(model_err.mean()) > 0.08                             # the model alone is biased
    cover = np.concatenate([((r.full_score >= r.lower) & (r.full_score <= r.upper)).to_numpy()
                            for r in runs])
    assert 0.88 <= cover.mean() <= 1.0
    final = np.concatenate([(r.score - r.full_score).to_numpy() for r in runs])
    assert np.mean(np.abs(final)) < 0.6 * np.mean(np.abs(model_err))
    assert np.mean([(r.method == "design").mean() for r in runs]) > 0.8


def test_combined_sharper_than_design_inside_the_source(world):
    p = BenchmarkPredictor(40).fit(world["true_bank"], world["source"], rng=0)
    runs = [p.replay(world["like"], rng=s) for s in range(4)]
    final = np.mean([np.abs(r.score - r.full_score).mean() for r in runs])
    design = np.mean([np.abs(r.design_score - r.full_score).mean() for r in runs])
    assert final < 0.92 * design
    cover = np.mean([((r.full_score >= r.lower) & (r.full_score <= r.upper)).mean() for r in runs])
    assert 0.88 <= cover <= 1.0


def test_budget_bound_replay_and_session(world, predictor):
    out = predictor.replay(world["strong"], budget=25, rng=1)
    assert out.n_items.max() == 25 and out.n_items.min() == 25
    s = predictor.session(budget=12, rng=3)
    asked = []
    while not s.done:
        for item in s.next_items(5):
            asked.append(item)
            s.record(item, 1.0)
    assert len(asked) == 12 == s.n_items == len(set(asked))
    assert s.next_items(5) == []
    assert s.prediction().n_items == 12


def test_round_trip_and_determinism(world, predictor):
    d = json.loads(json.dumps(predictor.to_dict()))
    back = BenchmarkPredictor.from_dict(d)
    a = predictor.replay(world["strong"], rng=5)
    b = back.replay(world["strong"], rng=5)
    np.testing.assert_array_equal(a.score.to_numpy(), b.score.to_numpy())
    np.testing.assert_array_equal(a.lower.to_numpy(), b.lower.to_numpy())
    c = predictor.replay(world["strong"], rng=6)
    assert not np.array_equal(a.score.to_numpy(), c.score.to_numpy())
    with pytest.raises(ConfigError, match="not a predictor"):
        BenchmarkPredictor.from_dict({"kind": "other"})


def test_session_matches_replay_arithmetic(world, predictor):
    """A session's prediction equals the vectorized estimator on the same answers."""
    y = world["strong"].values[0]
    s = predictor.session(rng=11)
    for item in s.next_items(40):
        s.record(item, y[int(item[1:])])
    pred = s.prediction()
    asked = np.isfinite(s._y)[None, :]
    ref = predictor.predict_arrays(s._y[None, :], asked, (s._pos % 5)[None, :])
    assert pred.score == pytest.approx(float(ref["score"][0]))
    assert pred.lower <= pred.score <= pred.upper
    assert 0.0 <= pred.lower and pred.upper <= 1.0
    assert pred.method in ("design", "combined")
    with pytest.raises(ConfigError, match="not handed out"):
        s.record("i0" if "i0" not in s._index or s._pos[s._index["i0"]] >= s._next else "zz", 1)


def test_bad_input(world):
    small = ResponseMatrix(world["source"].values[:10], item_ids=world["source"].item_ids)
    with pytest.raises(ResponseDataError, match="at least 20 source models"):
        BenchmarkPredictor().fit(world["bank"], small)
    with pytest.raises(ConfigError, match="budget"):
        BenchmarkPredictor(6).fit(world["bank"], world["source"])
    with pytest.raises(ConfigError, match="not fitted"):
        BenchmarkPredictor().replay(world["strong"])
    assert isinstance(BenchmarkPredictor(40).fit(world["bank"], world["source"]).session(),
                      PredictSession)
