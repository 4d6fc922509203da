"""A walk of the Python API for a user's own benchmark whose metric is not a percent: a judge's
1-10 rating (simulated from the graded model) and a continuous LongBench task.

1. ``BenchmarkPredictor`` fitted from Python knows the metric's scale (``score_range``, what
   ``atlas build-bank --score-range`` keeps in the manifest): a session's prediction prints a
   1-10 rating, not a percent, and ``replay``'s columns are on the scale, as the folder's
   ``replay_predictor`` (``atlas simulate``'s ``person_scores.csv``) gives them for the same data.
2. ``aipw_accuracy`` and the predictor's ridge share one ridge + leave-one-out core.
3. The Python blocks of docs/your_benchmark.md run on such matrices.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _ratings(n_models=60, n_items=80, levels=10, seed=0) -> pd.DataFrame:
    """Ratings 1..levels drawn from a graded response model (the library's sampler)."""
    from atlascat.irt import polytomous

    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.2, 0.3, n_items)
    d = -np.sort(rng.normal(0, 1.5, (n_items, levels - 1)), axis=1) * a[:, None]
    r = polytomous.sample("graded", np.column_stack([a, d]), rng.normal(size=n_models), rng) + 1
    return pd.DataFrame(r.astype(float), index=[f"judge-{i:02d}" for i in range(n_models)],
                        columns=[f"prompt-{j}" for j in range(n_items)]).rename_axis("model")


