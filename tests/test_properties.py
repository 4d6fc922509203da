"""Property-based tests (hypothesis): estimators, the CAT session, the readers.

- Estimators: finite, in range, invariant to the order of items, monotone in the answers.
- CATSession: to_dict -> JSON -> from_dict resumes exactly, at any point of a test; damaged
  snapshots fail with an AtlasError, never a raw exception.
- Readers: write -> read round trips keep ids and values; arbitrary bytes either read as a
  valid matrix/bank or fail with an AtlasError.
"""
from __future__ import annotations

import gzip
import json
import os
import string

import numpy as np
import pandas as pd
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is in the dev extra")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from atlascat.cat.config import CATConfig  # noqa: E402
from atlascat.cat.session import CATSession  # noqa: E402
from atlascat.errors import AtlasError  # noqa: E402
from atlascat.irt.ability import estimate_ability  # noqa: E402
from atlascat.irt.bank import ItemBank  # noqa: E402
from atlascat.responses import ResponseMatrix  # noqa: E402

# ATLAS_HYPOTHESIS_EXAMPLES=500 for a deeper local search; CI keeps the suite fast.
# Local runs draw new examples every time (they found the steep-item ML bug); CI
# (.ci/run sets ATLAS_HYPOTHESIS_DERANDOMIZE=1) draws the same ones, so a landing never
# depends on the draw.
N_EXAMPLES = int(os.environ.get("ATLAS_HYPOTHESIS_EXAMPLES", "40"))
DERANDOMIZE = os.environ.get("ATLAS_HYPOTHESIS_DERANDOMIZE") == "1"
FAST = settings(max_examples=N_EXAMPLES, deadline=None, derandomize=DERANDOMIZE,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


# ---------------------------------------------------------------------------- strategies
@st.composite
def banks(draw, min_items=2, max_items=15):
    n = draw(st.integers(min_items, max_items))
    a = draw(st.lists(st.floats(0.2, 4.0), min_size=n, max_size=n))
    b = draw(st.lists(st.floats(-3.0, 3.0), min_size=n, max_size=n))
    c = draw(st.lists(st.floats(0.0, 0.3), min_size=n, max_size=n))
    return ItemBank([f"i{j}" for j in range(n)], a, b, c)


@st.composite
def bank_and_answers(draw, max_subjects=6):
    bank = draw(banks())
    n = draw(st.integers(1, max_subjects))
    cells = st.sampled_from([0.0, 1.0, np.nan])
    y = np.array(draw(st.lists(st.lists(cells, min_size=len(bank), max_size=len(bank)),
                               min_size=n, max_size=n)), dtype=float)
    return bank, y


# ---------------------------------------------------------------------------- estimators
@FAST
@given(bank_and_answers(), st.sampled_from(["eap", "wle", "map", "ml"]))
def test_estimates_are_finite_or_flagged(data, method):
    bank, y = data
    df = estimate_ability(y, bank, method)
    answered = (~np.isnan(y)).sum(1)
    for theta, se, flag, k in zip(df["theta"], df["se"], df["flag"], answered):
        if k == 0:
            assert flag == "no_items"
        elif method == "ml" and flag in ("perfect", "zero", "diverged"):
            assert np.isinf(theta) and np.isinf(se)
        else:
            assert np.isfinite(theta) and np.isfinite(se) and se > 0, (theta, se, flag)
            assert flag in ("ok", "at_bound")
            lim = 6.0 if method == "eap" else 10.0
            assert -lim - 1e-9 <= theta <= lim + 1e-9


@FAST
@given(bank_and_answers(), st.sampled_from(["eap", "wle", "map"]), st.randoms())
def test_item_order_does_not_matter(data, method, rnd):
    bank, y = data
    perm = list(range(len(bank)))
    rnd.shuffle(perm)
    a = estimate_ability(y, bank, method)
    b = estimate_ability(y[:, perm], bank.subset(np.array(perm)), method)
    np.testing.assert_allclose(a["theta"], b["theta"], atol=1e-7, equal_nan=True)
    np.testing.assert_allclose(a["se"], b["se"], atol=1e-7, equal_nan=True)


@FAST
@given(bank_and_answers(max_subjects=1), st.data())
def test_eap_is_monotone_in_each_answer(data, draw):
    """P/Q increases with theta for a > 0, so turning a wrong answer right never lowers EAP."""
    bank, y = data
    wrong = np.flatnonzero(y[0] == 0)
    assume(wrong.size > 0)
    j = draw.draw(st.sampled_from(wrong.tolist()))
    better = y.copy()
    better[0, j] = 1.0
    t0 = estimate_ability(y, bank, "eap")["theta"].iloc[0]
    t1 = estimate_ability(better, bank, "eap")["theta"].iloc[0]
    assert t1 >= t0 - 1e-10


@FAST
@given(banks(), st.integers(0, 1))
def test_ml_diverges_for_constant_patterns(bank, value):
    y = np.full((1, len(bank)), float(value))
    df = estimate_ability(y, bank, "ml")
    assert df["flag"].iloc[0] == ("perfect" if value else "zero")
    assert df["theta"].iloc[0] == (np.inf if value else -np.inf)


@FAST
@given(bank_and_answers(), st.sampled_from([2.0, -1.0, 0.5 + 1e-3j]))
def test_out_of_range_arrays_are_refused(data, bad):
    bank, y = data
    y = y.astype(object)
    y[0, 0] = bad
    with pytest.raises(AtlasError):
        estimate_ability(y, bank)


# ---------------------------------------------------------------------------- CAT session
@st.composite
def sessions(draw):
    bank = draw(banks(min_items=8, max_items=25))
    config = CATConfig(min_items=draw(st.integers(1, 5)), max_items=draw(st.integers(5, 12)),
                       se_stop=draw(st.sampled_from([None, 0.3, 0.6])),
                       randomesque=draw(st.integers(1, 3)))
    seed = draw(st.integers(0, 2**31 - 1))
    answers = draw(st.lists(st.sampled_from([0, 1, 0.5, "skip"]), min_size=20, max_size=20))
    cut = draw(st.integers(0, 12))
    pending = draw(st.booleans())
    return bank, config, seed, answers, cut, pending


def _run(session, answers, start=0):
    """Drive a session with the scripted answers; returns the items asked from ``start`` on."""
    asked = []
    for ans in answers[start:]:
        item = session.next_item()
        if item is None:
            break
        asked.append(item)
        if ans == "skip":
            session.skip(item)
        else:
            session.record(item, ans)
    return asked


@FAST
@given(sessions())
def test_session_round_trip_resumes_exactly(case):
    bank, config, seed, answers, cut, pending = case
    reference = CATSession(bank, config, np.random.default_rng(seed))
    full = _run(reference, answers)

    session = CATSession(bank, config, np.random.default_rng(seed))
    first = _run(session, answers[:cut])
    if pending and not session.done:
        session.next_item()          # saved between next_item and record
    snap = json.loads(json.dumps(session.to_dict()))
    resumed = CATSession.from_dict(snap, bank)
    assert resumed.theta == session.theta and resumed.se == session.se
    rest = _run(resumed, answers, start=len(first))
    assert first + rest == full
    assert resumed.theta == reference.theta and resumed.se == reference.se
    assert resumed.done == reference.done and resumed.stop_reason == reference.stop_reason


@FAST
@given(sessions(), st.integers(1, 4), st.integers(0, 6), st.booleans())
def test_batched_session_round_trip_resumes_exactly(case, k, rounds, outstanding):
    """Rounds of k items (next_items / record_many): saved after any round, or between
    next_items and record_many, the resumed session continues exactly like the original."""
    bank, config, seed, answers, _, _ = case
    scores = [a if a != "skip" else 1 for a in answers] * 4

    def drive(session, n_rounds, start=0, finish_pending=None):
        asked, pos = [], start
        if finish_pending:
            session.record_many(finish_pending, scores[pos:pos + len(finish_pending)])
            pos += len(finish_pending)
        for _ in range(n_rounds):
            items = session.next_items(k)
            if not items:
                break
            asked.append(list(items))
            session.record_many(items, scores[pos:pos + len(items)])
            pos += len(items)
        return asked, pos

    reference = CATSession(bank, config, np.random.default_rng(seed))
    full, _ = drive(reference, 50)

    session = CATSession(bank, config, np.random.default_rng(seed))
    first, pos = drive(session, rounds)
    pending = session.next_items(k) if outstanding and not session.done else []
    resumed = CATSession.from_dict(json.loads(json.dumps(session.to_dict())), bank)
    rest, _ = drive(resumed, 50, start=pos, finish_pending=list(pending))
    assert first + ([list(pending)] if pending else []) + rest == full
    assert resumed.theta == reference.theta and resumed.se == reference.se
    assert resumed.stop_reason == reference.stop_reason


@FAST
@given(sessions(), st.data())
def test_damaged_snapshots_fail_with_atlas_error(case, draw):
    bank, config, seed, answers, cut, _ = case
    session = CATSession(bank, config, np.random.default_rng(seed))
    _run(session, answers[:max(cut, 1)])
    snap = json.loads(json.dumps(session.to_dict()))
    how = draw.draw(st.sampled_from(["drop", "truncate", "retype", "item", "text"]))
    key = draw.draw(st.sampled_from(sorted(snap)))
    if how == "drop":
        snap.pop(key)
    elif how == "truncate":
        assume(isinstance(snap[key], list) and snap[key])
        snap[key] = snap[key][:-1]
    elif how == "retype":
        snap[key] = 3.5
    elif how == "item":
        assume(snap["events"])
        snap["events"][0] = [snap["events"][0][0], "no-such-item"]
    else:
        text = json.dumps(snap)
        # a fraction, not a length: the snapshot holds wall-clock times, so its length varies
        snap = text[: int(draw.draw(st.floats(0.0, 0.999)) * len(text))]
    try:
        CATSession.from_dict(snap, bank)
    except AtlasError:
        pass
    # a change that leaves a consistent snapshot (e.g. an unused key dropped) may still load


# ---------------------------------------------------------------------------- readers
_ID_CHARS = string.ascii_letters + string.digits + " ,;\"'-_/.:éü中"
ids = st.one_of(
    st.text(_ID_CHARS, min_size=1, max_size=12).map(str.strip),
    st.sampled_from(["NA", "null", "nan", "None", "N/A", "1", "0.5", "TRUE"]),  # ids, not values
).filter(lambda s: s and not s.startswith("Unnamed") and not s.startswith("X"))


@st.composite
def matrices(draw):
    n = draw(st.integers(1, 6))
    m = draw(st.integers(1, 6))
    sids = draw(st.lists(ids, min_size=n, max_size=n, unique=True))
    iids = draw(st.lists(ids, min_size=m, max_size=m, unique=True))
    cells = st.sampled_from([0.0, 1.0, 0.25, np.nan])
    y = np.array(draw(st.lists(st.lists(cells, min_size=m, max_size=m), min_size=n, max_size=n)))
    assume((~np.isnan(y)).any(axis=0).all() and (~np.isnan(y)).any(axis=1).all())
    return ResponseMatrix(y, sids, iids)


@FAST
@given(matrices(), st.sampled_from([".csv", ".csv.gz", ".parquet"]))
def test_matrix_write_read_round_trip(tmp_path_factory, rm, suffix):
    path = tmp_path_factory.mktemp("rt") / f"m{suffix}"
    rm.write(path)
    back = ResponseMatrix.read(path)
    assert list(back.subject_ids) == list(rm.subject_ids)
    assert list(back.item_ids) == list(rm.item_ids)
    np.testing.assert_array_equal(back.values, rm.values)


@FAST
@given(banks(min_items=1), st.sampled_from([".csv", ".parquet"]), st.sampled_from(["ours", "mirt"]))
def test_bank_write_read_round_trip(tmp_path_factory, bank, suffix, fmt):
    path = tmp_path_factory.mktemp("bk") / f"b{suffix}"
    bank.write(path, format=fmt)
    back = ItemBank.read(path)
    assert list(back.item_ids) == list(bank.item_ids)
    np.testing.assert_allclose(back.a, bank.a, rtol=1e-15)
    np.testing.assert_allclose(back.b, bank.b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(back.c, bank.c, rtol=0, atol=0)


@settings(max_examples=max(60, N_EXAMPLES), deadline=None, derandomize=DERANDOMIZE,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300), st.sampled_from([".csv", ".csv.gz", ".parquet", ".tsv"]),
       st.booleans())
def test_arbitrary_bytes_read_or_fail_cleanly(tmp_path_factory, blob, suffix, as_bank):
    path = tmp_path_factory.mktemp("fz") / f"f{suffix}"
    if suffix == ".csv.gz":
        blob = gzip.compress(blob)[: max(1, len(blob))]  # often truncated
    path.write_bytes(blob)
    try:
        obj = ItemBank.read(path) if as_bank else ResponseMatrix.read(path)
    except AtlasError as exc:
        assert "\n" not in str(exc).strip()
        return
    assert len(obj) >= 1 if as_bank else obj.n_subjects >= 1


@FAST
@given(st.lists(st.sampled_from(["1", "0", "", "0.5", "x", "2", "-1", "nan", "inf", "1e3"]),
                min_size=4, max_size=4), st.sampled_from([",", ";"]))
def test_text_matrices_read_or_name_the_cell(tmp_path_factory, cells, sep):
    path = tmp_path_factory.mktemp("tx") / "m.csv"
    path.write_text(sep.join(["model", "q1", "q2"]) + "\n" + sep.join(["a"] + cells[:2]) + "\n"
                    + sep.join(["b"] + cells[2:]) + "\n")
    try:
        rm = ResponseMatrix.read(path)
    except AtlasError as exc:
        msg = str(exc)
        assert "\n" not in msg.strip()
        assert any(word in msg for word in ("m.csv", "row", "column", "subject", "item"))
        return
    v = rm.values[~np.isnan(rm.values)]
    assert np.all((v >= 0) & (v <= 1))
    assert sep == ","


def test_frames_with_text_are_refused_with_the_cell():
    df = pd.DataFrame({"q1": [1, "oops"], "q2": [0, 1]}, index=["a", "b"])
    with pytest.raises(AtlasError, match="'oops'"):
        ResponseMatrix.from_frame(df)
