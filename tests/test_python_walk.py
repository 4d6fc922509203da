"""A data scientist's walk through the Python API: inputs of the wrong shape or kind are refused
with an AtlasError that says how to fix them, never read silently into a wrong result."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import atlascat as at
from atlascat.errors import AtlasError


@pytest.fixture(scope="module")
def bank():
    return at.ItemBank([f"i{k}" for k in range(12)], a=np.linspace(0.8, 2.0, 12),
                       b=np.linspace(-2.0, 2.0, 12))


def test_simulate_refuses_a_table_of_thetas(bank):
    config = at.CATConfig(min_items=2, max_items=4)
    with pytest.raises(AtlasError, match=r"one value per examinee \(1-D\), got shape \(2, 2\)"):
        at.simulate_cat(bank, config, thetas=np.zeros((2, 2)))
    # a single column is one theta per examinee, as a list is
    col = at.simulate_cat(bank, config, thetas=np.array([[-1.0], [1.0]]),
                          rng=np.random.default_rng(0))
    flat = at.simulate_cat(bank, config, thetas=[-1.0, 1.0], rng=np.random.default_rng(0))
    pd.testing.assert_frame_equal(col.persons.drop(columns="seconds"),
                                  flat.persons.drop(columns="seconds"))
    with pytest.raises(AtlasError, match="one value per examinee"):
        at.simulate_cat(bank, config, responses=np.ones((2, 12)), thetas=np.zeros((2, 2)))


def test_scoring_responses_with_no_item_of_the_bank_is_refused(bank):
    rng = np.random.default_rng(0)
    df = pd.DataFrame((rng.random((5, 12)) < 0.5).astype(float),
                      index=[f"m{k}" for k in range(5)], columns=[f"X{k}" for k in range(12)])
    # every score would be the prior mean with SE 1: refused, naming both id formats
    with pytest.raises(AtlasError, match=r"none of the responses' 12 items is in the bank.*"
                                         r"'X0'.*'i0'"):
        at.estimate_ability(df, bank)
    with pytest.raises(AtlasError, match="none of the responses"):
        at.estimate_ability(df, bank, extra_items="ignore")
    # one shared item is enough: the others are left out, with the usual warning
    with pytest.warns(UserWarning, match="11 item"):
        out = at.estimate_ability(df.rename(columns={"X0": "i0"}), bank)
    assert (out["n_items"] == 1).all()


def test_a_predictor_session_takes_one_answer_per_item():
    from atlascat.predict import BenchmarkPredictor

    rng = np.random.default_rng(3)
    n, m = 60, 30
    theta, b = rng.normal(size=n), rng.normal(size=m)
    y = (rng.random((n, m)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    ids = [f"i{k}" for k in range(m)]
    source = at.ResponseMatrix(y, [f"m{k}" for k in range(n)], ids)
    bank = at.ItemBank(ids, a=np.ones(m), b=b)
    session = BenchmarkPredictor(5).fit(bank, source, rng=0).session(rng=1)
    item = session.next_items(1)[0]
    session.record(item, 1)
    before = session.prediction()
    with pytest.raises(AtlasError, match=f"item '{item}' was already recorded .*one answer"):
        session.record(item, 0)
    assert session.prediction() == before and session.n_items == 1


def test_the_namespace_shows_the_public_names_only():
    names = set(dir(at))
    assert names == set(at.__all__)
    assert not names & {"annotations", "importlib", "_LAZY", "errors", "_version"}
    # what the docs import by long module paths is here too
    from atlascat.cat.ordinal import OrdinalCATSession
    from atlascat.irt.compare import anova
    from atlascat.irt.polybank import PolyBank
    from atlascat.predict import BenchmarkPredictor

    assert (at.PolyBank, at.OrdinalCATSession, at.BenchmarkPredictor, at.anova) == \
        (PolyBank, OrdinalCATSession, BenchmarkPredictor, anova)


def test_a_binary_session_on_an_ordinal_bank_names_the_ordinal_session():
    from atlascat.irt.polybank import PolyBank

    poly = PolyBank(["p0", "p1"], np.array([[1.0, 1.0, -1.0], [1.2, 0.5, -0.5]]), "graded")
    with pytest.raises(AtlasError, match="got PolyBank; an ordinal bank's live test is "
                                         "atlascat.OrdinalCATSession"):
        at.CATSession(poly, at.CATConfig(), np.random.default_rng(0))
    with pytest.raises(AtlasError, match=r"got str; load one with atlascat.load_bank\(name\) or ItemBank.read"):
        at.CATSession("arc", at.CATConfig(), np.random.default_rng(0))


@pytest.fixture(scope="module")
def poly():
    from atlascat.irt.polybank import PolyBank

    return PolyBank(["p0", "p1"], np.array([[1.0, 1.0, -1.0], [1.2, 0.5, -0.5]]), "graded")


def test_a_text_rating_is_refused_not_read_as_missing(poly):
    frame = pd.DataFrame([["good", 1.0], [2.0, 0.0]], index=["m0", "m1"], columns=["p0", "p1"])
    with pytest.raises(AtlasError, match=r"text cell 'good' at row 0 \(subject 'm0'\), column "
                                         r"'p0'; ratings must be numbers or blank"):
        at.estimate_ability(frame, poly)
    with pytest.raises(AtlasError, match="text cell 'good'"):
        at.estimate_ability(np.array([["good", "1"], ["2", "0"]], dtype=object), poly)
    with pytest.raises(AtlasError, match="text cell 'good'"):
        at.calibrate(pd.concat([frame] * 50, ignore_index=True).set_axis(
            [f"m{k}" for k in range(100)]), model="graded")
    # blanks and NA markers stay missing
    blank = at.estimate_ability(frame.replace("good", "NA"), poly)
    assert blank["n_items"].tolist() == [1, 2]


def test_an_ordinal_bank_and_session_refuse_text_with_an_atlas_error(poly):
    from atlascat.irt.polybank import PolyBank

    params = np.array([[1.0, 1.0, -1.0], [1.2, 0.5, -0.5]])
    with pytest.raises(AtlasError, match=r"the order is PolyBank\(item_ids, params, model\)"):
        PolyBank(["p0", "p1"], "graded", params)         # model and params swapped
    with pytest.raises(AtlasError, match="params must be"):
        PolyBank(["p0", "p1"], np.zeros((2, 3, 1)), "graded")
    session = at.OrdinalCATSession(poly, at.CATConfig(min_items=1, max_items=2),
                                   np.random.default_rng(0))
    item = session.next_item()
    with pytest.raises(AtlasError, match=f"rating of item '{item}' must be a number"):
        session.record(item, "good")
    session.record(item, 2)                              # the item stayed pending
    assert session.history()["score"].tolist() == [2.0]


def test_anova_takes_fitted_calibrators(shared_data):
    lsat7 = at.ResponseMatrix.read(shared_data / "classic" / "lsat7_patterns.csv",
                                   freq_column="freq")
    rasch, twopl = at.Calibrator("rasch").fit(lsat7), at.Calibrator("2pl", prior_a=None).fit(lsat7)
    table = at.anova(rasch, twopl)
    pd.testing.assert_frame_equal(table, at.anova(rasch.result_, twopl.result_))
    assert table["df"].iloc[1] == 4
    with pytest.raises(at.NotFittedError, match="call fit"):
        at.anova(rasch, at.Calibrator("2pl"))


@pytest.mark.parametrize("name", ["estimate_ability", "CATSession", "ItemBank", "PolyBank",
                                  "anova", "Calibrator"])
def test_the_public_models_docstrings_state_formula_and_reference(name):
    import inspect
    import re

    doc = inspect.getdoc(getattr(at, name))
    assert re.search(r"\(\w[\w &]*, (19|20)\d\d[;)]", doc), doc[:300]   # (Author, year)
    assert "=" in doc                                                  # a formula


def test_suite_and_predictor_session_reprs_are_one_short_line(bank):
    from atlascat.predict import BenchmarkPredictor
    from atlascat.suite import Suite, SuiteMember

    suite = Suite("mine", [SuiteMember("arc"), SuiteMember("mmlu", weight=3)])
    assert repr(suite) == "Suite('mine', [arc: weight 0.25; mmlu: weight 0.75])"
    shipped = repr(at.load_suite("openllm-v1"))
    assert "\n" not in shipped and len(shipped) < 300 and "arc: 239 items" in shipped
    rng = np.random.default_rng(4)
    y = (rng.random((40, 12)) < 0.6).astype(float)
    source = at.ResponseMatrix(y, [f"m{k}" for k in range(40)], list(bank.item_ids))
    session = BenchmarkPredictor(4).fit(bank, source, rng=0).session(rng=1)
    session.record(session.next_items(1)[0], 1)
    assert repr(session) == "PredictSession(answered=1, drawn=1, budget=4, running)"


def test_calibrator_get_and_set_params_as_scikit_learn(bank):
    cal = at.Calibrator("2pl", tol=1e-5)
    params = cal.get_params()
    assert params["model"] == "2pl" and params["tol"] == 1e-5 and "prior_a" in params
    twin = at.Calibrator(**params)                      # what sklearn.base.clone does
    assert twin.get_params() == params and repr(twin) == repr(cal)
    rng = np.random.default_rng(5)
    theta = rng.normal(size=300)
    p = 1 / (1 + np.exp(-bank.a * (theta[:, None] - bank.b)))
    y = (rng.random((300, 12)) < p).astype(float)
    first = cal.fit(y).loglik_
    assert cal.set_params(model="rasch") is cal and cal.fit(y).result_.model == "rasch"
    assert cal.loglik_ < first                          # refit with the new setting
    with pytest.raises(AtlasError, match="no setting 'tolerance'; the settings are model, "):
        cal.set_params(tolerance=1e-4)


def test_benchmark_predictor_get_and_set_params_as_scikit_learn(bank):
    from atlascat.predict import BenchmarkPredictor

    pred = BenchmarkPredictor(6, mix=0.5, theta_range=[-5, 5])
    params = pred.get_params()
    assert params["budget"] == 6 and params["mix"] == 0.5 and params["theta_range"] == (-5, 5)
    assert set(params) == {"budget", "mix", "share", "level_fraction", "z_cut",
                           "theta_quantile", "d_margin", "chance", "ridge", "fitted_weight",
                           "model_gate", "n_replays", "min_tau", "quadpts", "theta_range",
                           "score_range"}
    twin = BenchmarkPredictor(**params)                 # what sklearn.base.clone does
    assert twin.get_params() == params and repr(twin) == repr(pred)
    rng = np.random.default_rng(2)
    y = (rng.random((40, 12)) < 0.6).astype(float)
    source = at.ResponseMatrix(y, [f"m{k}" for k in range(40)], list(bank.item_ids))
    assert pred.set_params(budget=4, theta_range=[-6, 6]) is pred
    assert pred.get_params()["theta_range"] == (-6, 6) and repr(pred) == \
        "BenchmarkPredictor(budget=4, mix=0.5)"
    assert pred.fit(bank, source, rng=0).session(rng=1).budget == 4   # refit with it
    with pytest.raises(AtlasError, match="BenchmarkPredictor has no setting 'budgets'; the "
                                         "settings are budget, mix, "):
        pred.set_params(budgets=3)


def test_bank_information_refuses_text_theta(bank, poly):
    for b in (bank, poly):
        with pytest.raises(AtlasError, match="theta must be a number or an array of numbers, "
                                             "got 'zero'"):
            b.test_information("zero")
        with pytest.raises(AtlasError, match="theta must be"):
            b.probability(["low", "high"])
        np.testing.assert_allclose(b.test_information([0.0, 1.0]),
                                   b.test_information(np.array([0.0, 1.0])))
    assert np.ndim(bank.test_information(0.0)) == 0 and bank.information(0).shape == (12,)


def test_a_text_score_names_the_name_column_only_where_it_is_one(bank):
    with pytest.raises(AtlasError) as one:              # one subject's answers as a dict
        at.estimate_ability({"i0": "yes", "i1": 1}, bank)
    assert "text cell 'yes'" in str(one.value) and "first column" not in str(one.value)
    names = pd.DataFrame({"name": ["gpt", "llama"], "i0": [1, 0], "i1": [0, 1]},
                         index=["m0", "m1"])
    with pytest.raises(AtlasError, match="column 'name' holds no score at all: the first column "
                                         "names the models"):
        at.estimate_ability(names, bank)
    notes = pd.DataFrame({"i0": [1, 0], "note": ["a", "b"]}, index=["m0", "m1"])
    with pytest.raises(AtlasError) as later:            # not the first column: no such hint
        at.estimate_ability(notes, bank)
    assert "text cell 'a'" in str(later.value) and "first column" not in str(later.value)


def test_replay_gives_no_prediction_for_a_target_with_no_answers(bank):
    from atlascat.predict import BenchmarkPredictor

    rng = np.random.default_rng(6)
    y = (rng.random((40, 12)) < 0.6).astype(float)
    ids = list(bank.item_ids)
    predictor = BenchmarkPredictor(4).fit(bank, at.ResponseMatrix(y, [f"m{k}" for k in range(40)],
                                                                  ids), rng=0)
    targets = at.ResponseMatrix(np.vstack([y[:1], np.full((1, 12), np.nan)]), ["a", "none"], ids,
                                on_empty="keep")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                    # no "Mean of empty slice"
        out = predictor.replay(targets, rng=1).set_index("subject_id")
    assert out.loc["none", "flag"] == "no_answers" and out.loc["none", "n_items"] == 0
    assert out.loc["none", ["score", "score_lo", "score_hi", "se", "theta", "full_score"]].isna().all()
    assert out.loc["a", "flag"] != "no_answers" and np.isfinite(out.loc["a", "score"])


def test_predictor_settings_and_inputs_of_the_wrong_kind_raise_atlas_errors(bank):
    from atlascat.predict import BenchmarkPredictor

    rng = np.random.default_rng(7)
    y = (rng.random((40, 12)) < 0.6).astype(float)
    source = at.ResponseMatrix(y, [f"m{k}" for k in range(40)], list(bank.item_ids))
    with pytest.raises(AtlasError, match="budget must be a whole number of items, got '4'"):
        BenchmarkPredictor("4").fit(bank, source, rng=0)
    with pytest.raises(AtlasError, match="rng must be a numpy Generator, an int seed or None, "
                                         "got 'x'"):
        BenchmarkPredictor(4).fit(bank, source, rng="x")
    with pytest.raises(AtlasError, match="bank 'arc' is a name or path, not an ItemBank"):
        BenchmarkPredictor(4).fit("arc", source, rng=0)
    fitted = BenchmarkPredictor(4).fit(bank, source, rng=0)
    with pytest.raises(AtlasError, match="rng must be"):
        fitted.session(rng="x")
    with pytest.raises(AtlasError, match="rng must be"):
        fitted.replay(source, rng="x")
    assert BenchmarkPredictor(4.0).fit(bank, source, rng=0).item_ids_.size == 12


def test_a_bank_name_where_a_bank_belongs_names_load_bank(bank):
    with pytest.raises(AtlasError, match=r"bank 'arc' is a name or path, not an ItemBank; load "
                                         r"it with atlascat.load_bank\(name\) for a bundled"):
        at.estimate_ability(np.ones((2, 12)), "arc")
