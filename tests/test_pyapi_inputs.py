"""The Python API on inputs a data scientist passes by hand: labelled frames are aligned by id
(never by position), one subject's answers may be a dict or a Series, and a string or a
mismatched id set where numbers or ids are due is a one-line AtlasError naming the argument."""
import warnings

import numpy as np
import pandas as pd
import pytest

import atlascat as at
from atlascat.errors import AtlasError, BankError, ConfigError, ResponseDataError


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    theta = rng.normal(size=300)
    a, b = rng.lognormal(0, 0.3, 12), rng.normal(size=12)
    x = (rng.random((300, 12)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    df = pd.DataFrame(x, index=[f"m{i}" for i in range(300)], columns=[f"i{j}" for j in range(12)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bank = at.calibrate(df, "2pl").bank
    return df, bank


def test_simulate_cat_aligns_a_labelled_frame_by_item_id(data):
    df, bank = data
    config = at.CATConfig(se_stop=None, min_items=12, max_items=12)
    ref = at.simulate_cat(bank, config, responses=at.ResponseMatrix.from_frame(df.iloc[:4]))
    shuffled = df.iloc[:4, ::-1]   # the same answers, columns in another order
    res = at.simulate_cat(bank, config, responses=shuffled)
    assert list(res.persons["subject_id"]) == ["m0", "m1", "m2", "m3"]
    np.testing.assert_allclose(res.persons["theta"], ref.persons["theta"], rtol=0, atol=1e-12)
    with pytest.raises(ResponseDataError, match="none of the 12 response items is in the bank"):
        at.simulate_cat(bank, config, responses=df.iloc[:4].rename(columns=lambda c: "x" + c))


def test_simulate_cat_refuses_bad_replayed_scores_and_text_thetas(data):
    df, bank = data
    with pytest.raises(ResponseDataError, match="outside"):
        at.simulate_cat(bank, at.CATConfig(), responses=df.to_numpy()[:3] * 2)
    with pytest.raises(ResponseDataError, match="true thetas must be numbers"):
        at.simulate_cat(bank, at.CATConfig(), thetas=["high"])


def test_estimate_ability_takes_one_subject_as_a_dict_or_series(data):
    df, bank = data
    answers = {"i3": 1, "i0": 0, "i7": 1}
    ref = at.estimate_ability(df[["i3", "i0", "i7"]].iloc[[0]].assign(i3=1.0, i0=0.0, i7=1.0),
                              bank)
    for given in (answers, pd.Series(answers)):
        got = at.estimate_ability(given, bank)
        assert (len(got), int(got["n_items"][0]), got["subject_id"][0]) == (1, 3, "0")
        assert got["theta"][0] == pytest.approx(ref["theta"][0], abs=1e-12)
    with pytest.raises(ResponseDataError, match="the one value given"):
        at.estimate_ability({"i0", "i1"}, bank)   # a set: neither answers nor a table


def test_predictor_replay_refuses_targets_without_a_predictor_item(data):
    from atlascat.predict.predictor import BenchmarkPredictor

    df, bank = data
    pred = BenchmarkPredictor(budget=6).fit(bank, at.ResponseMatrix.from_frame(df.iloc[:250]),
                                            rng=np.random.default_rng(0))
    out = pred.replay(df.iloc[250:], rng=np.random.default_rng(1))   # a DataFrame is fine
    assert len(out) == 50 and (out["n_items"] == 6).all()
    with pytest.raises(ResponseDataError, match="none of the targets' 12 items"):
        pred.replay(df.iloc[250:].rename(columns=lambda c: "x" + c))
    with pytest.raises(ConfigError, match="budget must be a number"):
        BenchmarkPredictor(budget="ten").fit(bank, at.ResponseMatrix.from_frame(df))


@pytest.mark.parametrize("setting", [{"tol": "small"}, {"quadpts": "many"},
                                     {"max_iter": "lots"}])
def test_calibrate_names_a_text_setting(data, setting):
    name = next(iter(setting))
    with pytest.raises(ConfigError, match=f"^{name} must be a number"):
        at.calibrate(data[0], "2pl", **setting)


def test_text_parameters_ranges_and_results_are_named(data):
    from atlascat.irt.compare import anova
    from atlascat.irt.polybank import PolyBank

    with pytest.raises(BankError, match="parameter 'a' holds 'q'"):
        at.ItemBank(["x", "y"], a=[1, "q"], b=[0, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = at.calibrate(data[0], "2pl")
    with pytest.raises(ConfigError, match="anova's argument 2 is a str"):
        anova(fit, "rasch")
    ratings = pd.DataFrame(np.tile([[1, 2, 3], [3, 2, 1], [2, 2, 2], [1, 3, 2]], (20, 1)),
                           index=[f"m{i}" for i in range(80)], columns=["p0", "p1", "p2"])
    with pytest.raises(ConfigError, match="value_range must be two numbers"):
        at.calibrate(ratings, model="graded", value_range="1-3")
    bank = PolyBank.from_item_bank(data[1])
    with pytest.raises(ConfigError, match="theta must be numbers"):
        bank.mean_rating_interval("high", 0.3)
    with pytest.raises(AtlasError):
        bank.mean_rating_interval(0.0, float("nan"))


def test_unfitted_estimators_say_so_and_reprs_show_the_settings(data):
    import pickle

    from atlascat.errors import NotFittedError
    from atlascat.predict.predictor import BenchmarkPredictor

    df, bank = data
    cal = at.Calibrator("2pl", tol=1e-5)
    assert repr(cal) == "Calibrator(model='2pl', tol=1e-05)"
    assert repr(at.Calibrator()) == "Calibrator()"
    assert not hasattr(cal, "bank_")
    with pytest.raises(NotFittedError, match="not fitted, so it has no 'theta_'"):
        cal.theta_
    with pytest.raises(AttributeError) as info:
        cal.no_such_setting
    assert not isinstance(info.value, AtlasError)
    cal.fit(df)
    assert len(pickle.loads(pickle.dumps(cal)).bank_) == len(cal.bank_)
    pred = BenchmarkPredictor(budget=6)
    assert repr(pred) == "BenchmarkPredictor(budget=6)"
    with pytest.raises(NotFittedError):
        pred.to_dict()
    pred.fit(bank, at.ResponseMatrix.from_frame(df), rng=np.random.default_rng(0))
    assert repr(pred) == "BenchmarkPredictor(budget=6, fitted on 300 source models, 12 items)"


def _graded(*, seed, items, thresholds, models):
    """(ratings 1..thresholds+1 of ``models`` simulated models on ``items`` prompts, the graded
    bank calibrated on them)."""
    from atlascat.irt import polytomous

    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.3, 0.3, items)
    d = -np.sort(rng.normal(0, 1.2, (items, thresholds)), axis=1) * a[:, None]
    ratings = pd.DataFrame(polytomous.sample("graded", np.column_stack([a, d]),
                                             rng.normal(size=models), rng) + 1,
                           index=[f"m{i}" for i in range(models)],
                           columns=[f"p{j}" for j in range(items)])
    return ratings, at.calibrate(ratings, model="graded").bank


def test_ordinal_session_repr_and_posterior_se_match_eap():
    from atlascat.cat.ordinal import OrdinalCATSession

    ratings, bank = _graded(seed=0, items=8, thresholds=3, models=300)
    session = OrdinalCATSession(bank, at.CATConfig(se_method="posterior", se_stop=None,
                                                   min_items=8, max_items=8))
    assert repr(session) == "OrdinalCATSession(n_items=0, theta=0.0000, se=1.0000, running)"
    while not session.done:
        item = session.next_item()
        session.record(item, ratings.loc["m0", item])
    eap = at.estimate_ability(ratings.loc[["m0"]], bank)
    assert session.theta == pytest.approx(eap["theta"][0], abs=1e-10)
    assert session.se == pytest.approx(eap["se"][0], abs=1e-10)
    assert repr(session).startswith("OrdinalCATSession(n_items=8, ") and "done (" in repr(session)
    info = OrdinalCATSession(bank, at.CATConfig(se_stop=None, min_items=8, max_items=8))
    while not info.done:   # the default se_method: information; posterior_sd is still EAP's
        item = info.next_item()
        info.record(item, ratings.loc["m0", item])
    assert info.posterior_sd == pytest.approx(eap["se"][0], abs=1e-10)
    assert abs(info.se - info.posterior_sd) > 1e-4


def test_live_run_from_python(tmp_path):
    from atlascat.bankdir.samplelogs import read_sample_logs
    from atlascat.catalogue import BankRef
    from atlascat.live.runner import RunResult
    from atlascat.live.service import LiveRun
    from atlascat.live.subjects import SimulatedSubject

    bank = BankRef.from_option("arc").load()   # the shipped bank, with its items' content
    store = tmp_path / "runs.sqlite"
    subject = SimulatedSubject(bank, 0.5)
    for bad, match in (({"bank": bank, "subjects": []}, "no subjects"),
                       ({"bank": bank, "subjects": [subject], "seed": "x"}, "seed must be"),
                       ({"bank": 3.5, "subjects": [subject]}, "bank must be a BankRef")):
        with pytest.raises(ConfigError, match=match):
            LiveRun.start(store, bad.pop("bank"), bad.pop("subjects"), **bad)
    live = LiveRun.start(store, "arc", [subject], config=at.CATConfig(se_stop=0.4), seed=0)
    run_id = live.jobs[0].run_id
    assert repr(live) == (f"LiveRun(store={str(store)!r}, runs=[{run_id} (adaptive)], "
                          "finished=0, errors=0)")
    with pytest.raises(ConfigError, match="call run"):
        live.results()
    live.run()
    row = live.results()[0]
    live.close()                                        # the store it opened from the path
    stored = RunResult.from_store(str(store), run_id)   # a path, as the docstring says
    assert (stored.theta, stored.n_items) == (row["theta"], row["n_items"])
    # the run's EAP is on the adaptive test's grid alone (CATConfig.quadpts, 61 nodes), not
    # estimate_ability's default (121 nodes, refined where they do not resolve the posterior)
    eap = at.estimate_ability(dict(zip(stored.items, stored.scores)), bank,
                              quadpts=at.CATConfig().estimation.quadpts, quadrature="fixed")
    assert eap["theta"][0] == pytest.approx(stored.theta, abs=1e-10)
    with pytest.raises(ConfigError, match="score_range must be two numbers"):
        read_sample_logs(tmp_path, score_range="0-100")


def test_wrong_kinds_of_bank_start_seed_and_sizes_are_named(data):
    df, bank = data
    with pytest.raises(ConfigError, match="'bank.csv' is a name or path, not an ItemBank"):
        at.estimate_ability(df, "bank.csv")
    with pytest.raises(ConfigError, match="got DataFrame"):
        at.estimate_ability(df, bank.to_frame())
    with pytest.raises(ConfigError, match="start must be an ItemBank"):
        at.calibrate(df, "2pl", start="bank.csv")   # was silently ignored
    with pytest.raises(ConfigError, match="random_state must be a seed"):
        at.calibrate(df, "2pl", random_state="x")
    with pytest.raises(ConfigError, match="test_size must be a number"):
        at.stratified_split(at.ResponseMatrix.from_frame(df), test_size="x")
    res = at.simulate_cat(bank, at.CATConfig(min_items=3, max_items=3),
                          thetas=pd.Series([0.0, 1.0], index=["alice", "bob"]), rng=0)
    assert list(res.persons["subject_id"]) == ["alice", "bob"]


def test_ordinal_one_subject_dict_thetas_and_dispersion_settings():
    ratings, bank = _graded(seed=1, items=6, thresholds=2, models=200)
    got = at.estimate_ability({"p4": 3, "p1": 1}, bank)
    ref = at.estimate_ability(pd.DataFrame({"p1": [1], "p4": [3]}, index=["x"]), bank)
    assert int(got["n_items"][0]) == 2 and got["theta"][0] == pytest.approx(ref["theta"][0])
    with pytest.raises(ConfigError, match="thetas must be numbers"):
        at.simulate_cat(bank, at.CATConfig(), thetas=["high"])
    scores = pd.DataFrame(np.random.default_rng(1).uniform(0.05, 0.95, (100, 12)),
                          columns=[f"c{j}" for j in range(12)])
    with pytest.raises(ConfigError, match="dispersion must be numbers"):
        at.calibrate(scores, "2pl", dispersion=["a"] * 12)
    with pytest.raises(ConfigError, match="dispersion needs a joint calibration"):
        at.calibrate(scores, "2pl", dispersion="auto", partition_size=4)   # was ignored


def test_predictor_session_and_scores_name_text(data):
    from atlascat.predict.predictor import BenchmarkPredictor

    df, bank = data
    source = at.ResponseMatrix.from_frame(df)
    pred = BenchmarkPredictor(budget=6).fit(bank, source, rng=np.random.default_rng(0))
    session = pred.session(rng=1)
    item = session.next_items(1)[0]
    with pytest.raises(ConfigError, match=f"score of item '{item}' must be a number, got 'yes'"):
        session.record(item, "yes")
    with pytest.raises(ConfigError, match="budget must be a number"):
        pred.session(budget="six")
    with pytest.raises(ConfigError, match="budget must be a number"):
        pred.replay(source, budget="six")
    with pytest.raises(ResponseDataError, match="scores must be numbers"):
        BenchmarkPredictor(budget=6).fit(bank, source, scores=["a"] * 300)


def test_polybank_read_of_a_binary_bank_says_which_reader(data, tmp_path):
    from atlascat.irt.polybank import PolyBank

    data[1].write(tmp_path / "bank.csv")
    with pytest.raises(BankError, match="binary items .*ItemBank.read"):
        PolyBank.read(tmp_path / "bank.csv")


def test_a_long_file_read_as_wide_points_to_format_long(tmp_path):
    long = pd.DataFrame({"subject_id": ["a", "b", "b"], "item_id": ["i1", "i1", "i2"],
                         "score": [1, 1, 0]})
    long.to_parquet(tmp_path / "long.parquet")   # detected as long by its column names
    assert at.ResponseMatrix.read(tmp_path / "long.parquet").n_items == 2
    long.index = pd.Index([5, 6, 7])               # a saved index: a leading column
    long.to_parquet(tmp_path / "indexed.parquet")
    with pytest.raises(ResponseDataError, match=r"\(subject 5\).*read it with format='long'"):
        at.ResponseMatrix.read(tmp_path / "indexed.parquet")


def test_simulate_cat_thetas_as_a_list_or_unlabelled_series(data):
    bank = data[1]
    config = at.CATConfig(min_items=3, max_items=3)
    for thetas in ([0.0, 1.0], pd.Series([0.0, 1.0]), np.array([0.0, 1.0])):
        res = at.simulate_cat(bank, config, thetas=thetas, rng=0)
        assert list(res.persons["subject_id"]) == ["0", "1"]
