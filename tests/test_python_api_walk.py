"""A notebook user's walk through the Python API, never touching the CLI: a pandas DataFrame
(models as its index) in, calibration, scoring, a bank folder and its predictions out; the
inputs a user has are accepted and bad ones refused with a line naming the argument."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import atlascat as at


def _frame(n=60, k=40, seed=0, prefix="org/model-"):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n)
    a, b = rng.lognormal(0, 0.3, k), rng.normal(size=k)
    y = (rng.random((n, k)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    return pd.DataFrame(y, index=[f"{prefix}{i}" for i in range(n)],
                        columns=[f"q{j}" for j in range(k)])


@pytest.fixture(scope="module")
def frame():
    return _frame()


def test_build_bank_takes_a_dataframe_or_a_response_matrix(frame, tmp_path):
    """build_bank(DataFrame) read the frame's column names as 40 files ("give one response
    matrix (got 40 files)"), and a ResponseMatrix raised TypeError: not iterable."""
    from atlascat.bankdir import build_bank

    frame.iloc[:50].to_csv(tmp_path / "src.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from_file = build_bank(tmp_path / "src.csv", folds=0, budget=20)
        from_frame = build_bank(frame.iloc[:50], tmp_path / "bank", folds=0, budget=20)
        from_rm = build_bank(at.ResponseMatrix.from_frame(frame.iloc[:50]), folds=0, budget=20,
                             name="mine")
    np.testing.assert_allclose(from_frame.bank.to_frame()[["a", "b"]],
                               from_file.bank.to_frame()[["a", "b"]])
    np.testing.assert_allclose(from_rm.bank.to_frame()[["a", "b"]],
                               from_file.bank.to_frame()[["a", "b"]])
    assert from_frame.manifest["source"]["files"] == []
    assert from_rm.benchmark == "mine"
    assert (tmp_path / "bank" / "manifest.json").exists()


def test_build_bank_frame_on_a_score_range(frame, tmp_path):
    from atlascat.bankdir import build_bank
    from atlascat.errors import ResponseDataError

    tens = frame.iloc[:50] * 9 + 1          # a 1-10 rating
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = build_bank(tens, folds=0, budget=20, score_range=(1, 10))
    assert f.manifest["settings"]["score_range"] == [1.0, 10.0]
    with pytest.raises(ResponseDataError, match="outside"):
        build_bank(tens + 1, folds=0, budget=20, score_range=(1, 10))


@pytest.fixture(scope="module")
def bank(frame):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return at.calibrate(frame, "2pl").bank


def _entry_points(frame):
    from atlascat.design.optimal import form_criterion, optimal_form
    from atlascat.irt import fit

    return {"simulate_cat": lambda b: at.simulate_cat(b, thetas=[0.0], rng=0),
            "OrdinalCATSession": lambda b: at.OrdinalCATSession(b),
            "simulate_ordinal_cat": lambda b: __import__(
                "atlascat.cat.ordinal", fromlist=["x"]).simulate_ordinal_cat(b, thetas=[0.0]),
            "m2": lambda b: fit.m2(frame, b), "sx2": lambda b: fit.sx2(frame, b),
            "optimal_form": lambda b: optimal_form(b, 5),
            "form_criterion": lambda b: form_criterion(b, [0, 1])}


@pytest.mark.parametrize("name", ["simulate_cat", "OrdinalCATSession", "simulate_ordinal_cat",
                                  "m2", "sx2", "optimal_form", "form_criterion"])
@pytest.mark.parametrize("bad", ["frame", "path", "none"])
def test_a_wrong_bank_is_a_config_error_naming_it(frame, bank, name, bad):
    """These raised AttributeError ('DataFrame' object has no attribute 'params' / 'model' /
    'information' / 'log_prob') from deep inside instead of naming the argument."""
    from atlascat.errors import ConfigError

    value = {"frame": bank.to_frame(), "path": "bank.csv", "none": None}[bad]
    with pytest.raises(ConfigError, match=r"^bank "):
        _entry_points(frame)[name](value)


def test_a_bank_frame_error_says_how_to_make_a_bank(bank):
    from atlascat.errors import ConfigError

    with pytest.raises(ConfigError, match=r"ItemBank\.from_frame"):
        at.simulate_cat(bank.to_frame(), thetas=[0.0])


def test_ordinal_session_refuses_a_bad_rng_and_config_by_name():
    """OrdinalCATSession passed rng to np.random.default_rng (numpy's TypeError about
    SeedSequence) and a dict config failed with AttributeError 'selection'."""
    from atlascat.errors import ConfigError
    from atlascat.irt import polytomous
    from atlascat.irt.polybank import PolyBank

    rng = np.random.default_rng(0)
    a = rng.lognormal(0.3, 0.3, 6)
    d = -np.sort(rng.normal(0, 1.2, (6, 3)), axis=1) * a[:, None]
    ratings = polytomous.sample("graded", np.column_stack([a, d]), rng.normal(size=200), rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        poly = at.calibrate(pd.DataFrame(ratings), "graded").bank
    assert isinstance(poly, PolyBank)
    with pytest.raises(ConfigError, match="^rng must be"):
        at.OrdinalCATSession(poly, rng="seven")
    with pytest.raises(ConfigError, match="^config must be a CATConfig"):
        at.OrdinalCATSession(poly, {"max_items": 3})
    with pytest.raises(ConfigError, match="^rng must be"):
        at.simulate_cat(poly, thetas=[0.0], rng="seven")
    first = at.OrdinalCATSession(poly, rng=np.random.default_rng(4)).next_item()
    assert first == at.OrdinalCATSession(poly, rng=4).next_item()   # a seed = its Generator


def test_simulate_with_thetas_and_responses_names_thetas(frame, bank):
    """With responses= the thetas are the reference; a wrong length was reported as
    'theta_ref has 1 values', an argument the caller never passed."""
    from atlascat.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^thetas \(the reference of responses=\) has 1"):
        at.simulate_cat(bank, responses=frame.iloc[:5], thetas=[0.0], rng=0)


def test_predictor_fit_on_an_unlabelled_array_says_it_has_no_item_ids(frame, bank):
    """An array's columns read as '0', '1', ...: the error told the user to 'give the matrix
    the bank was calibrated on', which they had done."""
    from atlascat.errors import ResponseDataError

    with pytest.raises(ResponseDataError, match=r"an array has no item ids.*DataFrame"):
        at.BenchmarkPredictor(10).fit(bank, frame.to_numpy(), rng=0)
    fitted = at.BenchmarkPredictor(10).fit(bank, frame.astype("Int64"), rng=0)   # labelled
    assert list(fitted.item_ids_) == list(frame.columns)


@pytest.mark.parametrize("package", ["irt", "cat", "predict", "bankdir", "live", "design"])
def test_public_subpackages_say_what_they_hold(package):
    """``help(atlascat.cat)`` and ``help(atlascat.design)`` showed nothing: their __init__ had
    no docstring. Each public subpackage's docstring maps its modules, and every module it
    names exists."""
    import importlib
    import re

    mod = importlib.import_module(f"atlascat.{package}")
    doc = mod.__doc__ or ""
    assert len(doc.splitlines()) >= 5, f"atlascat.{package} has no module map"
    named = set(re.findall(rf":mod:`(?:atlascat\.{package})?\.(\w+)`", doc))
    assert named, f"atlascat.{package}'s docstring names none of its modules"
    for name in named:
        importlib.import_module(f"atlascat.{package}.{name}")


@pytest.fixture(scope="module")
def poly():
    from atlascat.irt import polytomous

    rng = np.random.default_rng(1)
    a = rng.lognormal(0.3, 0.3, 6)
    d = -np.sort(rng.normal(0, 1.2, (6, 3)), axis=1) * a[:, None]
    ratings = polytomous.sample("graded", np.column_stack([a, d]), rng.normal(size=200), rng)
    frame = pd.DataFrame(ratings + 1, columns=[f"p{j}" for j in range(6)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return at.calibrate(frame, "graded").bank


def test_polybank_index_of_and_subset_take_one_id_as_itembank_does(poly, bank):
    """PolyBank.index_of('zzz') raised a bare KeyError and subset('p1') split the id into its
    characters; ItemBank names the unknown id and takes one id."""
    from atlascat.errors import BankError

    assert poly.index_of("p2") == 2 and bank.index_of("q2") == 2
    assert poly.index_of(np.str_("p3")) == 3
    with pytest.raises(BankError, match="not in the bank.*'zzz'"):
        poly.index_of("zzz")
    assert list(poly.subset("p1").item_ids) == ["p1"]
    assert list(poly.subset(["p4", "p0"]).item_ids) == ["p4", "p0"]


@pytest.mark.parametrize("name", ["aic", "bic", "sabic", "hq"])
def test_information_criteria_say_their_formula_and_reference(name):
    from atlascat.irt.result import CalibrationResult

    doc = getattr(CalibrationResult, name).__doc__ or ""
    assert "-2 l" in doc and "19" in doc, f"CalibrationResult.{name} has no formula/reference"


@pytest.mark.parametrize("cls, names", [
    ("atlascat.irt.bank.ItemBank", ["log_probability", "test_information", "n_items"]),
    ("atlascat.irt.polybank.PolyBank", ["a", "index_of", "subset", "probability",
                                        "test_information", "n_items"])])
def test_bank_verbs_have_docstrings(cls, names):
    import importlib

    module, _, attr = cls.rpartition(".")
    klass = getattr(importlib.import_module(module), attr)
    assert [n for n in names if not (getattr(klass, n).__doc__ or "").strip()] == []


def test_seeds_work_wherever_an_rng_is_taken(frame, bank):
    """stratified_split, fit.partition_items / m2_partitioned, optimal_form,
    random_form_baseline, polytomous.sample and multidim.simulate_responses called
    ``rng.choice`` / ``.permutation`` / ``.random`` on what they were given: an int seed was an
    AttributeError. A seed now gives what the Generator of that seed gives."""
    from atlascat.design import optimal
    from atlascat.irt import fit, multidim, polytomous

    def same(fn):
        a, b = fn(7), fn(np.random.default_rng(7))
        if isinstance(a, tuple):
            return all(list(x.subject_ids) == list(y.subject_ids) for x, y in zip(a, b))
        return np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object))

    assert same(lambda r: at.stratified_split(frame, rng=r))
    assert same(lambda r: [list(p) for p in fit.partition_items(40, 10, rng=r)])
    assert same(lambda r: optimal.optimal_form(bank, 5, rng=r).item_ids)
    assert same(lambda r: optimal.random_form_baseline(bank, [0, 1, 2], rng=r)["random_median"])
    assert same(lambda r: polytomous.sample("graded", np.array([[1.0, 1.0, -1.0]]), np.zeros(9), r))
    mb = multidim.MultidimBank(["a", "b"], np.ones((2, 2)), np.zeros(2))
    assert same(lambda r: multidim.simulate_responses(mb, np.zeros((9, 2)), r))


@pytest.mark.parametrize("call", ["split", "partition", "optimal", "sample", "parallel"])
def test_a_bad_rng_is_a_config_error_naming_it(frame, bank, call):
    from atlascat.design import optimal
    from atlascat.errors import ConfigError
    from atlascat.irt import dimensionality, fit, polytomous

    fn = {"split": lambda: at.stratified_split(frame, rng="seven"),
          "partition": lambda: fit.partition_items(40, 10, rng="seven"),
          "optimal": lambda: optimal.optimal_form(bank, 5, rng="seven"),
          "sample": lambda: polytomous.sample("graded", np.array([[1.0, 0.0]]), [0.0], "seven"),
          "parallel": lambda: dimensionality.parallel_analysis(frame.to_numpy(), rng="seven")}
    with pytest.raises(ConfigError, match="^rng must be"):
        fn[call]()


def test_a_session_given_an_unknown_item_raises_a_value_error(bank):
    """record('nope', 1) raised LiveRunError, a RuntimeError: ``except ValueError`` around bad
    input missed it. It is now both (old handlers of LiveRunError still catch it)."""
    from atlascat.errors import LiveRunError, ResponseDataError

    session = at.CATSession(bank, at.CATConfig(min_items=1, max_items=5), rng=0)
    item = session.next_item()
    with pytest.raises(ValueError, match="'nope' is not in the bank"):
        session.record("nope", 1)
    with pytest.raises(LiveRunError):
        session.skip("nope")
    for missing in (None, pd.NA):
        with pytest.raises(ResponseDataError, match=r"use skip\(\)"):
            session.record(item, missing)
    session.record(item, True)
    assert session.n_items == 1


@pytest.fixture(scope="module")
def folder(frame, tmp_path_factory):
    from atlascat.bankdir import build_bank

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_bank(frame.iloc[:50], tmp_path_factory.mktemp("f") / "bank", folds=0,
                          budget=20)


@pytest.mark.parametrize("seed", ["x", -1, 1.5, True, np.random.default_rng(0)])
def test_replay_seeds_are_checked_by_name(frame, folder, seed):
    """replay_predictor(seed='x') raised int()'s ValueError and a Generator int()'s TypeError,
    neither naming seed."""
    from atlascat.bankdir import replay_adaptive, replay_predictor
    from atlascat.errors import ConfigError

    held = frame.iloc[50:]
    with pytest.raises(ConfigError, match="^seed must be a whole number"):
        replay_predictor(folder, held, budget=20, seed=seed)
    with pytest.raises(ConfigError, match="^seed must be a whole number"):
        replay_adaptive(folder, held, max_items=20, seed=seed)
    with pytest.raises(ConfigError, match="^seed must be a whole number"):
        at.BenchmarkPredictor(10).fit(folder.bank, frame.iloc[:50], rng=0).replay(held,
                                                                                   seed=seed)


def test_a_held_out_models_score_from_python(frame, folder):
    """The whole path without the CLI: a DataFrame in, each held-out model's predicted full
    score with its 95% interval out, indexed by the user's model names."""
    from atlascat.bankdir import replay_predictor

    held = frame.iloc[50:]
    out = replay_predictor(folder, held, budget=20, seed=0)
    assert list(out["subject_id"]) == list(held.index)
    assert (out["score_lo"] <= out["score"]).all() and (out["score"] <= out["score_hi"]).all()
    again = replay_predictor(folder, held, budget=20, seed=0)
    pd.testing.assert_frame_equal(out, again)     # the same seed, the same result


def test_link_predict_of_arrays_points_at_predict_many(folder):
    """link.predict(theta=array) failed in float() with NumPy's 'only 0-dimensional arrays'."""
    from atlascat.errors import ConfigError

    link = folder.link
    one = link.predict(theta=np.array([0.3]), se=0.2)        # one value in an array: fine
    assert one.score == link.predict(theta=0.3, se=0.2).score
    with pytest.raises(ConfigError, match="predict_many"):
        link.predict(theta=np.array([0.3, 0.5]), se=np.array([0.2, 0.2]))
    with pytest.raises(ConfigError, match="a number for theta"):
        link.predict(theta="high", se=0.2)


@pytest.mark.parametrize("seed", ["x", 0.5, np.random.default_rng(0)])
def test_build_bank_checks_its_seed_before_reading(frame, seed):
    from atlascat.bankdir import build_bank
    from atlascat.errors import ConfigError

    with pytest.raises(ConfigError, match="^seed must be a whole number"):
        build_bank(frame, seed=seed)


def test_help_of_calibrate_states_the_model_inputs_and_reference():
    doc = at.calibrate.__doc__
    for words in ("Bock and Aitkin, 1981", "DataFrame", "pd.NA", "Int64", '"graded"', "se=True"):
        assert words in doc, words


def test_subset_takes_one_id_and_names_positions_out_of_range(frame, bank):
    """bank.subset('q1') failed with "parameter 'a' has 1 values but there are 2 item ids" and
    ResponseMatrix.subset(items='q1') looked up 'q' and '1'; a position past the end was
    NumPy's IndexError."""
    from atlascat.errors import BankError, ResponseDataError

    rm = at.ResponseMatrix.from_frame(frame)
    assert list(bank.subset("q1").item_ids) == ["q1"]
    assert list(rm.subset(items="q1").item_ids) == ["q1"]
    assert list(rm.subset(subjects="org/model-3").subject_ids) == ["org/model-3"]
    assert list(bank.subset([0, -1]).item_ids) == ["q0", bank.item_ids[-1]]
    with pytest.raises(BankError, match=r"item positions must be in \[0, 40\)"):
        bank.subset(np.array([99]))
    with pytest.raises(ResponseDataError, match=r"item positions must be in \[0, 40\)"):
        rm.subset(items=[999])


def test_an_unknown_paper_benchmark_is_a_value_error():
    with pytest.raises(ValueError, match="unknown benchmark 'nope'"):
        at.catalogue.load_paper_bank("nope")


class _EasiestFirst:
    """Scores of one row: the shape mistake a user makes first."""

    def scores(self, theta, n_items, used, params):
        return -params.b


class _Never:
    reason, precision = "never", False

    def check(self, engine, rows):
        return np.zeros(len(rows), dtype=bool)


@pytest.mark.parametrize("batch_method", ["mepv", "preposterior"])
def test_a_custom_criterion_of_the_wrong_shape_is_named(bank, batch_method):
    """A criterion returning (J,) scores failed in np.copyto with 'could not broadcast where
    mask from shape (2,20) into shape (20,)'."""
    from atlascat.cat.config import Selection
    from atlascat.errors import ConfigError

    config = at.CATConfig(selection=Selection(criterion=_EasiestFirst(), randomesque=1),
                          min_items=1, max_items=5)
    with pytest.raises(ConfigError, match=r"_EasiestFirst\.scores returned shape \(40,\)"):
        at.simulate_cat(bank, config, thetas=[0.0, 1.0], rng=0, batch_size=2,
                        batch_method=batch_method)


def test_a_component_class_instead_of_an_object_is_named():
    """Selection(criterion=Cls) and stop_rules=(Cls,) failed at the first step with "scores()
    missing 1 required positional argument"."""
    from atlascat.cat.config import Selection, Stopping
    from atlascat.errors import ConfigError

    with pytest.raises(ConfigError, match=r"_EasiestFirst\(\) instead of _EasiestFirst"):
        Selection(criterion=_EasiestFirst)
    with pytest.raises(ConfigError, match=r"_Never\(\.\.\.\) instead of _Never"):
        Stopping(rules=(_Never,))
    Stopping(rules=(_Never(),))        # an object is fine


def test_an_ordinal_session_skips_a_nullable_tables_missing_rating(poly):
    """record(item, pd.NA), the missing cell of an Int64 table (docs/cat.md reads ratings
    with table.loc[...]), was refused while NaN and None skip the item."""
    s = at.OrdinalCATSession(poly, at.CATConfig(min_items=1, max_items=4), rng=1)
    first = s.next_item()
    s.record(first, pd.NA)
    assert s.n_items == 0 and first not in set(s.history()["item_id"])
    second = s.next_item()
    assert second != first
    s.record(second, pd.array([3], dtype="Int64")[0])     # a nullable integer: a rating
    assert s.n_items == 1


def test_replay_subject_takes_a_dataframe(tmp_path):
    """ReplaySubject(df, model) read the DataFrame as a file name ("response file '<the whole
    frame>' does not exist")."""
    from atlascat.live import ReplaySubject, evaluate, load_content_bank

    bank = load_content_bank("arc")
    rm = at.catalogue.load_responses("arc")
    frame = rm.subset(subjects=np.arange(3)).to_frame()
    model = frame.index[1]
    config = at.CATConfig(se_stop=0.4, max_items=40)
    runs = [evaluate(bank, ReplaySubject(m, model, bank=bank), store=tmp_path / f"{k}.sqlite",
                     config=config, seed=0) for k, m in enumerate((frame, rm))]
    assert runs[0].n_items == runs[1].n_items > 0
    assert runs[0].theta == pytest.approx(runs[1].theta)


@pytest.mark.parametrize("label", [np.nan, "", None])
def test_a_column_without_a_name_is_refused_at_the_boundary(frame, label):
    """A NaN column label went through the whole fit and failed building the bank with
    'item id is empty at row(s) [0]'."""
    from atlascat.errors import ResponseDataError

    unnamed = frame.iloc[:, :5].copy()
    unnamed.columns = [label] + list(unnamed.columns[1:])
    with pytest.raises(ResponseDataError, match=r"item id is missing at column\(s\) \[0\]"):
        at.calibrate(unnamed, "2pl")


def test_multidim_fit_keeps_a_dataframes_item_ids(frame):
    """MultidimIRT.fit(DataFrame) named the items item1, item2, ... instead of the columns."""
    from atlascat.irt.multidim import MultidimIRT

    model = MultidimIRT(n_dims=1, method="em").fit(frame.iloc[:, :6])
    assert list(model.bank_.item_ids) == list(frame.columns[:6])
    assert repr(MultidimIRT(n_dims=3)) == "MultidimIRT(n_dims=3)"


def test_arena_estimators_show_their_settings_and_name_bad_input():
    """BradleyTerry() showed <... object at 0x...>, fit(list) raised AttributeError 'columns',
    schedule(battles, 'x') a TypeError from '<='."""
    from atlascat.design.arena import schedule
    from atlascat.design.bradley_terry import BradleyTerry
    from atlascat.errors import ConfigError, ResponseDataError

    assert repr(BradleyTerry(ties="half")) == "BradleyTerry(ties='half')"
    battles = pd.DataFrame({"model_a": ["x", "y", "z"], "model_b": ["y", "z", "x"],
                            "winner": ["a", "a", "a"]})
    with pytest.raises(ResponseDataError, match="battles must be a pandas DataFrame"):
        BradleyTerry().fit(battles.to_numpy().tolist())
    with pytest.raises(ConfigError, match="n_pairs must be"):
        schedule(battles, "x", prior_games=1)


def test_multidim_cat_aligns_a_labelled_frame_by_item_id():
    """simulate_mcat read a DataFrame's columns in their order, not the bank's: the same
    answers with the columns shuffled gave other thetas. An int rng was an AttributeError."""
    from atlascat.cat.multidim import MultidimCATSession, simulate_mcat
    from atlascat.irt.multidim import MultidimBank, simulate_responses

    rng = np.random.default_rng(0)
    bank = MultidimBank([f"i{j}" for j in range(20)], np.abs(rng.normal(1, 0.3, (20, 2))),
                        rng.normal(size=20))
    frame = pd.DataFrame(simulate_responses(bank, rng.normal(size=(6, 2)), 0),
                         index=[f"m{i}" for i in range(6)], columns=bank.item_ids)
    ref = simulate_mcat(bank, responses=frame.to_numpy(), max_items=5)
    shuffled = simulate_mcat(bank, responses=frame[frame.columns[::-1]], max_items=5)
    np.testing.assert_allclose(shuffled.theta, ref.theta)
    a = simulate_mcat(bank, true_theta=np.zeros((3, 2)), max_items=5, rng=4)
    b = simulate_mcat(bank, true_theta=np.zeros((3, 2)), max_items=5, rng=np.random.default_rng(4))
    np.testing.assert_allclose(a.theta, b.theta)
    assert repr(MultidimCATSession(bank, max_items=5)).startswith("MultidimCATSession(n_items=0")


def test_multidim_scoring_aligns_a_labelled_frame_by_item_id(frame):
    """MultidimIRT.score / predict_proba read a frame's columns by position."""
    from atlascat.irt.multidim import MultidimIRT

    sub = frame.iloc[:, :6]
    model = MultidimIRT(n_dims=1, method="em").fit(sub)
    shuffled = sub[sub.columns[::-1]]
    np.testing.assert_allclose(model.score(shuffled)[0], model.score(sub.to_numpy())[0])
    np.testing.assert_allclose(model.predict_proba(shuffled),
                               model.predict_proba(sub.to_numpy()))
