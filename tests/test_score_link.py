"""Score link: theta (+- SE) -> published leaderboard score; shipped banks; simulate column."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cat.config import CATConfig
from atlascat.errors import AtlasError, BankError, ConfigError
from atlascat.catalogue import LINK_BENCHMARKS, load_bundled_bank, load_score_link
from atlascat.scorelink import ScoreLinkEstimator
from atlascat.scorelink.score_link import ScoreLink
from atlascat.scorelink.prediction import ScorePrediction
from atlascat.scorelink.curve import fit_monotone_spline
from atlascat.irt.bank import ItemBank


def _world(seed=0, n=500, J=30, misfit=0.0, amplitude=0.6):
    """A 2PL-ish bank, models, answers and a published score g(theta) + noise.

    ``misfit``: each model also has a deviation delta (sd ``misfit``) from g that shows in its
    answers to items i0-i4 only (the benchmark's other items the bank does not hold)."""
    rng = np.random.default_rng(seed)
    bank = ItemBank([f"i{j}" for j in range(J)], rng.lognormal(0.2, 0.3, J),
                    rng.normal(0, 1.2, J), np.full(J, 0.2))
    theta = rng.normal(size=n)
    delta = misfit * rng.normal(size=n)
    p = bank.probability(theta)
    if misfit:
        p[:, :5] = np.clip(p[:, :5] + 0.35 * delta[:, None] / misfit, 0.01, 0.99)
    y = (rng.random((n, J)) < p).astype(float)
    score = np.clip(0.25 + amplitude / (1 + np.exp(-1.3 * (theta - 0.3))) + 0.01 * rng.normal(size=n)
                    + delta, 0, 1)
    return bank, theta, y, score, delta


@pytest.fixture(scope="module")
def fitted():
    bank, theta, y, score, _ = _world()
    link = ScoreLinkEstimator(
        "toy", cat_config=CATConfig(se_stop=0.3, min_items=10, max_items=20), random_state=1
    ).fit(bank, y, score).link_
    return bank, theta, y, score, link


def test_link_recovers_the_score_function_on_new_models(fitted):
    bank, _, _, _, link = fitted
    _, theta, y, score, _ = _world(seed=5, n=400)
    from atlascat.irt.ability import eap

    th, se = eap(y, bank)
    pred, lo, hi = link.predict_many(th, se)
    # as good as the true score function applied to the same (30-item) theta estimate
    oracle = np.clip(0.25 + 0.6 / (1 + np.exp(-1.3 * (th - 0.3))), 0, 1)
    mae = np.mean(np.abs(pred - score))
    assert mae <= 1.05 * np.mean(np.abs(oracle - score))
    assert np.all((lo <= pred) & (pred <= hi))
    assert 0.85 <= np.mean((score >= lo) & (score <= hi)) <= 1.0


def test_predict_contract(fitted):
    *_, link = fitted
    p = link.predict(0.0, 0.3)
    assert isinstance(p, ScorePrediction)
    assert 0.0 <= p.lo <= p.score <= p.hi <= 1.0
    assert 0.0 <= p.percentile <= 100.0
    assert set(p.to_dict()) >= {"score", "lo", "hi", "percentile"}
    # monotone in theta, wider with a larger SE
    s = [link.predict(t, 0.2).score for t in np.linspace(-3, 3, 13)]
    assert np.all(np.diff(s) >= -1e-12) and s[-1] > s[0] + 0.3
    assert link.predict(0.0, 0.6).hi - link.predict(0.0, 0.6).lo > p.hi - p.lo
    with pytest.raises(ConfigError):
        link.predict(float("nan"), 0.2)
    with pytest.raises(ConfigError):
        link.predict(0.0, -1.0)


def test_percentile_is_monotone_and_bounded(fitted):
    *_, link = fitted
    assert link.percentile(-1.0) == 0.0 and link.percentile(2.0) == 100.0
    vals = [link.percentile(s) for s in np.linspace(0.2, 0.9, 30)]
    assert np.all(np.diff(vals) >= 0) and vals[-1] > vals[0]
    median = float(np.median(link.quantiles))
    assert abs(link.percentile(median) - 50.0) < 2.0


def test_round_trip_json(fitted):
    *_, link = fitted
    d = json.loads(json.dumps(link.to_dict()))
    back = ScoreLink.from_dict(d)
    answers = {"i1": 1, "i2": 0, "i3": 1, "nope": 1}
    for t, se in [(-1.0, 0.3), (0.4, 0.2), (2.0, 0.1)]:
        with pytest.warns(UserWarning, match="'nope'"):
            a, b = link.predict(t, se, responses=answers), back.predict(t, se, responses=answers)
        assert a.score == pytest.approx(b.score, abs=1e-5)
        assert a.hi == pytest.approx(b.hi, abs=1e-5)
    bad = dict(d)
    del bad["score_grid"]
    with pytest.raises(BankError):
        ScoreLink.from_dict(bad)


def test_answer_correction_uses_item_weights(fitted):
    bank, *_, link = fitted
    assert set(link.corrections) == {"cat", "anchors"} and len(link.anchor_items) == 5
    d = link.to_dict()
    J = len(link.item_ids)
    d["corrections"] = {"cat": {"weights": [0.02] * J, "intercept": 0.0, "scale": 1.0},
                        "anchors": {"weights": [0.05] * J, "intercept": 0.01, "scale": 0.5}}
    d["anchor_items"] = ["i0", "i1"]
    d.pop("local_scale", None)  # the theta-only interval without its local width here
    lk = ScoreLink.from_dict(d)
    right = {f"i{j}": 1 for j in range(5, 15)}
    wrong = {f"i{j}": 0 for j in range(5, 15)}
    none = lk.predict(0.0, 0.3)
    hi, lo = lk.predict(0.0, 0.3, responses=right), lk.predict(0.0, 0.3, responses=wrong)
    assert lo.score < none.score < hi.score
    P = bank.probability(0.0)
    assert hi.score - none.score == pytest.approx(0.02 * np.sum(1 - P[5:15]), abs=1e-5)
    # every anchor answered: the anchor correction (own weights, intercept, interval scale)
    both = {"i0": 1, "i1": 0}
    got = lk.predict(0.0, 0.3, responses=both)
    want = 0.01 + 0.05 * ((1 - P[0]) + (0 - P[1]))
    assert got.score - none.score == pytest.approx(want, abs=1e-5)
    assert got.hi - got.lo == pytest.approx(0.5 * (none.hi - none.lo), rel=1e-3)
    # unknown items are ignored; the vectorized path agrees with predict
    with pytest.warns(UserWarning, match="1 of 1 answers"):
        assert lk.predict(0.0, 0.3, responses={"zzz": 1}).score == pytest.approx(none.score)
    asked = np.zeros((2, J), bool)
    asked[0, 5:15] = True
    asked[1, :2] = True
    y = np.zeros((2, J))
    y[0, 5:15] = 1
    y[1, 0] = 1
    s, lo_, hi_ = lk.predict_many(np.zeros(2), np.full(2, 0.3), asked=asked, y=y)
    assert s[0] == pytest.approx(hi.score, abs=1e-6) and s[1] == pytest.approx(got.score, abs=1e-6)


def test_anchor_correction_recovers_misfit_on_new_models():
    """Items i0-i4 carry each model's deviation from g(theta): the fitted anchors find them and
    the correction cuts the error on new models."""
    bank, _, y, score, _ = _world(seed=3, misfit=0.04, amplitude=0.1)
    link = ScoreLinkEstimator(cat_config=CATConfig(se_stop=0.3, min_items=10, max_items=20),
                              random_state=2).fit(bank, y, score).link_
    assert len(set(link.anchor_items) & {f"i{j}" for j in range(5)}) >= 4
    _, _, y2, s2, _ = _world(seed=4, misfit=0.04, amplitude=0.1)
    from atlascat.irt.ability import eap

    th, se = eap(y2, bank)
    plain = link.predict_many(th, se)[0]
    corrected, lo, hi = link.predict_many(th, se, asked=np.ones(y2.shape, bool), y=y2)
    assert np.mean(np.abs(corrected - s2)) < 0.8 * np.mean(np.abs(plain - s2))
    assert np.mean((s2 >= lo) & (s2 <= hi)) > 0.85
    off = ScoreLinkEstimator(cat_config=False).fit(bank, y, score).link_
    assert off.corrections == {} and off.anchor_items == []


def test_fit_rejects_bad_input():
    bank, _, y, score, _ = _world(n=200)
    with pytest.raises(ConfigError):
        ScoreLinkEstimator(cat_config=False).fit(bank, y, score * 100)  # percent, not 0-1
    with pytest.raises(ConfigError):
        ScoreLinkEstimator(cat_config=False).fit(bank, y, score[:-1])
    with pytest.raises(ConfigError):
        fit_monotone_spline(np.arange(5.0), np.arange(5.0))
    assert issubclass(ConfigError, AtlasError)


def test_monotone_spline_is_monotone_and_flat_outside_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=500)
    y = np.tanh(x) + 0.3 * rng.normal(size=500)
    grid = np.linspace(-6, 6, 241)
    v = fit_monotone_spline(x, y, grid=grid)
    assert np.all(np.diff(v) >= 0)
    assert v[0] == v[grid < x.min()][-1] and v[-1] == v[grid > x.max()][0]
    assert np.abs(np.interp([-1, 0, 1], grid, v) - np.tanh([-1, 0, 1])).max() < 0.15


