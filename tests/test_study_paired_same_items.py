"""benchmarks/study_paired_same_items.py: the second model's control variates follow the same
rule as the predictor's own design, and the paired difference is unbiased (simulated 2PL)."""
import numpy as np
import pytest
from conftest import load_benchmark

from atlascat.irt.bank import ItemBank
from atlascat.predict import BenchmarkPredictor
from atlascat.predict import estimators as est
from atlascat.responses import ResponseMatrix


@pytest.fixture(scope="module")
def study(shared_data):
    return load_benchmark("study_paired_same_items")


@pytest.fixture(scope="module")
def world():
    rng = np.random.default_rng(11)
    a, b = rng.lognormal(0.0, 0.3, 200), rng.normal(0.0, 1.0, 200)
    ids = [f"i{j}" for j in range(200)]

    def answers(theta):
        p = 1 / (1 + np.exp(-a[None] * (theta[:, None] - b[None])))
        return (rng.random(p.shape) < p).astype(float)

    source = ResponseMatrix(answers(rng.normal(0.0, 1.0, 50)), item_ids=ids)
    pred = BenchmarkPredictor(30).fit(ItemBank(ids, a, b), source, rng=0)
    return pred, answers


def test_follow_reproduces_the_designs_own_control_variates(study, world):
    pred, answers = world
    y = answers(np.array([-0.5, 0.0, 1.0]))
    tables, _, log_prior = pred._grid()
    d = est.sequential_design(y, tables, log_prior, 30, pred.mix, np.random.default_rng(0),
                              level=pred._level(), share=pred.share)
    again = study.follow(pred, y, d["item"], d["valid"])
    for k in ("f", "f_rest", "g", "g_rest"):
        assert np.allclose(again[k], d[k], atol=1e-12), k
    yd = np.take_along_axis(y, d["item"], 1)
    total, _ = est.des_raj(yd, d["q"], d["f"], d["f_rest"], d["valid"], d["g"], d["g_rest"])
    terms = est.des_raj_terms(yd, d["q"], d["f"], d["f_rest"], d["valid"], d["g"], d["g_rest"])
    assert np.allclose(terms.mean(1), total)


def test_paired_difference_is_unbiased(study, world):
    pred, answers = world
    ya, yb = answers(np.full(1, 0.3)), answers(np.full(1, -0.3))
    truth = ya.sum() - yb.sum()
    tables, _, log_prior = pred._grid()
    reps = 300
    yy = np.repeat(ya, reps, 0)
    d = est.sequential_design(yy, tables, log_prior, 30, pred.mix, np.random.default_rng(5),
                              level=pred._level(), share=pred.share)
    items, valid = d["item"], d["valid"]
    yb_rep = np.repeat(yb, reps, 0)
    cb = study.follow(pred, yb_rep, items, valid)
    da = est.des_raj_terms(np.take_along_axis(yy, items, 1), d["q"], d["f"], d["f_rest"], valid,
                           d["g"], d["g_rest"])
    db = est.des_raj_terms(np.take_along_axis(yb_rep, items, 1), d["q"], cb["f"], cb["f_rest"],
                           valid, cb["g"], cb["g_rest"])
    est_d = (da - db).mean(1)
    se_mean = est_d.std(ddof=1) / np.sqrt(reps)
    assert abs(est_d.mean() - truth) < 4 * se_mean
