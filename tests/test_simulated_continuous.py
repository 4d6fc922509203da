"""Simulated answers on a bank of continuous scores (a ``dispersion`` column: the extended
quasi-likelihood, :mod:`atlascat.irt.dispersion`): ``simulate:THETA`` and ``atlas simulate
--thetas`` draw scores with mean P_j(theta) and variance phi_j P Q
(:func:`~atlascat.irt.dispersion.draw_scores`). They used to draw 0/1 answers, whose terms the
bank divides by phi_j < 1: the estimates' spread was sqrt(1 / phi) times their SE (the 95%
interval held the truth about 55% of the time). On a graded bank ``simulate:THETA`` draws
ratings from the items' categories."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cat.answers import ModelAnswers, model_probability
from atlascat.cat.config import CATConfig
from atlascat.cat.simulate import simulate_cat
from atlascat.cli import main
from atlascat.irt.bank import ItemBank
from atlascat.irt.dispersion import draw_scores, without_dispersion
from atlascat.live.subjects import SimulatedScores, SubjectSpec, item_uniform

THETAS = (-1.0, 0.0, 0.5, 1.5)
PHI = 0.2


def continuous_bank(J=150, seed=0, phi=PHI):
    rng = np.random.default_rng(seed)
    return ItemBank([f"i{j}" for j in range(J)], rng.lognormal(0.0, 0.3, J),
                    rng.normal(0.0, 1.2, J),
                    metadata=pd.DataFrame({"dispersion": np.full(J, phi)}))


@pytest.mark.parametrize("p, phi", [(0.3, 0.2), (0.05, 0.1), (0.9, 0.5), (0.5, 0.05),
                                    (0.7, 0.9)])
def test_the_draw_has_mean_p_and_the_bank_variance(p, phi):
    u = np.random.default_rng(1).random(400_000)
    y = draw_scores(p, phi, u)
    assert y.min() >= 0.0 and y.max() <= 1.0
    var = phi * p * (1 - p)
    assert abs(y.mean() - p) < 4 * np.sqrt(var / u.size)
    assert abs(y.var() / var - 1) < 0.03
    assert np.all(np.diff(draw_scores(p, phi, np.sort(u[:1000]))) >= 0)   # inversion


def test_without_a_dispersion_the_draw_is_the_coin():
    u = np.random.default_rng(2).random(1000)
    p = np.linspace(0.01, 0.99, 1000)
    coin = (u < p).astype(float)
    np.testing.assert_array_equal(draw_scores(p, None, u), coin)
    np.testing.assert_array_equal(draw_scores(p, 1.0, u), coin)
    np.testing.assert_array_equal(draw_scores(np.r_[0.0, 1.0], 0.3, np.r_[0.5, 0.5]), [0, 1])


def test_model_answers_and_the_live_subject_draw_with_the_one_function():
    bank = continuous_bank(20)
    phi = bank.metadata["dispersion"].to_numpy()
    a, b, c, u = bank.params
    items = np.arange(20)
    thetas = np.full(20, 0.5)
    got = ModelAnswers(thetas, bank, np.random.default_rng(3).spawn(20)).answers(items, items)
    uni = np.array([g.random() for g in np.random.default_rng(3).spawn(20)])
    p = model_probability(0.5, a, b, c, u)
    np.testing.assert_array_equal(got, draw_scores(p, phi, uni))
    subject = SimulatedScores(bank, 0.5, seed=4)
    scores = [s for s, _ in subject.score_items(bank.item_ids)]
    want = draw_scores(p, phi, [item_uniform(4, i) for i in bank.item_ids])
    np.testing.assert_allclose(scores, want, rtol=1e-11)
    assert 0 < np.mean((np.array(scores) > 0) & (np.array(scores) < 1))   # not 0/1


def test_model_answers_have_the_bank_moments_per_item():
    bank = continuous_bank(12)
    n = 6000
    src = ModelAnswers(np.full(n, 0.5), bank, np.random.default_rng(5).spawn(n))
    y = np.stack([src.answers(np.arange(n), np.full(n, j)) for j in range(12)], axis=1)
    p = bank.probability(0.5).reshape(-1)
    np.testing.assert_allclose(y.mean(0), p, atol=4 * np.sqrt(PHI * 0.25 / n))
    np.testing.assert_allclose(y.var(0) / (PHI * p * (1 - p)), 1.0, atol=0.1)


def recovery(result, theta):
    """(mean estimate, coverage of the 95% interval, spread of the estimates / mean SE)."""
    est, se = result["theta"].to_numpy(), result["se"].to_numpy()
    return est.mean(), np.mean(np.abs(est - theta) <= 1.96 * se), est.std() / se.mean()


@pytest.mark.parametrize("theta", THETAS)
def test_the_live_subject_is_recovered_with_the_right_interval(theta):
    """The adaptive test on the bank, answered by ``simulate:THETA:SEED`` for 160 seeds: the
    mean estimate is the truth and the 95% interval covers it about 95% of the time (0/1
    answers: coverage 0.55-0.64, spread 2.2 x the SE)."""
    bank = continuous_bank()
    n = 160
    subjects = [SimulatedScores(bank, theta, seed=s) for s in range(n)]

    def answer(sids, iids):
        return [subjects[int(s)].score_items([i])[0][0] for s, i in zip(sids, iids)]

    got = simulate_cat(bank, CATConfig(), answer_fn=answer,
                       subject_ids=[str(s) for s in range(n)], rng=1).persons
    mean, coverage, spread = recovery(got, theta)
    assert abs(mean - theta) < 0.06
    assert 0.88 <= coverage <= 0.99
    assert 0.8 < spread < 1.25


@pytest.mark.parametrize("theta", THETAS)
def test_simulate_thetas_is_recovered_under_the_bank_dispersion(theta):
    """``atlas simulate --thetas`` (``simulate_cat(thetas=)``) on the bank: right mean and
    coverage, and the SE is the quasi-likelihood's, not the 0/1 answers' (which it used to
    score, dropping the column)."""
    bank = continuous_bank()
    got = simulate_cat(bank, CATConfig(), thetas=np.full(160, theta), rng=2).persons
    mean, coverage, spread = recovery(got, theta)
    assert abs(mean - theta) < 0.06
    assert 0.88 <= coverage <= 0.99 and 0.8 < spread < 1.25
    coins = simulate_cat(without_dispersion(bank), CATConfig(), thetas=np.full(40, theta),
                         rng=2).persons
    assert got["se"].mean() < 0.7 * coins["se"].mean()


def test_evaluate_and_simulate_on_a_bank_file_with_dispersions(tmp_path, capsys):
    path = continuous_bank(60).write(tmp_path / "bank.csv")
    assert main(["evaluate", "--bank", str(path), "--subject", "simulate:0.5", "-q",
                 "-o", str(tmp_path / "runs")]) == 0
    row = json.loads((tmp_path / "runs" / "results.json").read_text())[0]
    scores = np.array(row["scores"], float)
    assert np.mean((scores > 0) & (scores < 1)) > 0.9          # continuous scores, not 0/1
    pd.DataFrame({"subject_id": [f"s{i}" for i in range(30)],
                  "theta": np.repeat([-1.0, 1.0], 15)}).to_csv(tmp_path / "t.csv", index=False)
    assert main(["simulate", "--bank", str(path), "--thetas", str(tmp_path / "t.csv"),
                 "-o", str(tmp_path / "sim"), "-q"]) == 0
    persons = pd.read_csv(tmp_path / "sim" / "person_scores.csv")
    low, high = persons["theta"].iloc[:15].mean(), persons["theta"].iloc[15:].mean()
    assert low < -0.7 and high > 0.7
    asked = pd.read_csv(tmp_path / "sim" / "selected_items.csv")["score"].to_numpy()
    assert np.mean((asked > 0) & (asked < 1)) > 0.9             # drawn scores, not 0/1


@pytest.fixture(scope="module")
def metric_folder(tmp_path_factory):
    """A bank folder built with --score-range 0 100 from a BLEU-like matrix."""
    root = tmp_path_factory.mktemp("metric")
    rng = np.random.default_rng(8)
    theta, b = rng.normal(size=60), np.linspace(-2, 2, 50)
    p = 1 / (1 + np.exp(-(theta[:, None] - b)))
    y = np.round(100 * rng.beta(p * 4, (1 - p) * 4), 1)
    pd.DataFrame(y, index=pd.Index([f"m{i}" for i in range(60)], name="model"),
                 columns=[f"q{j}" for j in range(50)]).to_csv(root / "bleu.csv")
    assert main(["build-bank", str(root / "bleu.csv"), "-o", str(root / "bank"),
                 "--score-range", "0", "100", "-q"]) == 0
    return root


def test_on_a_score_range_folder_replies_are_on_the_metric_scale(metric_folder):
    from atlascat.catalogue import BankRef
    from atlascat.live.asking import item_score

    ref = BankRef.from_option(str(metric_folder / "bank"))
    subject = SubjectSpec.parse("simulate:0.5").build(ref.load(), score_range=(0.0, 100.0))
    ids = list(ref.load().item_ids[:20])
    got = subject.score_items(ids)
    shown = [json.loads(line)["score"] for _, line in got]
    assert [100 * s for s, _ in got] == pytest.approx(shown)
    assert set(shown) <= {0.0, 100.0} and len(set(shown)) == 2   # a folder's CAT: 0/1 draws
    assert [item_score(line, subject) for _, line in got] == [s for s, _ in got]
    again = SubjectSpec.rebuild(subject.describe(), ref.load())   # what --resume rebuilds
    assert again.cache_key == subject.cache_key and again.score_range == [0.0, 100.0]


def test_graded_bank_ratings_follow_the_category_probabilities(tmp_path):
    from atlascat.irt.polybank import PolyBank

    rng = np.random.default_rng(11)
    a, d = rng.uniform(0.8, 2.0, 6), np.sort(rng.normal(0, 1.2, (6, 3)), axis=1)[:, ::-1]
    bank = PolyBank([f"q{j}" for j in range(6)], np.column_stack([a, d]), "graded",
                    [np.arange(1.0, 5.0)] * 6)
    n = 3000
    ratings = np.array([[r for r, _ in SubjectSpec.parse(f"simulate:0.5:{s}").build(bank)
                         .score_items(bank.item_ids)] for s in range(n)])
    p = bank.probability(0.5)[:, 0, :]
    freq = np.stack([(ratings == lv).mean(0) for lv in range(1, 5)], axis=1)
    np.testing.assert_allclose(freq, p, atol=4 * np.sqrt(0.25 / n))
    path = bank.write(tmp_path / "graded.csv")
    assert main(["evaluate", "--bank", str(path), "--subject", "simulate:0.5", "-q",
                 "-o", str(tmp_path / "runs")]) == 0
    row = json.loads((tmp_path / "runs" / "results.json").read_text())[0]
    assert row["status"] == "done" and row["n_items"] > 0


def test_a_stored_reply_without_an_item_id_stops_in_one_line():
    """A resumed run whose stored reply is not ``{"item_id", "score"}`` is named, not a
    KeyError, for the continuous and the ordinal scripted subjects alike."""
    from atlascat.errors import LiveRunError
    from atlascat.live.subjects.scripted import stored_item_id

    bank = continuous_bank(5)
    assert stored_item_id(json.dumps({"item_id": "i3", "score": 0.4})) == "i3"
    subject = SimulatedScores(bank, 0.5, seed=1)
    assert subject.score_of(json.dumps({"item_id": bank.item_ids[2]})) == \
        subject.score(bank.item_ids[2])
    for junk in ("not json", json.dumps({"score": 1}), json.dumps([1, 2])):
        with pytest.raises(LiveRunError, match="holds no item_id"):
            subject.score_of(junk)
