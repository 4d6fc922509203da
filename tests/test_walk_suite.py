"""A user walk of the suite path (the Open LLM Leaderboard v1 average from ~150 items, tracked
over many checkpoints): the defects it found."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from atlascat import catalogue
from atlascat.errors import ConfigError
from atlascat.suite import SuiteConfig, load_suite, simulate_suite


def _weighted(suite, weights):
    """The suite with other weights (0: left out of the average)."""
    return suite.replace(members=tuple(dataclasses.replace(m, weight=float(w))
                                       for m, w in zip(suite.members, weights)))


def test_a_member_left_out_of_the_average_gets_no_items_of_its_own():
    """A custom subset (ARC, HellaSwag, MMLU; the other three at weight 0) spent 60 of its
    150 items on GSM8K, which the average does not count: the members' own variances were
    weighed in the selection whatever their weight."""
    suite = _weighted(load_suite("openllm-v1"), (1, 1, 1, 0, 0, 0))
    names = list(suite.names)
    ms = {b: catalogue.load_responses(b) for b in names}
    common = sorted(set.intersection(*[set(ms[b].subject_ids.astype(str)) for b in names]))
    res = simulate_suite(suite, ms, SuiteConfig(), subject_ids=common[:: 80][:8])
    items = res.scores[[f"{b}_items" for b in names]].mean()
    counted = items[[f"{b}_items" for b in names[:3]]].sum()
    assert items["gsm8k_items"] < 35, items.to_dict()
    assert counted > 75, items.to_dict()


def test_a_suite_without_a_member_says_how_to_leave_one_out(tmp_path):
    """A suite file with GSM8K deleted from its members was refused with the prior's and the
    members' names only; the way to a custom subset (weight 0) was nowhere said."""
    suite = load_suite("openllm-v1")
    with pytest.raises(ConfigError, match="weight 0"):
        suite.replace(members=suite.members[:5])


@pytest.fixture(scope="module")
def suite_runs(tmp_path_factory):
    """Three finished suite runs (simulated checkpoints, 18 items each) in one store."""
    from atlascat.catalogue import BankRef
    from atlascat.live.service import LiveRun
    from atlascat.live.subjects import SimulatedSubject

    db = tmp_path_factory.mktemp("walk_suite") / "runs.sqlite"
    ref = BankRef.from_option("openllm-v1", option="--suite", kinds=("suite",))
    bank = ref.load()
    subjects = [SimulatedSubject(bank, th, seed=k, name=f"ckpt-{k}")
                for k, th in enumerate((-0.5, 0.2, 0.9))]
    with LiveRun.start(db, ref, subjects, config=SuiteConfig(max_items=18, min_items=12)) as live:
        live.run()                          # the store it opened closed after it
        return db, [j.run_id for j in live.jobs], live.results()


def test_atlas_runs_does_not_replay_a_finished_suite_run_each_time(suite_runs, monkeypatch):
    """`atlas runs` over 200 suite runs took 18 s (each run's answers replayed into a fresh
    suite session, 50-100 ms a run, every listing). A finished run's prediction is kept in its
    store (computed once) and read back with the same numbers."""
    from atlascat.live.service import predict_run, run_predictions
    from atlascat.live.store import RunStore
    from atlascat.live.suite_session import SuiteLiveSession

    db, run_ids, results = suite_runs
    store = RunStore(db, read_only="auto")
    first = [predict_run(store, r) for r in run_ids]
    assert first == [res["prediction"] for res in results]

    def replayed(*args, **kwargs):
        raise AssertionError("a finished suite run was replayed again")

    monkeypatch.setattr(SuiteLiveSession, "prediction", replayed)
    again = RunStore(db, read_only="auto")
    assert [predict_run(again, r) for r in run_ids] == first
    per_bench = run_predictions(again, run_ids[0])
    assert per_bench["average"] == {**first[0]}


def test_a_kept_suite_prediction_under_another_key_is_replayed(suite_runs):
    """A kept prediction whose key no longer matches (the suite file, the banks or the code
    changed) is computed again from the answers, not read."""
    import sqlite3

    from atlascat.live.service import predict_run
    from atlascat.live.store import RunStore

    db, run_ids, results = suite_runs
    predict_run(RunStore(db, read_only="auto"), run_ids[1])   # kept
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE suite_predictions SET key='stale', prediction=? WHERE run_id=?",
                    ('{"average": {"score": 0.0}}', run_ids[1]))
    con.close()
    store = RunStore(db, read_only="auto")
    assert predict_run(store, run_ids[1]) == results[1]["prediction"]
    assert predict_run(store, run_ids[1]) == results[1]["prediction"]


