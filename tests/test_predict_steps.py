"""The benchmark predictor's interval after each answer of a live session (what a run's step
lines and HTML trajectory show): honest from the second answer on, unchanged at the budget."""
from __future__ import annotations

import numpy as np
import pytest

from atlascat.irt.bank import ItemBank
from atlascat.predict import BenchmarkPredictor
from atlascat.predict import estimators as est
from atlascat.predict.session import subject_generator
from atlascat.responses import ResponseMatrix

N_ITEMS, BUDGET, SEED = 300, 40, 5
STEPS = (2, 3, 5)


def _simulate(theta, a, b, rng):
    p = 1.0 / (1.0 + np.exp(-a[None, :] * (theta[:, None] - b[None, :])))
    return (rng.random(p.shape) < p).astype(float)


@pytest.fixture(scope="module")
def runs():
    """60 source models; 120 targets like them and 60 stronger than all of them, each tested
    live for 5 answers (one item at a time, its own seeded Generator): the prediction shown
    after k answers, the plain design interval (Des Raj's variance alone) on the same draws,
    and the target's full score."""
    rng = np.random.default_rng(11)
    a, b = rng.lognormal(0.0, 0.3, N_ITEMS), rng.normal(0.0, 1.2, N_ITEMS)
    ids = [f"i{j}" for j in range(N_ITEMS)]
    source = ResponseMatrix(_simulate(rng.normal(0.0, 1.0, 60), a, b, rng), item_ids=ids)
    pred = BenchmarkPredictor(BUDGET).fit(ItemBank(ids, a, b), source, rng=0)
    theta = np.concatenate([rng.normal(0.0, 1.0, 120), rng.normal(2.5, 0.3, 60)])
    targets = ResponseMatrix(_simulate(theta, a, b, rng), item_ids=ids)
    out = {k: [] for k in STEPS}
    for subject, y in zip(targets.subject_ids, targets.values):
        s = pred.session(rng=subject_generator(SEED, subject))
        for k in range(1, max(STEPS) + 1):
            item = s.next_items(1)[0]
            s.record(item, y[int(item[1:])])
            if k == 1:
                first = s.prediction()
                assert (first.lower, first.upper) == (0.0, 1.0)   # one answer: no variance
            if k in STEPS:
                shown = s.prediction()
                draws = np.asarray([d[:6] for d in s._draws]).T[:, None, :]
                plain = pred.predict_draws(np.where(s._drawn, s._y, np.nan)[None, :],
                                           draws[0].astype(int), *draws[1:])
                out[k].append((shown.lower, shown.upper, float(plain["lower"][0]),
                               float(plain["upper"][0]), y.mean(), shown.score,
                               float(plain["score"][0])))
    return pred, targets, {k: np.asarray(v) for k, v in out.items()}


def test_early_intervals_cover(runs):
    """After 2, 3 and 5 answers the interval shown covers the full score at least 90% of the
    time (Des Raj's variance alone: about 65% after 2 answers, its k - 1 = 1 degree of freedom
    often near 0), and only the interval changes, never the point prediction."""
    _, _, out = runs
    for k in STEPS:
        lo, hi, plo, phi, truth, score, plain_score = out[k].T
        cover = np.mean((lo <= truth) & (truth <= hi))
        assert cover >= 0.90, (k, cover)
        assert np.array_equal(score, plain_score)
        assert np.all((lo <= plo + 1e-12) & (hi >= phi - 1e-12))   # widened, never narrowed
    lo, hi, plo, phi, truth, *_ = out[2].T
    assert np.mean((plo <= truth) & (truth <= phi)) < 0.85           # what the prior fixes
    assert np.mean(hi - lo) < 0.99                                    # not the whole range


def test_interval_at_the_budget_is_the_replays(runs):
    """A session run to its budget ends with the interval and prediction of replay(seed=S),
    and from SMALL_SAMPLE_DRAWS answers on the interval is the plain one."""
    pred, targets, _ = runs
    rows = [0, 150]
    rep = pred.replay(ResponseMatrix(targets.values[rows],
                                     [targets.subject_ids[r] for r in rows], targets.item_ids),
                      seed=SEED)
    for r, (_, row) in zip(rows, rep.iterrows()):
        s = pred.session(rng=subject_generator(SEED, targets.subject_ids[r]))
        while not s.done:
            for item in s.next_items(1):
                s.record(item, targets.values[r][int(item[1:])])
        end = s.prediction()
        assert (end.score, end.lower, end.upper) == pytest.approx(
            (row.score, row.score_lo, row.score_hi), abs=1e-12)
    fake = {"lower": np.array([0.3]), "upper": np.array([0.5])}
    same = pred.step_interval(None, np.zeros((1, est.SMALL_SAMPLE_DRAWS), int), fake)
    assert (same[0][0], same[1][0]) == (0.3, 0.5)


