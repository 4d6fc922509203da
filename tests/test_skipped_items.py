"""An item that gets no score in a live run (``{"score": null}`` from a ``cmd:`` program: a
judge that could not rate it) is recorded as skipped: its reply kept, not cached, not asked
again, and the adaptive test goes on as over a gap in a response matrix (the same items and
theta as ``replay:`` of the answers with that gap). A bank folder's predictor, which needs the
score of every item it draws, and ten skips in a row stop the run, saved and resumable."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.cli import app
from atlascat.irt.bank import ItemBank
from atlascat.live.runner import SKIPS_IN_A_ROW, RunResult
from atlascat.live.store import RunStore
from atlascat.live.subjects.itemscored import parse_scores

SCORER = '''\
import json, os, sys
import pandas as pd
row = pd.read_csv(sys.argv[1], index_col=0).loc[sys.argv[2]]
crash = sys.argv[3] if len(sys.argv) > 3 else None
for n, line in enumerate(sys.stdin, 1):
    if crash and n == 9 and os.path.exists(crash):
        sys.exit("the judge crashed")
    item = json.loads(line)["item_id"]
    v = row.get(item, float("nan"))
    print(json.dumps({"item_id": item, "score": None if v != v else int(v)}), flush=True)
'''

N_ITEMS = 40


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A 2PL bank of 40 items, and answers of three models: ``gappy`` has no score for the
    items its first answers would ask (NaN), ``mute`` for every item."""
    rng = np.random.default_rng(3)
    ids = [f"q{j}" for j in range(N_ITEMS)]
    path = tmp_path_factory.mktemp("skipped")
    ItemBank(ids, rng.uniform(0.8, 2.0, N_ITEMS), rng.normal(0, 1, N_ITEMS)).write(
        path / "bank.csv")
    y = (rng.random((3, N_ITEMS)) < 0.6).astype(float)
    y[2] = np.nan
    answers = pd.DataFrame(y, index=["full", "gappy", "mute"], columns=ids).rename_axis("model")
    answers.to_csv(path / "answers.csv")
    (path / "judge.py").write_text(SCORER)
    return path


def _cmd(root: Path, model: str, *extra: str) -> str:
    """The judge of ``model``'s answers (runs compared item for item are named alike with
    --llm: a run's random choices are its model's own, ``subject_generator(seed, name)``)."""
    return "cmd:" + shlex.join([sys.executable, str(root / "judge.py"),
                                str(root / "answers.csv"), model, *extra])


def _evaluate(bank: Path, subject: str, out: Path, *extra: str, fails: bool = False):
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(bank), "--subject", subject,
                                 "--max-items", "15", "--seed", "4", "-q", "-o", str(out),
                                 *extra])
    assert (r.exit_code != 0) == fails, r.output + str(r.exception)
    return " ".join((r.output + str(r.exception or "")).split())


def _run(out: Path):
    store = RunStore(out / "runs.sqlite")
    run_id = store.list_runs()["run_id"].iloc[0]
    return store, run_id, store.steps(run_id)


@pytest.fixture(scope="module")
def gappy(root, tmp_path_factory):
    """``gappy``'s answers: ``full``'s, with no score for the 2nd, 5th and 6th items a run of
    ``full`` asks (so that the skips fall where the test is adaptive)."""
    out = tmp_path_factory.mktemp("full")
    _evaluate(root / "bank.csv", _cmd(root, "full"), out, "--llm", "gappy")  # gappy's stream
    asked = list(_run(out)[2]["item_id"])
    answers = pd.read_csv(root / "answers.csv", index_col=0)
    answers.loc["gappy"] = answers.loc["full"]
    answers.loc["gappy", [asked[1], asked[4], asked[5]]] = np.nan
    answers.to_csv(root / "answers.csv")
    return [asked[1], asked[4], asked[5]]


def test_a_null_score_is_no_score_in_every_mode():
    line = '{"item_id": "a", "score": null, "why": "judge refused"}'
    for kw in ({}, {"ratings": True}, {"score_range": (0, 100)}):
        [(score, reply)] = parse_scores(["a"], line, "cmd", **kw)
        assert score is None and "judge refused" in reply


