"""A recorded model with gaps (items it has no answer for) is asked live what ``atlas simulate``
asks it: only its answered items, the prediction being of its mean over them."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main


@pytest.fixture(scope="module")
def gapped(shared_data, tmp_path_factory):
    """A QMSum bank folder from 30 models and two targets with a fifth of their cells blank."""
    root = tmp_path_factory.mktemp("gaps")
    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    df.iloc[:30].to_csv(root / "source.csv")
    targets = df.iloc[30:32]
    blank = np.random.default_rng(0).random(targets.shape) < 0.2
    targets.mask(blank).to_csv(root / "targets.csv")
    assert main(["build-bank", str(root / "source.csv"), "-q", "-o", str(root / "bank")]) == 0
    return root, list(targets.index)


def test_a_live_replay_with_gaps_equals_simulate(gapped):
    """Each target's live run asks the items simulate asks (none it has no answer for) and
    predicts the same score and interval; a run stopped half-way resumes to the same end."""
    root, models = gapped
    assert main(["simulate", str(root / "targets.csv"), "--bank", str(root / "bank"),
                 "--seed", "3", "-q", "-o", str(root / "sim")]) == 0
    sim = pd.read_csv(root / "sim" / "person_scores.csv", index_col=0)
    answered = pd.read_csv(root / "targets.csv", index_col=0).notna()
    args = ["evaluate", "--bank", str(root / "bank"), "--seed", "3", "-q"]
    for model in models:
        subject = ["--subject", f"replay:{root / 'targets.csv'}#{model}"]
        assert main([*args, *subject, "-o", str(root / f"live_{model}")]) == 0
        res = json.loads((root / f"live_{model}" / "results.json").read_text())[0]
        assert all(answered.loc[model, i] for i in res["items"])
        pred = res["prediction"]
        for key, col in (("score", "score"), ("lo", "score_lo"), ("hi", "score_hi")):
            assert pred[key] == pytest.approx(sim.loc[model, col], abs=1e-9), (model, key)


def test_a_saved_session_keeps_the_items_its_model_can_be_asked(gapped):
    """A predictor session of a model with gaps, saved after 10 answers and restored, asks
    what the uninterrupted one asks: never an item without an answer."""
    from atlascat.catalogue import BankRef
    from atlascat.predict.session import PredictSession

    root, models = gapped
    predictor = BankRef.from_option(str(root / "bank")).predictor()[0]
    row = pd.read_csv(root / "targets.csv", index_col=0).loc[models[0]]
    have = [str(i) for i in row.index[row.notna()]]

    def run(session, stop=None):
        while not session.done and (stop is None or session.n_items < stop):
            for item in session.next_items(1):
                session.record(item, row[item])
        return session

    whole = run(predictor.session(rng=7, available=have))
    half = run(predictor.session(rng=7, available=have), stop=10)
    state = json.loads(json.dumps(half.to_dict()))
    assert len(state["available"]) == len(have)
    again = run(PredictSession.from_dict(predictor, state))
    assert again.to_dict()["draws"] == whole.to_dict()["draws"]
    assert set(whole.to_dict()["answers"]) <= set(have)
    assert again.prediction().score == whole.prediction().score
    with pytest.raises(Exception, match="no recorded answer to any"):
        predictor.session(rng=7, available=["not-an-item"])


@pytest.mark.parametrize("k", [1, 3])
def test_a_live_adaptive_test_skips_the_gaps_as_simulate_does(gapped, k):
    """The folder's adaptive test (``--design adaptive``, rounds of ``k``) of a recorded model
    with gaps skips the items it has no answer for as they come up, as ``atlas simulate``
    does: the same items in the same order, the same theta and SE."""
    root, models = gapped
    sim = root / f"sim_adaptive_{k}"
    assert main(["simulate", str(root / "targets.csv"), "--bank", str(root / "bank"),
                 "--design", "adaptive", "--batch-size", str(k), "--seed", "3", "-q",
                 "-o", str(sim)]) == 0
    scores = pd.read_csv(sim / "person_scores.csv", index_col=0)
    assert scores["n_skipped"].min() > 0         # the gaps came up
    asked = pd.read_csv(sim / "selected_items.csv")
    for model in models:
        out = root / f"live_adaptive_{k}_{model}"
        assert main(["evaluate", "--bank", str(root / "bank"), "--design", "adaptive",
                     "--batch-size", str(k), "--seed", "3", "-q", "--subject",
                     f"replay:{root / 'targets.csv'}#{model}", "-o", str(out)]) == 0
        res = json.loads((out / "results.json").read_text())[0]
        mine = asked[asked["subject_id"] == model].sort_values("order")["item_id"].tolist()
        assert res["items"] == mine
        assert res["theta"] == pytest.approx(scores.loc[model, "theta"], abs=1e-12)
        assert res["se"] == pytest.approx(scores.loc[model, "se"], abs=1e-12)


@pytest.mark.parametrize("design", ["predictor", "adaptive"])
def test_a_replay_sharing_no_item_with_the_bank_is_one_line(gapped, tmp_path, capsys, design):
    """A matrix whose items are not the bank's: one line saying so, exit 2, in both designs
    (not a run of no items, not a traceback)."""
    root, models = gapped
    other = pd.read_csv(root / "targets.csv", index_col=0)
    other.columns = [f"other.{k}" for k in range(other.shape[1])]
    other.to_csv(tmp_path / "other.csv")
    code = main(["evaluate", "--bank", str(root / "bank"), "--design", design, "-q",
                 "--subject", f"replay:{tmp_path / 'other.csv'}#{models[0]}",
                 "-o", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert "no recorded answer to any" in err and "Traceback" not in err


class _Flaky:
    """A recorded model whose scoring fails once, at its ``fail_at``-th call (a crash)."""

    def __init__(self, inner, fail_at: int):
        self.inner, self.fail_at, self.calls = inner, fail_at, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def score_items(self, item_ids):
        from atlascat.live.subjects import SubjectError

        self.calls += 1
        if self.calls == self.fail_at:
            raise SubjectError("the scorer died")
        return self.inner.score_items(item_ids)


def test_an_adaptive_test_with_gaps_resumes_to_the_same_end(gapped, tmp_path):
    """Stopped after some answers (blanks skipped before and after), a resumed run asks what
    the uninterrupted run asks, to the same theta."""
    from atlascat.catalogue import BankRef
    from atlascat.errors import RunStoppedError
    from atlascat.live.service import LiveRun, resume
    from atlascat.live.store import RunStore
    from atlascat.live.subjects import RecordedAnswers

    root, models = gapped
    ref = BankRef.from_option(str(root / "bank"))
    targets = str(root / "targets.csv")

    def start_run(store, subject, **kw):   # the store it opens closed after it
        with LiveRun.start(str(store), ref, [subject], seed=3, design="adaptive") as live:
            return live.run(**kw)

    whole = start_run(tmp_path / "whole.sqlite", RecordedAnswers(targets, models[1]))[0]
    flaky = _Flaky(RecordedAnswers(targets, models[1]), fail_at=12)
    with pytest.raises(RunStoppedError) as stop:
        start_run(tmp_path / "part.sqlite", flaky, raise_errors=True)
    store = RunStore(str(tmp_path / "part.sqlite"))
    session = store.get_run(stop.value.run_id)["session"]
    assert 0 < store.get_run(stop.value.run_id)["n_items"] < len(whole.items)
    done = resume(str(tmp_path / "part.sqlite"), stop.value.run_id)
    assert done.items == whole.items and done.theta == pytest.approx(whole.theta, abs=1e-12)
    skips = [e for e in session["events"] if e[0] == "s"]     # blanks skipped before the stop
    after = [e for e in RunStore(str(tmp_path / "whole.sqlite")).get_run(whole.run_id)[
        "session"]["events"][len(session["events"]):] if e[0] == "s"]
    assert skips and after                                     # ... and after it
