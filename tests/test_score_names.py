"""One set of names for a run's scores, whatever the metric (issue 43): ``score_sum`` (the sum
of the item scores asked), ``observed_score`` (their mean) and ``model_based_score`` (the
expected mean item score over the bank at theta) in results.json, ``atlas runs --json`` and
``--run ID --json``; ``mean_score`` in ``atlas score``'s CSV. None of the 0/1-only names
(``n_correct``, ``observed_accuracy``, ``model_based_accuracy``, ``accuracy``) is written, and
a run store keeps its SQL columns, so a store written before reads the same."""
from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main

NEW = {"score_sum", "observed_score", "model_based_score"}
OLD = {"n_correct", "observed_accuracy", "model_based_accuracy", "accuracy"}


@pytest.fixture(scope="module")
def qmsum(tmp_path_factory, shared_data):
    """A bank folder built from 30 models' ROUGE-L on QMSum (continuous scores in [0, 1])
    and the recorded scores of 10 other models."""
    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    idx = np.random.default_rng(0).permutation(len(df))
    root = tmp_path_factory.mktemp("score_names")
    df.iloc[idx[:30]].to_csv(root / "source.csv")
    df.iloc[idx[30:]].to_csv(root / "targets.csv")
    assert main(["build-bank", str(root / "source.csv"), "-o", str(root / "bank"), "--seed", "0",
                 "-q"]) == 0
    return root, df.iloc[idx[30:]]


def test_a_continuous_run_names_its_scores_generically(qmsum, tmp_path, capsys):
    root, targets = qmsum
    model = str(targets.index[0])
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(root / "bank"), "--subject",
                 f"replay:{root / 'targets.csv'}#{model}", "--max-items", "12", "--seed", "1",
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "  mean score: observed " in text     # the words stay the metric's
    row = json.loads((out / "results.json").read_text())[0]
    assert NEW <= set(row) and not OLD & set(row), sorted(row)
    scores = np.asarray(row["scores"], float)
    assert ((scores > 0) & (scores < 1)).any()   # continuous: a sum of scores, not a count
    assert row["score_sum"] == pytest.approx(scores.sum(), abs=1e-6)
    assert row["observed_score"] == pytest.approx(scores.mean(), abs=1e-6)
    assert 0 < row["model_based_score"] < 1

    assert main(["runs", "--db", str(out / "runs.sqlite"), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert NEW <= set(rec) and not OLD & set(rec), sorted(rec)
    for key in NEW:
        assert rec[key] == pytest.approx(row[key], abs=1e-6), key
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--run", row["run_id"],
                 "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["run"]
    assert {"score_sum", "model_based_score"} <= set(run) and not OLD & set(run), sorted(run)


def test_a_store_keeps_its_columns_and_lists_as_before(qmsum, tmp_path, capsys):
    """The run store's SQL columns are those every earlier store has (``n_correct``,
    ``accuracy``): a store written by an earlier ATLAS lists, with its values under the
    generic names. The store here is edited as such a store would hold a run."""
    root, targets = qmsum
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(root / "bank"), "--subject",
                 f"replay:{root / 'targets.csv'}#{targets.index[1]}", "--max-items", "8",
                 "-o", str(out), "-q"]) == 0
    capsys.readouterr()
    db = out / "runs.sqlite"
    with sqlite3.connect(db) as con:
        cols = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
        assert {"n_correct", "accuracy"} <= cols and not NEW & cols
        con.execute("UPDATE runs SET n_correct=?, accuracy=?", (3.5, 0.375))
    assert main(["runs", "--db", str(db), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert (rec["score_sum"], rec["observed_score"], rec["model_based_score"]) == \
        pytest.approx((3.5, 3.5 / 8, 0.375))
    assert main(["runs", "--db", str(db)]) == 0
    head, line = capsys.readouterr().out.splitlines()[1:3]
    cells = dict(zip(head.split(), line.split()))
    assert (cells["observed"], cells["model-based"]) == ("43.8%", "37.5%")


def test_score_writes_mean_score_and_ranks_reads_it(shared_data, tmp_path, capsys):
    """``atlas score`` on a 0/1 bank: ``mean_score`` (the accuracy) and ``mean_score_pirt``;
    ``atlas ranks`` reads that CSV, and one with the column's earlier name ``accuracy``."""
    matrix = shared_data / "openllm" / "tiny_arc.csv.gz"
    out = tmp_path / "s.csv"
    assert main(["score", str(matrix), "--bank", "paper-arc", "--reconstruct", "pirt",
                 "-o", str(out)]) == 0
    df = pd.read_csv(out)
    assert {"mean_score", "mean_score_pirt"} <= set(df.columns)
    assert not {"accuracy", "accuracy_pirt"} & set(df.columns)
    assert df["mean_score"].between(0, 1).all()
    capsys.readouterr()
    assert main(["ranks", str(out), "--json"]) == 0
    new = json.loads(capsys.readouterr().out)
    df.rename(columns={"mean_score": "accuracy"}).to_csv(tmp_path / "old.csv", index=False)
    assert main(["ranks", str(tmp_path / "old.csv"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == new and new["n_models"] == len(df)


def test_score_on_a_shipped_bank_writes_its_predicted_leaderboard_score(tmp_path):
    """``atlas score --bank arc``: the shipped link's predicted published score with its 95%
    interval, the columns ``atlas simulate`` writes, from each model's theta, SE and answers
    (:func:`atlascat.scorelink.predict_frame`); a paper bank has no link and no such column."""
    from atlascat.catalogue import BankRef, load_responses
    from atlascat.scorelink import predict_frame
    from atlascat.scorelink.frames import COLUMNS

    rm = load_responses("arc")
    rm.subset(subjects=np.arange(0, 2193, 400)).write(tmp_path / "m.csv")
    out = tmp_path / "s.csv"
    assert main(["score", str(tmp_path / "m.csv"), "--bank", "arc", "-o", str(out)]) == 0
    df = pd.read_csv(out, keep_default_na=False)
    assert set(COLUMNS) <= set(df.columns)
    m = pd.read_csv(tmp_path / "m.csv", index_col=0)
    long = m.stack().rename("score").rename_axis(["subject_id", "item_id"]).reset_index()
    expect = predict_frame(BankRef.from_option("arc").link, df[["subject_id", "theta", "se"]],
                           long)
    for col in ("score", "score_lo", "score_hi", "percentile"):
        assert df[col].to_numpy(float) == pytest.approx(expect[col].to_numpy(float), rel=1e-6)
    assert ((df["score_lo"] <= df["score"]) & (df["score"] <= df["score_hi"])).all()
    assert main(["score", str(tmp_path / "m.csv"), "--bank", "paper-arc", "-o", str(out)]) == 0
    assert "score" not in pd.read_csv(out).columns