def test_a_skipped_item_is_kept_unscored_and_the_test_goes_on_as_over_a_gap(root, gappy,
                                                                              tmp_path):
    """cmd: printing null for three items asks what replay: of the same answers with NaN
    there asks (replay: never asks them; cmd: asks them once) and ends at the same theta."""
    live, rec = tmp_path / "live", tmp_path / "replay"
    _evaluate(root / "bank.csv", _cmd(root, "gappy"), live, "--llm", "gappy")
    _evaluate(root / "bank.csv", f"replay:{root / 'answers.csv'}#gappy", rec)
    store, run_id, steps = _run(live)
    skipped = steps[steps["status"] == "skipped"]
    assert sorted(skipped["item_id"]) == sorted(gappy)
    assert skipped["score"].isna().all() and skipped["answer"].str.contains("null").all()
    assert list(steps["step"]) == list(range(len(steps)))     # no step number used twice
    assert steps["item_id"].is_unique                           # a skipped item is not asked again
    res, want = RunResult.from_store(store, run_id), RunResult.from_store(*_run(rec)[:2])
    assert res.items == want.items and res.n_items == want.n_items == 15
    assert res.theta == pytest.approx(want.theta, abs=1e-12)
    assert res.se == pytest.approx(want.se, abs=1e-12)
    assert res.score_sum == want.score_sum
    cached = {r[0] for r in store._con().execute("SELECT item_id FROM cache")}
    assert cached and not cached & set(gappy)                   # asked again in a new run


def test_the_run_page_and_listing_count_answered_items_only(root, gappy, tmp_path):
    out = tmp_path / "live"
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(root / "bank.csv"), "--subject",
                                 _cmd(root, "gappy"), "--llm", "gappy", "--max-items", "15",
                                 "--seed", "4",
                                 "-o", str(out)])     # the step lines too
    assert r.exit_code == 0, r.output + str(r.exception)
    assert sum("no score" in ln for ln in r.output.splitlines() if " step " in ln) == 3
    store, run_id, _ = _run(out)
    row = store.list_runs().iloc[0]
    assert int(row["n_items"]) == 15 and int(row["n_skipped"]) == 3
    listing = CliRunner().invoke(app, ["runs", "--db", str(out / "runs.sqlite")])
    assert listing.exit_code == 0, listing.output
    assert "n_skipped" in listing.output
    page = next((out / "reports").glob("*.html")).read_text()
    assert "3 items got no score" in " ".join(page.split())


def test_a_crash_after_a_skip_resumes_to_the_uninterrupted_run(root, gappy, tmp_path):
    flag = tmp_path / "crash"
    flag.touch()
    whole, out = tmp_path / "whole", tmp_path / "run"
    _evaluate(root / "bank.csv", _cmd(root, "gappy"), whole, "--llm", "gappy")
    said = _evaluate(root / "bank.csv", _cmd(root, "gappy", str(flag)), out, "--llm", "gappy",
                     fails=True)
    assert "can be resumed" in said
    store, run_id, steps = _run(out)
    assert (steps["status"] == "skipped").any()
    flag.unlink()
    r = CliRunner().invoke(app, ["evaluate", "--resume", run_id, "--db",
                                 str(out / "runs.sqlite"), "-q"])
    assert r.exit_code == 0, r.output + str(r.exception)
    a, b = _run(out)[2], _run(whole)[2]
    assert list(a["item_id"]) == list(b["item_id"]) and list(a["status"]) == list(b["status"])
    assert RunStore(out / "runs.sqlite").get_run(run_id)["theta"] == pytest.approx(
        RunStore(whole / "runs.sqlite").get_run(_run(whole)[1])["theta"], abs=1e-12)


def test_a_judge_that_never_scores_stops_the_run_saved(root, tmp_path):
    out = tmp_path / "run"
    said = _evaluate(root / "bank.csv", _cmd(root, "mute"), out, fails=True)
    assert f"the last {SKIPS_IN_A_ROW} items asked got no score (null)" in said
    assert "check the program" in said and "can be resumed" in said
    store, run_id, steps = _run(out)
    assert store.get_run(run_id)["status"] == "error"
    assert (steps["status"] == "skipped").sum() == SKIPS_IN_A_ROW - 1   # the last round stays pending


