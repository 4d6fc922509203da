"""atlascat.predict: the design-based benchmark-score predictor (simulated truth known)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from atlascat.errors import ConfigError, ResponseDataError
from atlascat.irt.bank import ItemBank
from atlascat.predict import BenchmarkPredictor, PredictSession
from atlascat.predict import estimators as est
from atlascat.predict.predictor import _design_weight
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
    assert abs(model_err.mean()) > 0.05                             # the model alone is biased
    cover = np.concatenate([((r.full_score >= r.score_lo) & (r.full_score <= r.score_hi)).to_numpy()
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
    cover = np.mean([((r.full_score >= r.score_lo) & (r.full_score <= r.score_hi)).mean() for r in runs])
    assert 0.88 <= cover <= 1.0


def test_budget_bound_replay_and_session(world, predictor):
    out = predictor.replay(world["strong"], budget=25, rng=1)
    assert out.n_items.max() == 25 and out.n_items.min() == 25
    # missing answers: a target with fewer available items than the budget is asked all of
    # them and gets its exact score; one with more is asked exactly the budget
    y = world["strong"].values[:3].copy()
    y[0, 30:] = np.nan
    y[1, ::2] = np.nan
    part = predictor.replay(ResponseMatrix(y, item_ids=world["strong"].item_ids), rng=2)
    assert list(part.n_items) == [30, 40, 40]
    assert part.score[0] == pytest.approx(np.nanmean(y[0]))
    assert part.score_lo[0] == pytest.approx(part.score_hi[0])
    assert np.isfinite(part.score).all() and (part.score_lo <= part.score_hi).all()
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
    np.testing.assert_array_equal(a.score_lo.to_numpy(), b.score_lo.to_numpy())
    c = predictor.replay(world["strong"], rng=6)
    assert not np.array_equal(a.score.to_numpy(), c.score.to_numpy())
    with pytest.raises(ConfigError, match="not a predictor"):
        BenchmarkPredictor.from_dict({"kind": "other"})


def test_session_matches_replay_arithmetic(world, predictor):
    """A session's prediction equals the vectorized estimator on the same draws, and its
    rounds of k items keep the design (no repeats, probabilities from earlier answers)."""
    y = world["strong"].values[0]
    s = predictor.session(rng=11)
    while not s.done:
        for item in s.next_items(7):
            s.record(item, y[int(item[1:])])
    pred = s.prediction()
    item, q, f, rest, g, g_rest = (np.asarray([d[c] for d in s._draws])[None, :]
                                   for c in range(6))
    assert len(set(item[0])) == 40 and np.all((q > 0) & (q <= 1))
    assert np.all((g > 0) & (g < 1)) and not np.allclose(g, f)     # two models, both used
    ref = predictor.predict_draws(np.where(s._drawn, s._y, np.nan)[None, :], item.astype(int),
                                  q, f, rest, g, g_rest)
    assert pred.score == pytest.approx(float(ref["score"][0]))
    irt_only = predictor.predict_draws(np.where(s._drawn, s._y, np.nan)[None, :],
                                       item.astype(int), q, f, rest)
    assert irt_only["design_score"][0] != pytest.approx(float(ref["design_score"][0]))
    assert pred.lower <= pred.score <= pred.upper
    assert 0.0 <= pred.lower and pred.upper <= 1.0
    assert pred.method in ("design", "combined")
    assert pred.n_items == 40
    fresh = predictor.session(rng=11)
    with pytest.raises(ConfigError, match="no answers"):
        fresh.prediction()
    first = fresh.next_items(3)
    assert first[:3] == [f"i{j}" for j in item[0, :3].astype(int)]   # same seed, same draws
    with pytest.raises(ConfigError, match="not handed out"):
        fresh.record(next(i for i in world["strong"].item_ids if i not in first), 1)
    fresh.record(first[0], y[int(first[0][1:])])
    one = fresh.prediction()
    assert one.n_items == 1 and (one.lower, one.upper) == (0.0, 1.0)   # answered prefix only


def test_outside_warning_names_the_rule_that_fired(world, predictor):
    """A target flagged outside says why: the z of design against model only where it passed
    z_cut, else that a prediction or theta lies beyond the source models (a z of 0.5 "SE" in
    the warning read as the threshold)."""
    import re

    said = []
    for t in range(6):
        y = world["strong"].values[t]
        s = predictor.session(rng=t)
        while not s.done:
            for item in s.next_items(10):
                s.record(item, y[int(item[1:])])
        p = s.prediction()
        assert p.method == "design" and p.warning.startswith("the model looks outside")
        z = re.search(r"differ by ([0-9.]+) combined SEs, more than 3\b", p.warning)
        assert z is None or float(z.group(1)) > predictor.z_cut, p.warning
        said.append("beyond the source models'" in p.warning)
    assert any(said)                         # the beyond rule, with no z in its words


def test_session_saved_mid_test_resumes_exactly(world, predictor):
    """to_dict / from_dict mid-test (through JSON): the restored session draws the same items,
    and ends with the same prediction, as the one never saved; the live adapter's snapshot
    holds the predictor, so the prediction needs the store alone."""
    from atlascat.live.predictor_session import PredictorLiveSession
    from atlascat.predict.session import PredictSession

    y = world["strong"].values[3]

    def answer(s, items):
        for item in items:
            s.record(item, y[int(item[1:])])

    whole = predictor.session(rng=21)
    while not whole.done:
        answer(whole, whole.next_items(4))
    part = predictor.session(rng=21)
    answer(part, part.next_items(4))
    answer(part, part.next_items(4))
    back = PredictSession.from_dict(predictor, json.loads(json.dumps(part.to_dict())))
    assert back.n_items == 8 and back.theta_se() == part.theta_se()
    while not back.done:
        answer(back, back.next_items(4))
    assert [d[0] for d in back._draws] == [d[0] for d in whole._draws]
    assert back.prediction() == whole.prediction() and back.stop_reason == "budget"
    live = PredictorLiveSession(predictor, budget=12, rng=3)
    answer(live, live.next_items(5))
    state = json.loads(json.dumps(live.to_dict()))
    assert state["type"] == "predict"
    with pytest.raises(ConfigError, match="not a predictor run"):
        PredictorLiveSession.from_dict({"type": "suite"})
    again = PredictorLiveSession.from_dict(state)
    assert again.prediction() == live.prediction() and (again.theta, again.se) == (live.theta,
                                                                                   live.se)
    assert again.next_items(7) == live.next_items(7) and again.done and live.done
    with pytest.raises(ConfigError, match="not a saved predictor session"):
        PredictSession.from_dict(predictor, {"budget": 3})


def test_des_raj_unbiased_and_covers_with_a_wrong_model():
    """Des Raj's estimator under the sequential design: unbiased for the total and its
    interval covers ~95%, although the model's probabilities are deliberately wrong (a target
    much stronger than the model believes), and sharper than simple random sampling when the
    model is right."""
    rng = np.random.default_rng(3)
    n_items, budget, reps = 400, 40, 3000
    nodes = np.linspace(-6, 6, 61)
    log_prior = -0.5 * nodes ** 2
    a = rng.lognormal(0, 0.3, n_items)
    b = rng.normal(0, 1.2, n_items)
    truth_p = 1 / (1 + np.exp(-a * (2.0 - b)))                 # true target: theta = 2
    y = (rng.random(n_items) < truth_p).astype(float)
    wrong = est.grid_tables(a * 0.5, b + 2.0, np.zeros(n_items), np.ones(n_items), nodes)
    rows = np.tile(y, (reps, 1))
    d = est.sequential_design(rows, wrong, log_prior, budget, 0.8, np.random.default_rng(4))
    y_drawn = np.take_along_axis(rows, d["item"], axis=1)
    total, se = est.des_raj(y_drawn, d["q"], d["f"], d["f_rest"])
    err = total - y.sum()
    assert abs(err.mean()) < 4 * err.std() / np.sqrt(reps)   # unbiased
    cover = np.mean(np.abs(err) <= est.Z95 * se)
    assert 0.92 <= cover <= 0.98
    # a right model: sharper than simple random sampling (mix = 0, f from the prior only)
    right = est.grid_tables(a, b, np.zeros(n_items), np.ones(n_items), nodes)
    d1 = est.sequential_design(rows[:800], right, log_prior, budget, 0.8,
                               np.random.default_rng(5))
    t1, _ = est.des_raj(np.take_along_axis(rows[:800], d1["item"], 1), d1["q"], d1["f"],
                        d1["f_rest"])
    srs = rng.random((800, n_items)).argsort(1)[:, :budget]
    t0 = y[srs].mean(1) * n_items
    assert np.sqrt(np.mean((t1 - y.sum()) ** 2)) < 0.95 * np.sqrt(np.mean((t0 - y.sum()) ** 2))


def test_model_prediction_held_to_its_own_replayed_range(predictor):
    """M is on the IRT model's scale: the out-of-population rule holds it to the source models'
    replayed M, and G (M calibrated to the score) and D to their scores; a predictor.json
    without ``model_range`` (written before it) holds M to the scores, as it did."""
    lo, hi = predictor.model_range_
    assert 0.0 <= lo < hi <= 1.0
    def outside(model, design, alpha, model_range=None):
        return est.combine(np.array([model]), np.array([alpha + model]), np.array([design]),
                           np.array([0.05]), np.array([0.0]), tau2=0.01 ** 2, z_cut=2.0,
                           source_range=(0.4, 0.6), model_range=model_range)[4][0]

    assert outside(0.65, 0.65, 0.0, model_range=(0.5, 0.7))  # G = M beyond the scores
    # M = 0.65, G = 0.5, D = 0.5: only M lies beyond the scores
    assert outside(0.65, 0.5, -0.15)                          # held to the scores (old rule)
    assert not outside(0.65, 0.5, -0.15, model_range=(0.5, 0.7))
    assert outside(0.65, 0.5, -0.15, model_range=(0.5, 0.6))
    d = json.loads(json.dumps(predictor.to_dict()))
    assert d["calibration"]["model_range"] == [lo, hi]
    d["calibration"].pop("model_range")
    assert BenchmarkPredictor.from_dict(d).model_range_ is None


def test_design_beyond_the_top_flags_only_near_the_models_top(predictor):
    """A design estimate beyond the source scores flags the target only where the calibrated
    model prediction G lies within model_gate tau of that edge (a strong target looks like the
    strongest source models to the model); a wide disagreement still flags by z_cut; both
    sides alike; ``model_gate=None`` (predictor.json before version 6) flags wherever G is."""
    tau = 0.02

    def outside(g, design, gate, z_cut=3.0):
        return est.combine(np.array([g]), np.array([g]), np.array([design]), np.array([0.05]),
                           np.array([0.0]), tau2=tau ** 2, z_cut=z_cut,
                           source_range=(0.4, 0.6), model_gate=gate)[4][0]

    assert outside(0.57, 0.62, 2.5)             # G within 2.5 tau (0.05) of the top
    assert not outside(0.53, 0.62, 2.5)         # G well inside: D's noise (z = 1.7)
    assert outside(0.53, 0.62, None)            # the rule before version 6
    assert outside(0.53, 0.62, 2.5, z_cut=1.5)  # ... unless design and model disagree
    assert outside(0.43, 0.38, 2.5) and not outside(0.47, 0.38, 2.5)   # below, the same
    assert (predictor.model_gate, predictor.z_cut, predictor.theta_quantile) == (2.5, 3.0, 0.0)
    d = json.loads(json.dumps(predictor.to_dict()))
    assert BenchmarkPredictor.from_dict(d).model_gate == 2.5
    d["settings"].pop("model_gate")                          # a file written before it
    assert BenchmarkPredictor.from_dict(d).model_gate is None
    with pytest.raises(ConfigError, match="model_gate"):
        BenchmarkPredictor(model_gate=-1.0).fit(None, None)


def test_draw_probabilities_floor():
    f = np.array([[0.0, 1.0, 0.5, 0.5, 0.2]])
    remaining = np.array([[True, True, True, False, True]])
    q = est.draw_probabilities(f, remaining, 0.8)
    assert q[0, 3] == 0 and q.sum() == pytest.approx(1.0)
    assert q[0, 0] == pytest.approx(0.2 / 4)                  # certain items keep the floor


def test_bad_input(world):
    small = ResponseMatrix(world["source"].values[:10], item_ids=world["source"].item_ids)
    with pytest.raises(ResponseDataError, match="at least 20 source models"):
        BenchmarkPredictor().fit(world["bank"], small)
    with pytest.raises(ConfigError, match="budget"):
        BenchmarkPredictor(1).fit(world["bank"], world["source"])
    with pytest.raises(ConfigError, match="mix"):
        BenchmarkPredictor(40, mix=1.0).fit(world["bank"], world["source"])
    with pytest.raises(ConfigError, match="not fitted"):
        BenchmarkPredictor().replay(world["strong"])
    assert isinstance(BenchmarkPredictor(40).fit(world["bank"], world["source"]).session(),
                      PredictSession)


def test_two_control_variates_stay_unbiased_and_cover():
    """The level model as a second control variate with predictable weights (and half of the
    draws' uncertainty part): still unbiased, the interval still covers, with a wrong IRT model
    and a wrong level model (its item ease from a population far weaker than the target)."""
    rng = np.random.default_rng(13)
    n_items, budget, reps = 400, 40, 3000
    nodes = np.linspace(-6, 6, 61)
    log_prior = -0.5 * nodes ** 2
    a, b = rng.lognormal(0, 0.3, n_items), rng.normal(0, 1.2, n_items)
    y = (rng.random(n_items) < 1 / (1 + np.exp(-a * (2.0 - b)))).astype(float)
    weak = (rng.random((30, n_items)) < 1 / (1 + np.exp(-a * (-1.0 - b)))).astype(float)
    x = est.level_logits(weak, weak.mean(1))
    c0 = est.level_start(x, weak.mean())
    assert np.mean(1 / (1 + np.exp(-(x + c0)))) == pytest.approx(weak.mean(), abs=1e-9)
    wrong = est.grid_tables(a * 0.5, b + 2.0, np.zeros(n_items), np.ones(n_items), nodes)
    rows = np.tile(y, (reps, 1))
    d = est.sequential_design(rows, wrong, log_prior, budget, 0.5, np.random.default_rng(4),
                              level=(x, c0), share=0.5)
    assert not np.allclose(d["g"], d["f"])
    y_drawn = np.take_along_axis(rows, d["item"], axis=1)
    total, se = est.des_raj(y_drawn, d["q"], d["f"], d["f_rest"], None, d["g"], d["g_rest"])
    err = total - y.sum()
    assert abs(err.mean()) < 4 * err.std() / np.sqrt(reps)   # unbiased
    assert 0.92 <= np.mean(np.abs(err) <= est.Z95 * se) <= 0.98
    # each model alone on the same draws is unbiased too; the mixture is the sharpest
    irt, _ = est.des_raj(y_drawn, d["q"], d["f"], d["f_rest"])
    lev, _ = est.des_raj(y_drawn, d["q"], d["g"], d["g_rest"])
    rmse = lambda t: np.sqrt(np.mean((t - y.sum()) ** 2))      # noqa: E731
    assert rmse(total) < min(rmse(irt), rmse(lev)) * 1.02


def test_predictable_weights_use_earlier_draws_only():
    rng = np.random.default_rng(2)
    t1, t2 = rng.normal(0, 1, (4, 12)), rng.normal(0, 3, (4, 12))
    valid = np.ones((4, 12), dtype=bool)
    w = est.predictable_weights(t1, t2, valid)
    assert np.all(w[:, :3] == 0.5) and np.all((w >= 0) & (w <= 1))
    t1b, t2b = t1.copy(), t2.copy()
    t1b[:, 8:], t2b[:, 8:] = 99.0, -99.0                     # later draws change nothing before
    np.testing.assert_array_equal(est.predictable_weights(t1b, t2b, valid)[:, :9], w[:, :9])
    # the noisier series gets the smaller weight once there is data
    assert np.mean(w[:, 6:]) > 0.6


def test_level_offset_is_the_map_level():
    x = np.linspace(-2, 2, 30)
    y = (x > -0.5).astype(float)
    c = est.level_offset(x[None], y[None], np.ones((1, 30), dtype=bool), 0.0, sd=2.0)
    mu = 1 / (1 + np.exp(-(x + c[0])))
    assert abs((y - mu).sum() - c[0] / 4.0) < 1e-8           # the gradient of the log posterior
    none = est.level_offset(x[None, :0], y[None, :0], np.ones((1, 0), dtype=bool), 0.7)
    assert none[0] == 0.7                                    # no answers: the prior's level


def test_version_2_predictor_json_still_loads(world, predictor):
    """A bank folder built before the level model (predictor.json version 2) loads and runs
    the IRT model alone, exactly as that version did (share 0, one control variate)."""
    d = json.loads(json.dumps(predictor.to_dict()))
    assert d["version"] == 8 and len(d["items"]["level_x"]) == N_ITEMS
    d["version"] = 2
    d["settings"]["mix"] = 0.5                               # version 2's default
    for key in ("share", "level_fraction", "ridge", "fitted_weight", "model_gate"):
        d["settings"].pop(key)
    d["items"].pop("level_x")
    d.pop("ridge")
    for key in ("level_c0", "model_range", "gamma", "design_weight", "pooled_tau2"):
        d["calibration"].pop(key)
    old = BenchmarkPredictor.from_dict(d)
    assert old.share == 0.0 and old._level() is None
    out = old.replay(world["strong"], rng=3)
    tables, _, log_prior = old._grid()
    y = world["strong"].aligned_values(old.item_ids_)
    ref = est.sequential_design(y, tables, log_prior, 40, 0.5, np.random.default_rng(3))
    total, _ = est.des_raj(np.take_along_axis(y, ref["item"], 1), ref["q"], ref["f"],
                           ref["f_rest"], ref["valid"])
    np.testing.assert_allclose(out.design_score.to_numpy(), total / N_ITEMS, atol=1e-12)
    fresh = BenchmarkPredictor(40, mix=0.5, share=0.0, level_fraction=0.0, ridge=False,
                               fitted_weight=False, model_gate=None).fit(
        world["bank"], world["source"], rng=0)                # the same design, fitted now
    fresh.model_range_ = None                                 # and version 2's rule for M
    assert fresh._level() is None and fresh.to_dict()["items"]["level_x"] is None
    np.testing.assert_array_equal(fresh.replay(world["strong"], rng=3).score, out.score)
    s = old.session(rng=1)                                   # and its live session runs
    for item in s.next_items(10):
        s.record(item, 1.0)
    assert s.prediction().n_items == 10
    saved = s.to_dict()                                      # a run saved by that version
    saved["format"] = "atlascat.PredictSession/1"
    saved["draws"] = [row[:4] for row in saved["draws"]]
    back = PredictSession.from_dict(old, json.loads(json.dumps(saved)))
    assert back.prediction() == s.prediction()
    with pytest.raises(ConfigError, match="version 1"):
        BenchmarkPredictor.from_dict({**d, "version": 1})


def test_chance_floor_keeps_targets_at_chance_inside():
    """Four-option items whose weakest source models answer at chance: a target like them whose
    design estimate falls below every source score (sampling noise) is flagged outside without
    the chance level and kept inside with it, and predicted closer; a source whose weakest model
    is well above chance keeps the check below it (it serves weaker targets)."""
    rng = np.random.default_rng(11)
    n = 240
    a, b = rng.lognormal(0.2, 0.3, n), rng.normal(1.0, 1.0, n)
    ids = [f"i{j}" for j in range(n)]

    def answers(theta):
        p = 0.25 + 0.75 / (1.0 + np.exp(-a[None, :] * (theta[:, None] - b[None, :])))
        return (rng.random(p.shape) < p).astype(float)

    thetas = np.concatenate([np.full(12, -4.0), rng.normal(0.0, 1.0, 48)])
    source = ResponseMatrix(answers(thetas), item_ids=ids)
    targets = ResponseMatrix(answers(np.concatenate([np.full(40, -4.0),
                                                     rng.normal(0.0, 1.0, 40)])), item_ids=ids)
    bank = ItemBank(ids, a, b, np.full(n, 0.25))
    plain = BenchmarkPredictor(30).fit(bank, source, rng=0)
    aware = BenchmarkPredictor(30, chance=0.25).fit(bank, source, rng=0)
    assert not plain.source_at_chance() and aware.source_at_chance()
    lo_src = aware.source_range_[0]
    runs = [(plain.replay(targets, rng=s), aware.replay(targets, rng=s)) for s in range(4)]
    below = np.concatenate([(p.design_score < lo_src).to_numpy() for p, _ in runs])
    assert below.mean() > 0.1                    # at chance, a design estimate often lies below
    was = np.concatenate([(p.method == "design").to_numpy() for p, _ in runs])
    now = np.concatenate([(w.method == "design").to_numpy() for _, w in runs])
    assert now.mean() < was.mean() and not np.any(now & ~was)
    err = lambda k: np.mean(np.concatenate([np.abs(r[k].score - r[k].full_score) for r in runs]))
    assert err(1) < err(0)
    cover = np.concatenate([((w.full_score >= w.score_lo) & (w.full_score <= w.score_hi)).to_numpy()
                            for _, w in runs])
    assert cover.mean() >= 0.9
    # the same chance level, but the weakest source model well above it: the check stays
    high = ResponseMatrix(answers(rng.normal(1.5, 0.5, 30)), item_ids=ids)
    assert not BenchmarkPredictor(30, chance=0.25).fit(bank, high, rng=0).source_at_chance()
    d = json.loads(json.dumps(aware.to_dict()))
    assert d["settings"]["chance"] == 0.25
    assert BenchmarkPredictor.from_dict(d).source_at_chance()
    d["settings"].pop("chance")                 # a predictor.json written before it
    assert BenchmarkPredictor.from_dict(d).chance is None
    with pytest.raises(ConfigError, match="chance"):
        BenchmarkPredictor(30, chance=1.5).fit(bank, source)


def test_design_weight_is_the_least_variance_combination_of_correlated_estimates():
    """G and D use the same answers, so their errors correlate: the weight fitted by least
    squares on replays (source) is the least-variance combination for that correlation
    (analytic, checked on fresh draws), and its error is well below the precision-weighted
    mean's, which treats them as independent and overstates its own precision."""
    rng = np.random.default_rng(0)
    tau, se, rho, truth = 0.03, 0.045, 0.5, 0.5
    c = rho * tau * se
    cov = [[tau ** 2, c], [c, se ** 2]]

    def draws(n):
        err = rng.multivariate_normal([0.0, 0.0], cov, n)
        return truth + err[:, 0], truth + err[:, 1]

    w, _ = _design_weight(*draws(50_000), np.full(50_000, truth))
    best = (tau ** 2 - c) / (tau ** 2 + se ** 2 - 2 * c)
    assert w == pytest.approx(best, abs=0.02)
    g, d = draws(200_000)
    n = len(g)

    def combine(**kw):
        return est.combine(g, g, d, np.full(n, se), np.zeros(n), tau2=tau ** 2, z_cut=1e9,
                           **kw)

    blue = (tau ** 2 * se ** 2 - c ** 2) / (tau ** 2 + se ** 2 - 2 * c)
    score, _, _, sd, outside, _ = combine(weight=w, pooled_tau2=blue)
    assert not outside.any() and sd[0] ** 2 == pytest.approx(blue)
    assert np.mean((score - truth) ** 2) == pytest.approx(blue, rel=0.03)
    naive = combine()                                         # a predictor.json without w
    naive_mse = np.mean((naive[0] - truth) ** 2)
    assert naive_mse > 1.03 * np.mean((score - truth) ** 2)
    assert naive[3][0] ** 2 < 0.75 * naive_mse               # and it overstates its precision


def test_design_weight_fitted_on_the_source_and_kept(world, predictor):
    """Fitted on the source models' replays, D's weight is small (G and D err together) and
    predicts targets like the source models closer than the precision-weighted mean."""
    assert 0.0 <= predictor.design_weight_ <= 0.3 and predictor.pooled_tau2_ > 0
    truth = world["like"].values.mean(1)
    err = np.zeros(2)
    for r in range(3):
        arr = predictor._replay_arrays(world["like"].aligned_values(predictor.item_ids_),
                                       np.random.default_rng(r))
        fitted = predictor._combine(arr)[0]
        w, predictor.design_weight_ = predictor.design_weight_, None
        precision = predictor._combine(arr)[0]
        predictor.design_weight_ = w
        err += [np.abs(fitted - truth).mean(), np.abs(precision - truth).mean()]
    assert err[0] < 0.97 * err[1]
    d = json.loads(json.dumps(predictor.to_dict()))
    back = BenchmarkPredictor.from_dict(d)
    assert (back.design_weight_, back.pooled_tau2_) == (predictor.design_weight_,
                                                        predictor.pooled_tau2_)
    for key in ("design_weight", "pooled_tau2"):              # a file written before them
        d["calibration"].pop(key)
    old = BenchmarkPredictor.from_dict(d)
    assert old.design_weight_ is None
    assert np.isfinite(old.replay(world["like"], rng=2).score).all()


def test_ridge_part_and_fitted_weight_follow_the_source_size(world):
    """By default the ridge part's weight is fitted from 40 source models (below: the mean of
    the IRT and ridge predictions, each calibrated on the replays by its own line) and D's
    weight from 60 (fewer models' replays understate a new model's error); the fitted weight
    can be forced, the ridge part switched off."""
    from atlascat.predict.predictor import _stack

    src = world["source"]
    small = src.subset(subjects=np.arange(30))
    p = BenchmarkPredictor(40).fit(world["bank"], small, rng=0)
    assert p.gamma_ is not None and p.ridge_answers_ is not None and p.design_weight_ is None
    y = small.values
    reps = np.repeat(np.arange(30), p.n_replays)
    arr = p._replay_arrays(y[reps], np.random.default_rng(0), loo_rows=reps)
    t = np.nanmean(y, axis=1)[reps]
    lines = [np.polyfit(arr[k], t, 1) for k in ("model", "ridge")]   # (slope, intercept)
    assert p.beta_ == pytest.approx(lines[0][0] / 2) and p.gamma_ == pytest.approx(lines[1][0] / 2)
    assert p.alpha_ == pytest.approx((lines[0][1] + lines[1][1]) / 2)
    assert _stack(arr["model"], arr["ridge"], t, fitted=True)[2] != pytest.approx(p.gamma_)
    off = BenchmarkPredictor(40, ridge=False).fit(world["bank"], small, rng=0)
    assert off.gamma_ is None and off.ridge_answers_ is None
    mid = BenchmarkPredictor(40).fit(world["bank"], src.subset(subjects=np.arange(45)), rng=0)
    assert mid.gamma_ is not None and mid.design_weight_ is None
    forced = BenchmarkPredictor(40, fitted_weight=True).fit(world["bank"], small, rng=0)
    assert forced.design_weight_ is not None
    back = BenchmarkPredictor.from_dict(json.loads(json.dumps(p.to_dict())))
    assert back.ridge is None and back.fitted_weight is None and back.gamma_ == p.gamma_
    np.testing.assert_array_equal(back.replay(world["like"], rng=1).score,
                                  p.replay(world["like"], rng=1).score)


def test_published_scores_a_rescaled_mean_map_the_design_estimate(world):
    """Scores given as an accuracy normalised for chance, s = (m - c) / (1 - c): the design
    estimate of the mean is mapped to the score exactly (leave-one-out error 0), and every
    prediction is the rescaled one of the predictor fitted on the mean (same seeds)."""
    src, c = world["source"], 0.1
    mean = np.nanmean(src.values, axis=1)
    plain = BenchmarkPredictor(40).fit(world["bank"], src, rng=3)
    norm = BenchmarkPredictor(40).fit(world["bank"], src, scores=(mean - c) / (1 - c), rng=3)
    c0, c1, r = norm.score_map_
    assert c0 == pytest.approx(-c / (1 - c), abs=1e-12) and c1 == pytest.approx(1 / (1 - c))
    assert r < 1e-12 and plain.score_map_ is None
    for targets in (world["like"], world["strong"]):
        a, b = plain.replay(targets, rng=5), norm.replay(targets, rng=5)
        assert (a.method == b.method).all()
        np.testing.assert_allclose(b.design_score, (a.design_score - c) / (1 - c), atol=1e-9)
        inside = (a.score > c) & (a.score < 1)      # not clipped on either scale
        np.testing.assert_allclose(b.score[inside], ((a.score - c) / (1 - c))[inside],
                                   atol=1e-9)
    # a live session asks the same items (the map leaves the draws alone) and reports the score
    y = world["strong"].values[1]
    live = []
    for pred in (plain, norm):
        s = pred.session(rng=21)
        while not s.done:
            for item in s.next_items(10):
                s.record(item, y[int(item[1:])])
        live.append(s.prediction())
    assert live[1].design_score == pytest.approx((live[0].design_score - c) / (1 - c))
    assert live[1].method == live[0].method and live[1].n_items == live[0].n_items == 40
    back = BenchmarkPredictor.from_dict(json.loads(json.dumps(norm.to_dict())))
    assert back.score_map_ == pytest.approx(norm.score_map_)
    np.testing.assert_allclose(back.replay(world["strong"], rng=2).score,
                               norm.replay(world["strong"], rng=2).score)


def test_published_scores_a_macro_average_map_the_design_estimate(world):
    """A macro average over five subjects of 20-100 items (what MMLU publishes) is close to a
    line in the item mean, not on it: the map's leave-one-out error enters the design SE,
    strong targets' macro scores are covered, and the line fitted on weaker models costs
    them little against the mean itself (not mapped; the map is exact only for a rescaled
    mean: docs/your_benchmark.md). A score
    file clipped at 0 (a normalised accuracy, the Open LLM Leaderboard v2's) is fitted on the
    models above 0."""
    src = world["source"]
    y = src.values
    subject = np.random.default_rng(11).permutation(np.repeat(np.arange(5), [20, 40, 60, 80, 100]))

    def macro(v):
        return np.mean([v[:, subject == k].mean(1) for k in range(5)], axis=0)

    p = BenchmarkPredictor(40).fit(world["bank"], src, scores=macro(y), rng=0)
    plain = BenchmarkPredictor(40).fit(world["bank"], src, rng=0)
    assert p.score_map_[2] > 1e-4
    truth = macro(world["strong"].values)
    runs = [p.replay(world["strong"], rng=s) for s in range(4)]
    cover = np.mean([((truth >= r.score_lo) & (truth <= r.score_hi)).mean() for r in runs])
    err = np.mean([np.abs(r.score - truth).mean() for r in runs])
    err_plain = np.mean([np.abs(plain.replay(world["strong"], rng=s).score - truth).mean()
                         for s in range(4)])
    assert cover >= 0.88 and err < 1.15 * err_plain
    mean = np.nanmean(y, axis=1)
    clipped = np.maximum(0.0, (mean - 0.3) / 0.7)
    assert (clipped == 0).sum() >= 5
    c0, c1, r = BenchmarkPredictor(40).fit(world["bank"], src, scores=clipped, rng=0).score_map_
    assert c1 == pytest.approx(1 / 0.7) and r < 1e-12


def test_the_prediction_lies_between_the_two_parts_it_pools(world, predictor):
    """A "combined" prediction pools the design estimate D with G, the IRT prediction
    calibrated on the source models (``model_part``), so it lies between D and G at every
    target and step, and a live run reports G as its model-based score; the raw IRT
    prediction M (``model_score``), biased here by the wrong bank, need not bracket it."""
    r = predictor.replay(world["like"], rng=2)
    c = (r.method == "combined").to_numpy()
    lo = np.minimum(r.model_part, r.design_score).to_numpy()[c]
    hi = np.maximum(r.model_part, r.design_score).to_numpy()[c]
    score = r.score.to_numpy()[c]
    assert c.sum() > 40 and np.all((score >= lo - 1e-12) & (score <= hi + 1e-12))
    raw_lo = np.minimum(r.model_score, r.design_score).to_numpy()[c]
    raw_hi = np.maximum(r.model_score, r.design_score).to_numpy()[c]
    assert np.any((score < raw_lo - 1e-6) | (score > raw_hi + 1e-6))   # M is not G here
    s = predictor.session(budget=15, rng=4)
    y = world["like"].values[0]
    col = {i: j for j, i in enumerate(world["like"].item_ids)}
    for _ in range(15):
        item = s.next_items(1)[0]
        s.record(item, y[col[item]])
    p = s.prediction()
    assert min(p.model_part, p.design_score) - 1e-12 <= p.score <= \
        max(p.model_part, p.design_score) + 1e-12 or p.method == "design"
