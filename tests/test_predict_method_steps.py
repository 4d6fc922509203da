"""The method a live run shows after each answer ("design" for a target outside the source
models, else "combined"): after fewer than SMALL_SAMPLE_DRAWS answers the outside test takes the
design's SE from the small-sample interval, so one or two lucky answers do not flag a target
like the source models (benchmarks/study_method_flips.py: on the BenchPred matrices the method
changed 0.77 times per target in 50 steps before, 0.25 after; the 50-item prediction
unchanged)."""
from __future__ import annotations

import numpy as np
import pytest

from atlascat.irt.bank import ItemBank
from atlascat.predict import BenchmarkPredictor
from atlascat.predict import estimators as est
from atlascat.predict.session import subject_generator
from atlascat.responses import ResponseMatrix

N_ITEMS, BUDGET, SEED, STEPS = 300, 40, 5, 10


def _simulate(theta, a, b, rng):
    p = 1.0 / (1.0 + np.exp(-a[None, :] * (theta[:, None] - b[None, :])))
    return (rng.random(p.shape) < p).astype(float)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(11)
    a, b = rng.lognormal(0.0, 0.3, N_ITEMS), rng.normal(0.0, 1.2, N_ITEMS)
    ids = [f"i{j}" for j in range(N_ITEMS)]
    source = ResponseMatrix(_simulate(rng.normal(0.0, 1.0, 60), a, b, rng), item_ids=ids)
    pred = BenchmarkPredictor(BUDGET).fit(ItemBank(ids, a, b), source, rng=0)
    targets = ResponseMatrix(_simulate(rng.normal(0.0, 1.0, 80), a, b, rng), item_ids=ids)
    return pred, targets


def test_z_se_widens_only_the_outside_test():
    """est.combine: two correct answers (D = 1, SE_D = 0) against G = 0.5 flag the target with
    Des Raj's SE, not with the small-sample one; the pooled prediction itself is the same."""
    args = (np.array([0.5]), np.array([0.5]), np.array([1.0]), np.array([0.0]),
            np.array([0.0]))
    kw = dict(tau2=0.01, z_cut=3.0)
    plain = est.combine(*args, **kw)
    wide = est.combine(*args, **kw, z_se=np.array([0.3]))
    assert plain[4][0] and not wide[4][0]
    assert wide[5][0] == pytest.approx(0.5 / np.sqrt(0.09 + 0.01))


def test_early_steps_do_not_flag_targets_like_the_source(fitted):
    """Targets drawn like the source models, asked 10 items live: none is shown "design" after
    2 or 3 answers (with Des Raj's SE, often 0 after 2 answers: 18 and 12 of the 80), the
    method changes rarely (over 30 steps 19 times, 55 with Des Raj's SE), and a session's method
    and prediction equal replay's at that budget."""
    pred, targets = fitted
    methods = []
    for subject, y in zip(targets.subject_ids, targets.values):
        s = pred.session(rng=subject_generator(SEED, subject))
        row = []
        for _ in range(STEPS):
            item = s.next_items(1)[0]
            s.record(item, y[int(item[1:])])
            row.append(s.prediction().method)
        methods.append(row)
        if subject == targets.subject_ids[0]:
            rep = pred.replay(targets, budget=STEPS, seed=SEED)
            end = s.prediction()
            assert (end.method, end.score) == (rep.method[0], pytest.approx(rep.score[0],
                                                                            abs=1e-12))
    methods = np.asarray(methods)
    assert not (methods[:, 1:3] == "design").any()
    flips = (methods[:, 1:] != methods[:, :-1]).sum()
    assert flips <= 12, flips


def test_final_prediction_unchanged_from_thirty_answers(fitted):
    """From SMALL_SAMPLE_DRAWS answers on the outside test is Des Raj's: replay at the budget
    equals est.combine on its arrays without the small-sample SE."""
    pred, targets = fitted
    y = targets.aligned_values(pred.item_ids_)
    rep = pred.replay(targets, seed=SEED)
    gen = [subject_generator(SEED, s) for s in targets.subject_ids]
    score, *_, outside, _ = pred._combine(pred._replay_arrays(y, gen, BUDGET))
    assert np.array_equal(rep.score.to_numpy(), score)
    assert np.array_equal(rep.method.to_numpy() == "design", outside)