def test_short_budget_replay_is_the_sessions_and_covers(runs):
    """With a budget under SMALL_SAMPLE_DRAWS (atlas simulate / evaluate --max-items 10), the
    replay's final interval is the small-sample one: the interval a live session shows after
    as many answers (budget 10, or budget 40 stopped at 10), covering the full score at least
    90% of the time; the point prediction is the plain replay's. A target asked every item it
    has keeps its exact score."""
    pred, targets, _ = runs
    budget = 10
    rep = pred.replay(targets, budget=budget, seed=SEED)
    truth = targets.values.mean(axis=1)
    cover = np.mean((rep.score_lo <= truth) & (truth <= rep.score_hi))
    assert cover >= 0.90, cover                  # the plain interval's: 0.87
    gen = [subject_generator(SEED, s) for s in targets.subject_ids]
    y = targets.aligned_values(pred.item_ids_)
    score, plo, phi, *_ = pred._combine(pred._replay_arrays(y, gen, budget))
    assert np.array_equal(rep.score, score)
    assert np.all((rep.score_lo <= plo + 1e-12) & (rep.score_hi >= phi - 1e-12))
    assert np.mean(rep.score_hi - rep.score_lo) > np.mean(phi - plo)
    for r in (0, 150):
        for b in (budget, BUDGET):
            s = pred.session(budget=b, rng=subject_generator(SEED, targets.subject_ids[r]))
            while s.n_items < budget:
                for item in s.next_items(1):
                    s.record(item, targets.values[r][int(item[1:])])
            end = s.prediction()
            assert (end.score, end.lower, end.upper) == pytest.approx(
                (rep.score[r], rep.score_lo[r], rep.score_hi[r]), abs=1e-12)
    v = targets.values
    part = np.full((3, N_ITEMS), np.nan)
    part[0, :6], part[1, :25], part[2] = v[0, :6], v[0, :25], v[1]
    part = ResponseMatrix(part, ["six", "many", "all"], targets.item_ids)
    out = pred.replay(part, budget=budget, seed=SEED)
    assert out.n_items.tolist() == [6, budget, budget]
    gen = [subject_generator(SEED, s) for s in ("six", "many", "all")]
    _, plo, phi, *_ = pred._combine(pred._replay_arrays(part.aligned_values(pred.item_ids_),
                                                        gen, budget))
    assert (out.score_lo[0], out.score_hi[0]) == (plo[0], phi[0])          # its exact score's
    assert np.all(out.score_hi[1:] - out.score_lo[1:] > phi[1:] - plo[1:])


def test_small_sample_interval_formula():
    """D +- t_{0.975, k} sqrt((sigma_0^2 / N^2 + (k - 1) k SE^2) / k^2), widened to the point
    prediction, clipped to 0-1; a score map's slope and residual SD carried through."""
    from scipy.stats import t

    lo, hi = est.small_sample_interval(np.array([0.5]), np.array([0.02]), np.array([0.5]), 4,
                                       np.array([900.0]), 100)
    half = t.ppf(0.975, 4) * np.sqrt((900.0 / 100 ** 2 + 3 * 4 * 0.02 ** 2) / 16)
    assert (lo[0], hi[0]) == pytest.approx((0.5 - half, 0.5 + half))
    lo, hi = est.small_sample_interval(np.array([0.5]), np.array([0.0]), np.array([0.9]), 4,
                                       np.array([0.0]), 100)
    assert (lo[0], hi[0]) == pytest.approx((0.5, 0.9))
    se_m, c1, r = 0.02, 0.8, 0.01
    lo, hi = est.small_sample_interval(np.array([0.4]), np.array([np.hypot(c1 * se_m, r)]),
                                       np.array([0.4]), 4, np.array([900.0]), 100, slope=c1,
                                       resid=r)
    half = t.ppf(0.975, 4) * np.sqrt(c1 ** 2 * (900.0 / 100 ** 2 + 12 * se_m ** 2) / 16 + r ** 2)
    assert (lo[0], hi[0]) == pytest.approx((0.4 - half, 0.4 + half))
    f = np.array([[0.5, 0.1, 0.9]])
    rem = np.array([[True, True, False]])
    q = np.array([[0.5, 0.5, 0.0]])
    assert est.draw_variance(f, rem, q)[0] == pytest.approx(0.25 / 0.5 + 0.09 / 0.5)
