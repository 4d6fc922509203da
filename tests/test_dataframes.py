"""Labelled pandas DataFrames keep their labels everywhere and are aligned to banks by id.

The index holds subject ids, the columns item ids; a frame whose columns come in another order
scores, fits and calibrates exactly as the ordered one.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import atlascat as at
from atlascat.errors import ResponseDataError
from atlascat.irt import fit as irt_fit
from atlascat.irt.ability import eap, estimate_ability, wle
from atlascat.irt.bank import ItemBank
from atlascat.responses import ResponseMatrix

ITEMS = [f"item{j:02d}" for j in range(20)]


@pytest.fixture(scope="module")
def bank():
    rng = np.random.default_rng(11)
    return ItemBank(ITEMS, rng.uniform(0.6, 2.2, 20), rng.normal(0, 1, 20), rng.uniform(0, .25, 20))


@pytest.fixture(scope="module")
def frame(bank):
    rng = np.random.default_rng(12)
    theta = rng.normal(size=150)
    y = (rng.random((150, 20)) < bank.probability(theta)).astype(float)
    y[rng.random(y.shape) < 0.1] = np.nan
    index = pd.Index([f"org/model-{i}" for i in range(150)], name="model")
    return pd.DataFrame(y, index=index, columns=ITEMS)


def _shuffled(df, seed=3):
    cols = list(np.random.default_rng(seed).permutation(df.columns))
    assert cols != list(df.columns)
    return df[cols]


@pytest.mark.parametrize("method", ["eap", "wle", "map", "ml"])
def test_estimate_ability_keeps_index_and_aligns_columns(frame, bank, method):
    ordered = estimate_ability(frame, bank, method)
    shuffled = estimate_ability(_shuffled(frame), bank, method)
    assert ordered["subject_id"].tolist() == list(frame.index)
    pd.testing.assert_frame_equal(ordered, shuffled)
    # and equal to scoring the ResponseMatrix built from the same labelled data
    rm = ResponseMatrix(frame.to_numpy(), frame.index, frame.columns)
    pd.testing.assert_frame_equal(ordered, estimate_ability(rm, bank, method))


def test_shuffled_frame_would_differ_if_read_by_position(frame, bank):
    """The round trip above is meaningful: positional reading gives other thetas."""
    shuffled = _shuffled(frame)
    by_id = estimate_ability(shuffled, bank, "eap")["theta"].to_numpy()
    by_position = estimate_ability(shuffled.to_numpy(), bank, "eap")["theta"].to_numpy()
    assert np.max(np.abs(by_id - by_position)) > 0.1


def test_eap_and_wle_functions_align_frames(frame, bank):
    t1, s1 = eap(frame, bank)
    t2, s2 = eap(_shuffled(frame), bank)
    np.testing.assert_array_equal(t1, t2)
    np.testing.assert_array_equal(s1, s2)
    np.testing.assert_array_equal(wle(frame, bank).theta, wle(_shuffled(frame), bank).theta)


def test_frame_with_unknown_item_is_an_error_naming_it(frame, bank):
    extra = frame.assign(not_in_bank=1.0)
    with pytest.raises(ResponseDataError, match="not_in_bank"):
        estimate_ability(extra, bank, extra_items="error")
    with pytest.warns(UserWarning, match="not_in_bank"):  # the default warns (issue 19)
        estimate_ability(extra, bank)
    df = estimate_ability(extra, bank, extra_items="ignore")
    pd.testing.assert_frame_equal(df, estimate_ability(frame, bank))


def test_frame_with_subject_column_and_range_index(frame, bank):
    flat = frame.reset_index()           # 'model' column of ids, RangeIndex
    df = estimate_ability(flat, bank)
    assert df["subject_id"].tolist() == list(frame.index)


def test_unlabelled_frame_is_positional(frame, bank):
    plain = pd.DataFrame(frame.to_numpy())  # RangeIndex columns: no item labels to align by
    np.testing.assert_array_equal(estimate_ability(plain, bank)["theta"],
                                  estimate_ability(frame, bank)["theta"])


def test_series_is_one_subject(frame, bank):
    row = frame.iloc[0]
    df = estimate_ability(row, bank)
    assert len(df) == 1 and df["subject_id"].iloc[0] == frame.index[0]
    assert df["theta"].iloc[0] == pytest.approx(estimate_ability(frame, bank)["theta"].iloc[0],
                                                abs=1e-12)


def test_response_matrix_from_frame_constructor_keeps_labels(frame):
    rm = ResponseMatrix(frame)
    assert list(rm.subject_ids) == list(frame.index)
    assert list(rm.item_ids) == ITEMS
    back = rm.to_frame()
    np.testing.assert_array_equal(back.to_numpy(), frame.to_numpy())
    assert list(back.index) == list(frame.index)


def test_calibrate_frame_keeps_labels_and_ignores_column_order(frame):
    res = at.calibrate(frame, model="2pl", filter=False, max_iter=200)
    assert list(res.bank.item_ids) == ITEMS
    assert list(res.subject_ids) == list(frame.index)
    res2 = at.calibrate(_shuffled(frame), model="2pl", filter=False, max_iter=200)
    b2 = res2.bank.subset(ITEMS)
    np.testing.assert_allclose(b2.a, res.bank.a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b2.b, res.bank.b, rtol=1e-5, atol=1e-6)
    assert res2.loglik == pytest.approx(res.loglik, rel=1e-9)


def test_m2_on_frame_aligns_columns(bank):
    rng = np.random.default_rng(2)
    sub = bank.subset(ITEMS[:8])
    y = (rng.random((400, 8)) < sub.probability(rng.normal(size=400))).astype(float)
    df = pd.DataFrame(y, columns=ITEMS[:8], index=[f"s{i}" for i in range(400)])
    a = irt_fit.m2(df, sub, estimated="none")
    b = irt_fit.m2(_shuffled(df, 5), sub, estimated="none")
    assert a.M2 == pytest.approx(b.M2, rel=1e-10)


def test_index_of_takes_one_id_or_many(bank):
    assert bank.index_of("item07") == 7
    assert bank.index_of(np.str_("item07")) == 7
    np.testing.assert_array_equal(bank.index_of(("item07", "item00")), [7, 0])


def test_filter_and_split_take_labelled_frames(frame):
    kept, report = at.filter_items(frame)
    assert set(kept.item_ids) <= set(ITEMS) and set(kept.subject_ids) <= set(frame.index)
    train, test = at.stratified_split(frame, rng=np.random.default_rng(0))
    assert sorted(list(train.subject_ids) + list(test.subject_ids)) == sorted(frame.index)