@pytest.fixture(scope="module")
def rated():
    """(ratings 1-10, a predictor fitted on the first 40 models' ratings mapped to 0-1 and
    told the scale)."""
    from atlascat.irt.calibrate import Calibrator
    from atlascat.predict import BenchmarkPredictor
    from atlascat.responses import ResponseMatrix

    df = _ratings()
    source = ResponseMatrix((df.iloc[:40] - 1) / 9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bank = Calibrator().fit(source).bank_
    return df, BenchmarkPredictor(30, score_range=(1, 10)).fit(bank, source, rng=0)


def test_a_predictor_fitted_from_python_prints_a_rating_on_its_scale(rated):
    """`print(session.prediction())` of a predictor fitted on 1-10 ratings printed percent
    ("61.9 (95% 55.2-68.9, ...)" for a model whose mean rating is 7.2): with ``score_range``
    it prints the rating to two decimals (the one digits rule), as a --score-range folder's;
    the fields stay 0-1. The setting is in the repr, get_params and predictor.json."""
    from atlascat.predict import BenchmarkPredictor

    df, p = rated
    assert "score_range=(1, 10)" in repr(p)
    assert p.get_params()["score_range"] == (1, 10) and p.metric_range_ == (1.0, 10.0)
    session = p.session(rng=1)
    answers = df.iloc[45]
    while not session.done:
        for item in session.next_items(10):
            session.record(item, (answers[item] - 1) / 9)
    pred = session.prediction()
    assert 0 <= pred.score <= 1
    lo, hi = (f"{1 + 9 * v:.2f}" for v in (pred.lower, pred.upper))
    assert str(pred).startswith(f"{1 + 9 * pred.score:.2f} (95% {lo}-{hi}, 30 items"), pred
    assert 1 <= float(str(pred).split()[0]) <= 10
    back = BenchmarkPredictor.from_dict(json.loads(json.dumps(p.to_dict())))
    assert back.score_range == (1.0, 10.0) and back.metric_range_ == (1.0, 10.0)
    plain = BenchmarkPredictor(30)
    assert plain.metric_range_ is None and "score_range" not in repr(plain)


def test_replay_columns_are_on_the_metric_scale(rated):
    """``replay`` on a scaled predictor: the score, its interval, the parts and full_score on
    1-10, the SE times the width; ``on_scale=False`` the 0-1 values the predictor models."""
    from atlascat.responses import ResponseMatrix

    df, p = rated
    targets = ResponseMatrix((df.iloc[40:] - 1) / 9)
    on = p.replay(targets, seed=0)
    raw = p.replay(targets, seed=0, on_scale=False)
    for c in ("score", "score_lo", "score_hi", "model_score", "model_part", "design_score",
              "full_score"):
        np.testing.assert_allclose(on[c], 1 + 9 * raw[c], rtol=0, atol=1e-12)
    np.testing.assert_allclose(on["se"], 9 * raw["se"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(on["full_score"], df.iloc[40:].mean(axis=1), atol=1e-12)
    assert raw["score"].between(0, 1).all() and on["score"].between(1, 10).all()


def test_bad_score_range_is_one_line():
    from atlascat.errors import ConfigError
    from atlascat.predict import BenchmarkPredictor

    for bad in ((10, 1), (1,), "1-10", (0, float("nan"))):
        with pytest.raises(ConfigError, match="score_range"):
            BenchmarkPredictor(30, score_range=bad)._check()


def test_python_predictor_agrees_with_the_folder_on_the_same_data(tmp_path):
    """The same 1-10 ratings through build_bank(score_range=(1, 10)) and replay_predictor (what
    `atlas simulate` writes) and through the folder's predictor replayed from Python: the same
    numbers on the same scale; the folder's predictor carries the scale as its setting."""
    from atlascat.bankdir import build_bank, replay_predictor
    from atlascat.bankdir.predict import load_predictor
    from atlascat.responses import ResponseMatrix

    df = _ratings(n_models=36, n_items=60, seed=3)
    df.iloc[:28].to_csv(tmp_path / "source.csv")
    df.iloc[28:].to_csv(tmp_path / "targets.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_bank(tmp_path / "source.csv", tmp_path / "bank", folds=0, budget=20,
                   score_range=(1, 10))
    cli = replay_predictor(tmp_path / "bank", tmp_path / "targets.csv", budget=20, seed=0)
    p = load_predictor(tmp_path / "bank")
    assert p.score_range == (1.0, 10.0)
    py = p.replay(ResponseMatrix((df.iloc[28:] - 1) / 9), budget=20, seed=0)
    for c in ("score", "score_lo", "score_hi", "se", "model_score", "model_part",
              "design_score"):
        np.testing.assert_allclose(py[c].to_numpy(float), cli[c].to_numpy(float), atol=1e-9)
    assert cli["score"].between(1, 10).all()


def test_a_rating_recorded_on_its_own_scale_says_how_to_map_it(rated):
    """record(item, 7) on a 1-10 predictor: one line saying the session takes 0-1 and how to
    map a 7 to it."""
    from atlascat.errors import ConfigError

    _, p = rated
    session = p.session(rng=0)
    item = session.next_items(1)[0]
    with pytest.raises(ConfigError, match=r"must be in \[0, 1\], got 7; on the metric's scale "
                                          r"1-10, record \(score - 1\) / 9"):
        session.record(item, 7)


def test_a_scaled_prediction_repr_names_its_scale(rated):
    """repr(prediction) showed bare 0-1 floats for a 1-10 rating: it names the scale they are
    shares of; without a scale the repr is the dataclass's as before."""
    from atlascat.predict.session import BenchmarkPrediction

    _, p = rated
    session = p.session(rng=0)
    for item in session.next_items(3):
        session.record(item, 0.5)
    text = repr(session.prediction())
    assert text.startswith("BenchmarkPrediction(score=") and text.endswith(
        ", scale=(1.0, 10.0))"), text
    plain = BenchmarkPrediction(0.5, 0.4, 0.6, 0.05, 10, "combined")
    assert repr(plain) == ("BenchmarkPrediction(score=0.5, lower=0.4, upper=0.6, se=0.05, "
                           "n_items=10, method='combined', warning='', model_score=nan, "
                           "model_part=nan, design_score=nan, theta=nan)")


@pytest.mark.skipif(not (SHARED / "benchpred" / "v2_musr.csv.gz").exists(),
                    reason="needs ../shared/data/benchpred")
def test_aipw_and_the_predictor_share_one_ridge(monkeypatch):
    """aipw_accuracy kept its own SVD + PRESS ridge beside regression.ridge_scores: both now
    fit through regression.ridge_press, and on a real matrix AIPW's regression of the mean
    score on the form is the predictor's ridge prediction on the same items, to 1e-10."""
    from atlascat.predict import regression
    from atlascat.studies.baselines import aipw_accuracy

    calls = []
    real = regression.ridge_press

    def spy(*args, **kw):
        calls.append(real(*args, **kw))
        return calls[-1]

    monkeypatch.setattr(regression, "ridge_press", spy)
    y = pd.read_csv(SHARED / "benchpred" / "v2_musr.csv.gz", index_col=0).to_numpy(float)
    rng = np.random.default_rng(0)
    train, target = y[:300], y[300:340]
    form = rng.choice(y.shape[1], 40, replace=False)
    est = aipw_accuracy(train, form, target)
    assert len(calls) == 1 and calls[0].coef.shape == (1, 40, 41)
    mean_part = calls[0].predict(target[None, :, form])[0, :, 0]
    own = train.mean(1)
    ridge = regression.ridge_scores(train, own, np.tile(form, (len(target), 1)),
                                    np.ones((len(target), 40), bool),
                                    target_answers=target[:, form])
    assert len(calls) >= 2                     # ridge_scores fitted through it too
    np.testing.assert_allclose(mean_part, ridge, rtol=0, atol=1e-10)
    assert np.all(np.isfinite(est)) and np.abs(est - target.mean(1)).mean() < 0.1


def test_reprs_read_right_for_default_settings_and_a_scaled_folder(tmp_path):
    """repr of a fitted predictor with every setting at its default read
    "BenchmarkPredictor(, fitted on 24 source models, ...)"; a --score-range folder's repr did
    not say its scores are on 1-10."""
    from atlascat.bankdir import build_bank
    from atlascat.irt.calibrate import Calibrator
    from atlascat.predict import BenchmarkPredictor
    from atlascat.responses import ResponseMatrix

    df = _ratings(n_models=30, n_items=60, seed=4)
    source = ResponseMatrix((df - 1) / 9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bank = Calibrator().fit(source).bank_
        folder = build_bank(df, tmp_path / "bank", folds=0, budget=20, score_range=(1, 10))
    p = BenchmarkPredictor(50).fit(bank, source, rng=0)
    assert repr(p) == "BenchmarkPredictor(fitted on 30 source models, 60 items)"
    assert repr(BenchmarkPredictor()) == "BenchmarkPredictor()"
    text = repr(folder)
    assert "built from 30 models (matrix), scores on 1-10" in text and "\n" not in text, text


def test_ratings_given_on_their_scale_say_how_to_map_them(rated):
    """fit / replay given the 1-10 ratings themselves: the matrix's error told a Python user of
    a score_range predictor to pass --score-range to a bank folder; it says the predictor takes
    0-1 and how to map them."""
    from atlascat.errors import ResponseDataError
    from atlascat.responses import ResponseMatrix

    df, p = rated
    msg = (r"the predictor takes answers on 0-1 .* score_range 1-10: give them mapped, "
           r"\(score - 1\) / 9")
    with pytest.raises(ResponseDataError, match=msg):
        p.replay(df.iloc[40:], seed=0)
    bank = p.item_bank()
    with pytest.raises(ResponseDataError, match=msg):
        type(p)(30, score_range=(1, 10)).fit(bank, df.iloc[:40])
    with pytest.raises(ResponseDataError, match=r"outside \[0, 1\]") as exc:   # no scale
        type(p)(30).fit(bank, df.iloc[:40])
    assert "score_range" not in str(exc.value)
    assert len(p.replay(ResponseMatrix((df.iloc[40:] - 1) / 9), seed=0)) == 20


def _predictor_block() -> str:
    """docs/your_benchmark.md's Python block of "How the benchmark predictor works"."""
    from docs_blocks import doc_blocks

    blocks = [b for b in doc_blocks("your_benchmark.md") if b.lang == "python"
              and "BenchmarkPredictor(50).fit" in b.text]
    assert len(blocks) == 1
    return blocks[0].text


@pytest.mark.skipif(not (SHARED / "longbench" / "longbench_qasper.csv.gz").exists(),
                    reason="needs ../shared/data/longbench")
@pytest.mark.parametrize("kind", ["continuous", "ordinal"])
def test_the_docs_predictor_block_runs_on_a_continuous_and_a_rating_matrix(kind, tmp_path,
                                                                           capsys):
    """The page's predictor block, as written with its matrix swapped: LongBench's qasper (F1,
    40 models) and 1-10 ratings mapped to 0-1 (60 models): it runs, and its printed predictor
    reads as a repr should (it printed "BenchmarkPredictor(, fitted on ...)")."""
    if kind == "continuous":
        path = SHARED / "longbench" / "longbench_qasper.csv.gz"
    else:
        path = tmp_path / "ratings.csv"
        ((_ratings() - 1) / 9).to_csv(path)
    code = _predictor_block().replace("../shared/data/benchpred/helm_mmlu.csv.gz", str(path))
    code += "\nprint(repr(predictor))\n"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, "your_benchmark.md", "exec"), {})
    out = capsys.readouterr().out
    assert "BenchmarkPredictor(fitted on " in out and "(, " not in out, out