# ------------------------------------------------------------------------- real data
@pytest.mark.slow
def test_fit_bank_and_link_on_held_out_real_models(shared_data):
    """A 2PL bank + link from 1,500 HellaSwag models predicts the others' published score."""
    from atlascat.cat.simulate import simulate_cat
    from atlascat.filtering import stratified_split
    from atlascat.live.build_bank import content_matrix, fit_bank_and_link, load_published_scores

    items = shared_data / "openllm" / "items"
    rm = content_matrix("hellaswag", items)
    assert rm.n_items == 63
    scores = load_published_scores(shared_data / "openllm" / "leaderboard_scores.csv.gz",
                                   "hellaswag")
    train, test = stratified_split(rm, rng=np.random.default_rng(0))
    bank, link, info = fit_bank_and_link(train, scores, bench="hellaswag", model="2pl", seed=0)
    assert info["model"] == "2pl" and len(bank) == info["n_items"] < 63  # ceiling items filtered
    y = test.aligned_values(bank.item_ids, extra="ignore")
    res = simulate_cat(bank, CATConfig(se_stop=0.3), responses=y, rng=np.random.default_rng(1))
    pred, lo, hi = link.predict_many(res.persons["theta"], res.persons["se"])
    s = scores.reindex(test.subject_ids.astype(str)).to_numpy(float)
    # held-out MAE about one point (published HellaSwag scores span 25-90)
    assert np.mean(np.abs(pred - s)) < 0.015
    assert np.mean((s >= lo) & (s <= hi)) > 0.9


