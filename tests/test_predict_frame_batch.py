"""predict_frame computes every examinee at once (link/batch.py): the same numbers (to 1e-12)
and the same flags and warning lines as ScoreLink.predict called row by row, the path it
replaced (kept here as the reference)."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from atlascat.cat.config import CATConfig
from atlascat.cat.simulate import simulate_cat
from atlascat.catalogue import load_bundled_bank, load_score_link
from atlascat.errors import BankError, ConfigError
from atlascat.scorelink import ScoreLink, predict_frame
from atlascat.scorelink.batch import answer_table, predict_batch
from atlascat.scorelink.frames import COLUMNS

NUMBERS = COLUMNS[:4]


def per_row(link, persons, administered) -> pd.DataFrame:
    """The replaced path: a mapping item_id -> score per examinee (the frame's rows in order),
    then ScoreLink.predict of every row."""
    answers = {sid: dict(zip(g["item_id"].astype(str), g["score"]))
               for sid, g in administered.groupby("subject_id", sort=False)}
    reasons = (persons["stop_reason"] if "stop_reason" in persons.columns
               else pd.Series([None] * len(persons)))
    rows = []
    for sid, th, se, why in zip(persons["subject_id"], persons["theta"], persons["se"], reasons):
        if not (np.isfinite(th) and np.isfinite(se)):
            rows.append((np.nan, np.nan, np.nan, np.nan, "", ""))
            continue
        with warnings.catch_warnings():    # an item the link lacks: ignored by both paths
            warnings.filterwarnings("ignore", message=".* score link does not have")
            p = link.predict(th, se, responses=answers.get(sid),
                             stop_reason=why if isinstance(why, str) else None)
        rows.append((p.score, p.lo, p.hi, p.percentile, p.flag, p.warning))
    return pd.DataFrame(rows, columns=COLUMNS)


def assert_same(link, persons, administered):
    want = per_row(link, persons, administered)
    got = predict_frame(link, persons, administered)
    assert list(got.columns) == COLUMNS and len(got) == len(want)
    a, b = want[NUMBERS].to_numpy(float), got[NUMBERS].to_numpy(float)
    assert np.array_equal(np.isnan(a), np.isnan(b))
    assert np.nanmax(np.abs(a - b)) <= 1e-12
    assert got["score_flag"].tolist() == want["score_flag"].tolist()
    assert got["score_warning"].tolist() == want["score_warning"].tolist()
    return got


@pytest.fixture(scope="module")
def arc():
    return load_bundled_bank("arc"), load_score_link("arc")


@pytest.fixture(scope="module")
def simulated(arc):
    """400 examinees from theta -4 to 4 (answers drawn from the model, and reversed for the
    last 40: misfit) through the linked test with its floor / ceiling and precision stops."""
    bank, link = arc
    rng = np.random.default_rng(11)
    theta = np.linspace(-4.0, 4.0, 400)
    p = bank.probability(theta)
    y = (rng.random(p.shape) < p).astype(float)
    order = np.argsort(bank.b)
    y[-40:, order] = (rng.random((40, len(order))) < np.linspace(0.1, 0.9, len(order))).astype(
        float)                             # easy items wrong, hard ones right
    cfg = CATConfig(se_stop=0.2).replace(**link.stop_settings(0.02))
    res = simulate_cat(bank, cfg, responses=y, rng=np.random.default_rng(0))
    return res.persons.reset_index(drop=True), res.administered.reset_index(drop=True)


def test_a_simulation_is_predicted_as_row_by_row(arc, simulated):
    _, link = arc
    got = assert_same(link, *simulated)
    flags = set("+".join(got["score_flag"]).split("+"))
    # the cases the batch must get right are all there
    assert {"below_data", "above_data", "misfit", "chance", "ceiling", "score_precision"} <= flags


def test_edge_rows(arc, simulated):
    """Missing answers, items outside the bank, an item given twice, examinees without
    answers, non-finite theta / SE, all wrong (chance), no stop_reason."""
    _, link = arc
    persons, administered = (f.copy() for f in simulated)
    ids = persons["subject_id"].tolist()
    administered.loc[administered.index[::7], "score"] = np.nan          # missing answers
    administered.loc[administered.index[3::11], "item_id"] = "not-in-bank"
    first = administered[administered["subject_id"] == ids[5]].iloc[:3].copy()
    first["score"] = [1.0 - s for s in first["score"]]                  # given again: last wins
    nan_last = administered[administered["subject_id"] == ids[6]].iloc[:2].copy()
    nan_last["score"] = np.nan                                          # ... NaN last: left out
    wrong = administered[administered["subject_id"] == ids[7]].index
    administered.loc[wrong, "score"] = 0.0                              # all wrong: chance
    administered = pd.concat([administered, first, nan_last], ignore_index=True)
    administered = administered[administered["subject_id"] != ids[8]]   # no answers at all
    persons.loc[9, "theta"] = np.nan
    persons.loc[10, "se"] = np.inf
    persons.loc[11, "stop_reason"] = np.nan
    persons.loc[[0, 1, 200, 201], "stop_reason"] = "floor"    # chance in the interval or not
    persons.loc[[2, 202], "stop_reason"] = "min_information"
    extra = persons.iloc[[12]].assign(subject_id="never-seen")
    persons = pd.concat([persons, extra, persons.iloc[[5]]], ignore_index=True)  # + a duplicate
    got = assert_same(link, persons, administered)
    assert got.loc[9, "score_flag"] == "" and np.isnan(got.loc[9, "score"])
    assert "chance" in got.loc[7, "score_flag"]
    assert got.loc[0, "score_flag"].startswith("floor")
    assert "bottom of the link's data" in got.loc[200, "score_warning"]
    assert_same(link, persons.drop(columns="stop_reason"), administered)


def test_ties_with_the_leaderboard_quantiles(arc, simulated):
    _, link = arc
    persons, administered = simulated
    scores = predict_frame(link, persons, administered)["score"].to_numpy()
    tied = ScoreLink.from_dict(link.to_dict())
    tied.quantiles = np.sort(np.r_[link.quantiles, np.repeat(scores[[50, 200, 201]], 3)])
    assert_same(tied, persons, administered)


def test_a_link_without_answers_or_corrections(arc, simulated):
    _, link = arc
    d = link.to_dict()
    d.pop("corrections")
    assert_same(ScoreLink.from_dict(d), *simulated)
    d.pop("item_ids"), d.pop("item_params")
    assert_same(ScoreLink.from_dict(d), *simulated)


def test_answer_table_keeps_first_place_and_last_score(arc):
    _, link = arc
    i = link.item_ids
    frame = pd.DataFrame({"subject_id": ["b", "a", "b", "b", "b", "a"],
                          "item_id": [i[3], i[1], "zz", i[0], i[3], i[2]],
                          "score": [1.0, 0.0, 1.0, 1.0, 0.0, np.nan]})
    t = answer_table(link, ["a", "b", "c"], frame)
    assert t.count.tolist() == [1, 2, 0]
    assert t.cols[1, :2].tolist() == [3, 0] and t.ys[1, :2].tolist() == [0.0, 1.0]
    assert t.cols[0, 0] == 1 and (t.cols[2] == -1).all()


def test_bad_input(arc):
    _, link = arc
    with pytest.raises(ConfigError, match="SE >= 0"):
        predict_batch(link, [0.0, 0.1], [0.2, -0.1])
    d = link.to_dict()
    d["quantiles"] = None
    with pytest.raises(BankError, match="leaderboard distribution"):
        predict_batch(ScoreLink.from_dict(d), [0.0], [0.2])


def test_chance_test_is_the_binomial_tail(arc):
    """chance_not_excluded reads the tail through betainc (no scipy.stats import): the same
    decisions as binom.sf, fractional numbers right included."""
    from scipy.stats import binom

    from atlascat.scorelink.honesty import chance_not_excluded
    from atlascat.scorelink.settings import ANSWER_CHANCE, CHANCE_ALPHA

    _, link = arc
    n, k = np.meshgrid(np.arange(0, 301), np.arange(0, 301) / 2.0)
    keep = k <= n
    n, k = n[keep], k[keep]
    want = (n > 0) & (binom.sf(k - 1, n, ANSWER_CHANCE["arc"]) >= CHANCE_ALPHA)
    assert np.array_equal(chance_not_excluded(link, n, k), want) and want.any() and not want.all()