def test_a_bank_folders_predictor_refuses_a_missing_score(root, gappy, tmp_path):
    """A folder's prediction weighs every drawn item's score by its draw probability: an item
    left out would bias it, so a null score stops the run (saved; --resume asks it again)."""
    rng = np.random.default_rng(1)    # 80 items: more than the predictor's budget of 50
    theta, b = rng.normal(0, 1, (30, 1)), rng.normal(0, 1, 80)
    src = pd.DataFrame((rng.random((30, 80)) < 1 / (1 + np.exp(b - theta))).astype(int),
                       index=[f"s{i}" for i in range(30)],
                       columns=[f"q{j}" for j in range(80)]).rename_axis("model")
    src.to_csv(tmp_path / "source.csv")
    r = CliRunner().invoke(app, ["build-bank", str(tmp_path / "source.csv"), "-o",
                                 str(tmp_path / "folder"), "-q"])
    assert r.exit_code == 0, r.output + str(r.exception)
    said = _evaluate(tmp_path / "folder", _cmd(root, "mute"), tmp_path / "run", fails=True)
    assert "got no score (null); a bank folder's prediction needs the score of every item" in said
    assert "can be resumed" in said
    assert (tmp_path / "folder" / "predictor.json").is_file()


def test_a_graded_bank_leaves_out_an_item_its_judge_could_not_rate(tmp_path):
    """A 1-4 rating bank (graded) asked by a judge that prints null for one item: the run
    ends with that item skipped and every other one rated."""
    from atlascat.irt import polytomous as poly
    from atlascat.irt.polybank import PolyBank

    rng = np.random.default_rng(8)
    ids = [f"r{j}" for j in range(12)]
    d = np.sort(rng.normal(0, 1.2, (12, 3)), axis=1)[:, ::-1]
    bank = PolyBank(ids, np.column_stack([rng.uniform(0.8, 2.0, 12), d]), "graded",
                    [np.arange(1.0, 5.0)] * 12)
    bank.write(tmp_path / "graded.csv")
    ratings = poly.sample(bank.models, bank.params, np.array([0.3]), rng)[0] + 1.0
    row = pd.DataFrame([ratings], index=["judged"], columns=ids).rename_axis("model")
    row.to_csv(tmp_path / "ratings.csv")
    plain = _run_graded(tmp_path, row, tmp_path / "run")
    first = plain["item_id"].iloc[1]            # the second item asked gets no rating
    row.loc["judged", first] = np.nan
    row.to_csv(tmp_path / "ratings.csv")
    steps = _run_graded(tmp_path, row, tmp_path / "gap")
    assert list(steps.loc[steps["status"] == "skipped", "item_id"]) == [first]
    assert (steps["status"] == "answered").sum() == 6 and steps["item_id"].is_unique


def _run_graded(tmp_path: Path, row, out: Path):
    spec = "cmd:" + shlex.join([sys.executable, str(tmp_path.parent / "judge_graded.py"),
                                str(tmp_path / "ratings.csv"), "judged"])
    (tmp_path.parent / "judge_graded.py").write_text(SCORER)
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(tmp_path / "graded.csv"),
                                 "--subject", spec, "--min-items", "6", "--max-items", "6",
                                 "--seed", "2", "-q", "-o", str(out)])
    assert r.exit_code == 0, r.output + str(r.exception)
    return _run(out)[2]


def test_results_json_counts_the_skipped_items_as_the_listing_does(root, gappy, tmp_path):
    out = tmp_path / "live"
    _evaluate(root / "bank.csv", _cmd(root, "gappy"), out, "--llm", "gappy")
    [row] = pd.read_json(out / "results.json").to_dict("records")
    assert row["n_skipped"] == 3 and row["n_items"] == 15
    assert RunStore(out / "runs.sqlite").list_runs().iloc[0]["n_skipped"] == 3


def test_a_suite_session_skips_an_item_scored_none_and_resumes_so():
    from atlascat.live.suite_session import SuiteLiveSession, suite_ref

    s = SuiteLiveSession(suite_ref("openllm-v1"))
    items = s.next_items()
    s.record_many(items, [None] + [1] * (len(items) - 1))
    assert s.n_items == len(items) - 1 and s.skipped == [items[0]]
    state = s.to_dict()
    again = SuiteLiveSession.from_dict(state)
    nxt = s.next_items()
    assert items[0] not in nxt and again.next_items() == nxt