@pytest.mark.parametrize("bench", LINK_BENCHMARKS)
def test_shipped_bank_and_link(bench):
    bank = load_bundled_bank(bench)
    link = load_score_link(bench)
    assert link.benchmark == bench
    assert list(bank.item_ids) == link.item_ids
    assert bank.metadata is not None and {"question", "answer"} <= set(bank.metadata.columns)
    assert link.info["n_models"] > 2000
    low, high = link.predict(-2.0, 0.3), link.predict(2.0, 0.3)
    assert 0 <= low.score < high.score <= 1
    assert low.percentile < high.percentile


def test_simulate_writes_the_predicted_score(tmp_path):
    from typer.testing import CliRunner

    from atlascat import catalogue
    from atlascat.cli import app

    rm = catalogue.load_responses("winogrande")
    small = rm.subset(subjects=np.arange(6))
    path = tmp_path / "m.csv"
    small.write(path)
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["simulate", "--bank", "winogrande", str(path),
                                 "-o", str(out), "--se-stop", "0.3", "--no-selected"])
    assert r.exit_code == 0, r.output
    df = pd.read_csv(out / "person_scores.csv")
    assert len(df) == 6 and df["score"].between(0, 1).all()
    assert (df["score_lo"] <= df["score"]).all()
    assert (df["score"] <= df["score_hi"]).all()


def test_isotonic_monotone_averages_a_bump_instead_of_carrying_it():
    """A running maximum carries one high blip at the low end to the whole lower range; the
    isotonic fit pools it with its neighbours (what made WinoGrande's weak models 3 points
    too high)."""
    from atlascat.scorelink.curve import isotonic as _isotonic

    v = np.array([0.60, 0.50, 0.50, 0.50, 0.55, 0.70])
    w = np.array([1.0, 10, 10, 10, 10, 10])
    iso = _isotonic(v, w)
    assert np.all(np.diff(iso) >= 0)
    assert iso[0] < 0.52 and iso[-1] == 0.70
    # weighted least squares: the pooled block's value is its weighted mean
    assert np.isclose(iso[0], (0.6 + 30 * 0.5) / 31)
    # brute-force check on random data: no other monotone sequence on a grid of values is closer
    rng = np.random.default_rng(3)
    for _ in range(20):
        v = rng.normal(size=6)
        w = rng.uniform(0.5, 2.0, size=6)
        iso = _isotonic(v, w)
        assert np.all(np.diff(iso) >= -1e-12)
        best = np.sum(w * (v - iso) ** 2)
        for _ in range(200):
            cand = np.sort(rng.normal(size=6))
            assert np.sum(w * (v - cand) ** 2) >= best - 1e-12


def test_non_monotone_link_keeps_a_u_shape():
    """monotone=False keeps TruthfulQA's U-shaped relation (weakest models near chance mc2)."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=800)
    y = 0.4 + 0.05 * x ** 2 + 0.02 * rng.normal(size=800)
    grid = np.linspace(-6, 6, 241)
    free = fit_monotone_spline(x, y, grid=grid, monotone=False)
    mono = fit_monotone_spline(x, y, grid=grid)
    at = lambda v, t: np.interp(t, grid, v)  # noqa: E731
    assert at(free, -2) > at(free, 0) + 0.1  # the U is kept
    assert abs(at(free, -2) - (0.4 + 0.05 * 4)) < 0.05
    assert np.all(np.diff(mono) >= 0)


def test_answers_to_items_the_link_lacks_are_named_not_dropped_silently():
    """An id the link does not have (a typo, an int for a str) is ignored with a warning that
    names it and shows what the link's ids look like; the known answers still count."""
    link = load_score_link("arc")
    known = link.item_ids[0]
    with pytest.warns(UserWarning, match=r"1 of 2 answers .* \('no-such-item'; its ids look like .*ignored"):
        pred = link.predict(0.8, 0.2, responses={known: 1, "no-such-item": 0})
    with_known = link.predict(0.8, 0.2, responses={known: 1})
    assert (pred.score, pred.lo, pred.hi) == (with_known.score, with_known.lo, with_known.hi)