def test_atlas_runs_on_a_narrow_terminal_keeps_run_ids_whole(suite_runs, monkeypatch, capsys):
    """On a 120-column terminal the 15 columns of `atlas runs` were folded into 5-character
    strips: run ids split over three lines (31924/bbe82/d8), dates over five. The columns a
    reader can spare are left out (and named) until the table fits; run ids never fold."""
    import io
    import re

    from rich.console import Console

    import atlascat.cli._common as display
    import atlascat.cli.cmd_runs as runs_command   # imported now: its `console` is the shared one
    from atlascat.cli import main

    db, run_ids, _ = suite_runs
    buf = io.StringIO()
    narrow = Console(file=buf, force_terminal=True, width=100, emoji=False, highlight=False)
    for module in (display, runs_command):   # both names restored after the test
        monkeypatch.setattr(module, "console", narrow)
    assert main(["runs", "--db", str(db)]) == 0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())
    assert all(r in text for r in run_ids), text
    assert "left out to fit 100 columns: bank_ref" in text
    assert max(map(len, text.splitlines())) <= 100
    table = [ln for ln in text.splitlines() if ln.startswith("│")]
    assert len(table) == len(run_ids), text      # one line a run: nothing folded


def test_atlas_runs_finds_one_models_checkpoints_among_many(suite_runs, capsys):
    """200 runs in a store and no way to list one model's: the terminal showed the 50 newest.
    --model (a part of the name, or a pattern) and --state select the runs to list."""
    import json

    from atlascat.cli import main
    from atlascat.live.service import select_runs
    from atlascat.live.store import RunStore

    db, run_ids, _ = suite_runs
    runs = RunStore(db, read_only="auto").list_runs()
    assert list(select_runs(runs, model="CKPT-1")["run_id"]) == [run_ids[1]]
    assert sorted(select_runs(runs, model="ckpt-[02]")["run_id"]) == sorted(run_ids[::2])
    assert len(select_runs(runs, state="done")) == 3
    assert select_runs(runs, state="interrupted").empty
    with pytest.raises(ConfigError, match="not a run state"):
        select_runs(runs, state="finished")
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--model", "ckpt-2", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [run_ids[2]]
    assert main(["runs", "--db", str(db), "--model", "nobody"]) == 0
    assert "no runs of model 'nobody' in" in capsys.readouterr().out


def test_a_strong_models_low_truthfulqa_is_not_called_chance(tmp_path, capsys):
    """01-ai/Yi-1.5-6B (published average 61.6, TruthfulQA 44.0) replayed through the suite
    was told "truthfulqa: at or near chance (<= 46%)", as were 31 of 100 leaderboard models of
    averages 49-81: TruthfulQA's mc2 is U-shaped, strong models that pick the misconceptions
    publish 30-46%. On such a benchmark the warning now needs answers that cannot be told from
    guessing; a guesser still gets it, and on the other benchmarks nothing changed."""
    from atlascat.catalogue import load_score_link
    from atlascat.cli import main
    from atlascat.live.suite_session import member_warning

    assert main(["evaluate", "--suite", "openllm-v1", "--subject",
                 "replay:openllm-v1#01-ai/Yi-1.5-6B", "-o", str(tmp_path / "yi"), "-q"]) == 0
    out = capsys.readouterr()
    row = [ln.split() for ln in out.out.splitlines() if ln.split()[:1] == ["truthfulqa"]][0]
    assert float(row[2].split("-")[0]) <= 48.0, out.out      # the interval reaches chance
    assert "truthfulqa: its 95% interval" not in out.err, out.err
    tqa, arc = load_score_link("truthfulqa"), load_score_link("arc")
    assert member_warning(tqa, 0.44, 0.40, 0.47, guessing=True).startswith("its 95% interval")
    assert member_warning(tqa, 0.44, 0.40, 0.47, guessing=False) is None
    assert member_warning(arc, 0.27, 0.25, 0.30, guessing=False) == (
        "its 95% interval (25% to 30%) reaches down to chance (25%): the score may be no better "
        "than guessing")


def test_atlas_runs_sorts_checkpoints_by_name_or_prediction(suite_runs, capsys):
    """Runs were listed newest first only: no way to read checkpoints in their order or find the
    best one. --sort model (ckpt-9 before ckpt-10) and --sort predicted (highest first)."""
    import json

    import pandas as pd

    from atlascat.cli import main
    from atlascat.live.service import sort_runs

    db, run_ids, results = suite_runs
    runs = pd.DataFrame({"run_id": ["a", "b", "c", "d"], "created_at": [4.0, 3.0, 2.0, 1.0],
                         "model": ["org/ckpt-10", "org/ckpt-9", "org/CKPT-100", "base"]})
    preds = [{"score": 0.5}, {"score": 0.7}, {"note": "no prediction"}, {"score": 0.6}]
    by_model, _ = sort_runs(runs, preds, "model")
    assert list(by_model["run_id"]) == ["d", "b", "a", "c"]
    by_score, sorted_preds = sort_runs(runs, preds, "predicted")
    assert list(by_score["run_id"]) == ["b", "d", "a", "c"]
    assert sorted_preds[0] == {"score": 0.7}
    with pytest.raises(ConfigError, match="cannot sort runs by"):
        sort_runs(runs, preds, "score")
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--sort", "predicted", "--json"]) == 0
    listed = [r["run_id"] for r in json.loads(capsys.readouterr().out)]
    best = sorted(zip(run_ids, results), key=lambda t: -t[1]["prediction"]["score"])
    assert listed == [r for r, _ in best]
