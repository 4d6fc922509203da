"""A graded bank asked live (``atlas evaluate --bank GRADED.csv``): ``replay:`` of a ratings
row and ``cmd:`` (a program that rates items by id), every answer stored, resumable, and the
same items and theta as the ordinal adaptive test replayed in memory."""
from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.cat.config import CATConfig, Stopping
from atlascat.cat.ordinal import OrdinalCATSession, simulate_ordinal_cat
from atlascat.cli import app
from atlascat.errors import ConfigError, LiveRunError
from atlascat.irt import polytomous as poly
from atlascat.irt.polybank import PolyBank
from atlascat.live.store import RunStore
from atlascat.live.subjects.itemscored import parse_scores

N_ITEMS, MAX_ITEMS = 10, 6

RATER = '''\
import json, os, sys
import pandas as pd
ratings = pd.read_csv(sys.argv[1], index_col=0).loc[sys.argv[2]]
mode = sys.argv[3] if len(sys.argv) > 3 else ""
for n, line in enumerate(sys.stdin, 1):
    if mode == "crash" and n == 4 and os.path.exists(sys.argv[4]):
        sys.exit("the rater crashed")
    item = json.loads(line)["item_id"]
    rating = 7 if mode == "offscale" else int(ratings[item])
    print(json.dumps({"item_id": item, "rating_note": "ok", "score": rating}))
'''


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A graded bank of 10 items x 4 categories (ratings 1-4) and 50 models' ratings drawn
    from it, and the rating program."""
    rng = np.random.default_rng(11)
    a = rng.uniform(0.8, 2.0, N_ITEMS)
    d = np.sort(rng.normal(0, 1.2, (N_ITEMS, 3)), axis=1)[:, ::-1]
    params = np.column_stack([a, d])
    ids = [f"q{j}" for j in range(N_ITEMS)]
    bank = PolyBank(ids, params, "graded", [np.arange(1.0, 5.0)] * N_ITEMS)
    path = tmp_path_factory.mktemp("graded")
    bank.write(path / "bank.csv")
    cats = poly.sample(bank.models, bank.params, rng.normal(0, 1, 50), rng)
    pd.DataFrame(cats + 1, index=[f"m{i}" for i in range(50)], columns=ids).rename_axis(
        "model").to_csv(path / "ratings.csv")
    (path / "rater.py").write_text(RATER)
    return path


def _cmd(root: Path, model: str, *extra: str) -> str:
    return "cmd:" + shlex.join([sys.executable, str(root / "rater.py"),
                                str(root / "ratings.csv"), model, *extra])


#: the adaptive test's settings of every run here, live and simulated
PLAN = ["--min-items", "3", "--max-items", str(MAX_ITEMS), "--seed", "3"]


def _evaluate(root: Path, subject: str, out: Path, *extra: str, fails: bool = False) -> str:
    """Run ``atlas evaluate`` in process; -> its output, or the message of the error that
    ended it (``fails``: the CLI's entry point prints it as one line, exit 2)."""
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(root / "bank.csv"), "--subject",
                                 subject, *PLAN, "-q", "-o", str(out), *extra])
    assert (r.exit_code != 0) == fails, r.output + str(r.exception)
    return str(r.exception) if fails else r.output


def _steps(out: Path) -> pd.DataFrame:
    store = RunStore(out / "runs.sqlite")
    return store.steps(store.list_runs()["run_id"].iloc[0])


def _simulated(root: Path, tmp_path: Path, model: str):
    """(the model's person row, its items) of ``atlas simulate`` of the whole ratings matrix
    with the live runs' settings and seed."""
    out = tmp_path / "sim"
    r = CliRunner().invoke(app, ["simulate", str(root / "ratings.csv"), "--bank",
                                 str(root / "bank.csv"), *PLAN, "--selected", "-o", str(out)])
    assert r.exit_code == 0, r.output + str(r.exception)
    persons = pd.read_csv(out / "person_scores.csv", dtype={"subject_id": str})
    items = pd.read_csv(out / "selected_items.csv", dtype={"subject_id": str, "item_id": str})
    return (persons.set_index("subject_id").loc[model],
            items[items["subject_id"] == model].reset_index(drop=True))


def test_replay_asks_what_simulate_asks_and_every_reader_agrees(root, tmp_path):
    """A live replay of one model asks the items `atlas simulate` asks that model among all
    fifty (each model draws from its own stream of the seed) and ends at the same theta."""
    out = tmp_path / "replay"
    _evaluate(root, f"replay:{root / 'ratings.csv'}#m7", out)
    res = json.loads((out / "results.json").read_text())[0]
    person, administered = _simulated(root, tmp_path, "m7")
    steps = _steps(out)
    assert list(steps["item_id"]) == list(administered["item_id"])
    assert steps["score"].astype(float).tolist() == administered["score"].tolist()
    np.testing.assert_allclose(steps["theta"], administered["theta"], atol=1e-9)
    assert res["status"] == "done" and res["n_items"] == MAX_ITEMS and res["ordinal"]
    assert res["protocol_label"] == "recorded ratings (by item id)"
    assert res["theta"] == pytest.approx(person["theta"], abs=1e-9)
    assert res["se"] == pytest.approx(person["se"], abs=1e-9)
    assert res["stop_reason"] == person["stop_reason"] == "max_items"
    pred = res["prediction"]   # the predicted mean rating: simulate's person row gives the same
    assert [person["score"], person["score_lo"], person["score_hi"]] == \
        pytest.approx([pred["score"], pred["lo"], pred["hi"]], abs=1e-12)
    # one 1-4 scale: every reader gives the ratings and their mean on it, as the CLI prints
    ratings = administered["score"].astype(float)
    assert res["scale"] == [1.0, 4.0] and res["scores"] == ratings.astype(int).tolist()
    assert res["observed_score"] == pytest.approx(ratings.mean())
    assert res["score_sum"] == pytest.approx(ratings.sum())
    assert 1.0 <= res["model_based_score"] <= 4.0
    page = Path(res["report"]).read_text()
    assert (f"observed mean rating (over the items asked, on the rating scale)</td>"
            f"<td>{ratings.mean():.2f}<") in page   # 1-4: 2 decimals (score_digits) and "pending" not in page
    first_row = re.search(r"<tr><td class='num'>1</td>(.*?)</tr>", page).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", first_row)   # item, answer, rating (a bank
    assert cells[2] == f"{ratings.iloc[0]:g}"               # without content: no question,
    assert "<th>question</th>" not in page                  # no key); the first rating
    db = str(out / "runs.sqlite")
    runs = CliRunner().invoke(app, ["runs", "--db", db, "--json"])
    assert runs.exit_code == 0, runs.output
    row = json.loads(runs.output)
    row = row[0] if isinstance(row, list) else row
    assert row["theta"] == pytest.approx(res["theta"]) and row["se"] == pytest.approx(res["se"])
    assert int(row["n_items"]) == MAX_ITEMS
    for key in ("observed_score", "model_based_score", "score_sum"):
        assert row[key] == pytest.approx(res[key]), key
    one = CliRunner().invoke(app, ["runs", "--db", db, "--run", res["run_id"], "--json"])
    assert one.exit_code == 0, one.output
    one = json.loads(one.output)
    assert [s["score"] for s in one["steps"]] == ratings.tolist()   # not mapped twice
    for key in ("observed_score", "model_based_score", "score_sum"):
        assert one["run"][key] == pytest.approx(res[key]), key
    table = CliRunner().invoke(app, ["runs", "--db", db, "--run", res["run_id"]])
    first = next(ln for ln in table.output.splitlines() if administered["item_id"][0] in ln)
    assert first.split()[3] == f"{ratings.iloc[0]:g}"
    from atlascat.live.runner import RunResult

    store = RunStore(out / "runs.sqlite")
    mine = RunResult.from_store(store, res["run_id"])
    assert (mine.observed_score, mine.scale) == (pytest.approx(ratings.mean()), [1.0, 4.0])
    unit = RunResult.from_store(store, res["run_id"], unit=True)   # as stored: the credits
    assert unit.observed_score == pytest.approx(((ratings - 1) / 3).mean())
    assert unit.scale is None and unit.scores == mine.scores


def test_a_command_rates_the_items_as_the_recorded_ratings_and_resumes(root, tmp_path):
    """The rating program asks the same items as the replay; when it crashes on its fourth
    item the run keeps three answers and --resume ends it as if it never failed."""
    replay = tmp_path / "replay"
    _evaluate(root, f"replay:{root / 'ratings.csv'}#m12", replay)
    whole = tmp_path / "whole"   # the model's name seeds its stream: the replay's
    _evaluate(root, _cmd(root, "m12"), whole, "--llm", "m12")
    assert list(_steps(whole)["item_id"]) == list(_steps(replay)["item_id"])
    assert json.loads((whole / "results.json").read_text())[0]["protocol_label"].startswith(
        "rated by your command")
    assert (json.loads((whole / "results.json").read_text())[0]["theta"]
            == pytest.approx(json.loads((replay / "results.json").read_text())[0]["theta"]))
    flag = tmp_path / "crash.flag"
    flag.write_text("")
    broken = tmp_path / "broken"
    msg = _evaluate(root, _cmd(root, "m12", "crash", str(flag)), broken, "--llm", "m12",
                    fails=True)
    assert "the rater crashed" in msg and "can be resumed" in msg
    info = RunStore(broken / "runs.sqlite").list_runs().iloc[0]
    assert info["state"] == "error" and int(info["n_items"]) == 3
    flag.unlink()
    again = CliRunner().invoke(app, ["evaluate", "--resume", info["run_id"], "--db",
                                     str(broken / "runs.sqlite"), "-q"])
    assert again.exit_code == 0, again.output + str(again.exception)
    assert list(_steps(broken)["item_id"]) == list(_steps(whole)["item_id"])
    done = RunStore(broken / "runs.sqlite").get_run(info["run_id"])
    assert done["theta"] == pytest.approx(
        json.loads((whole / "results.json").read_text())[0]["theta"], abs=1e-12)


def test_a_rating_off_the_items_scale_is_one_line(root, tmp_path):
    msg = _evaluate(root, _cmd(root, "m1", "offscale"), tmp_path / "off", fails=True)
    assert "rated 7" in msg and "outside the item's scale 1-4" in msg and "\n" not in msg


@pytest.mark.parametrize("subject", ["completions:http://localhost:1/v1", "hf:gpt2"])
def test_a_subject_asked_by_requests_is_refused_in_one_line(root, tmp_path, subject):
    out = tmp_path / "refused"
    msg = _evaluate(root, subject, out, "--llm", "x", fails=True)
    assert "graded / gpcm bank has none" in msg and "cmd:COMMAND" in msg and "\n" not in msg
    assert not (out / "runs.sqlite").exists()


def test_batch_rounds_are_refused_for_an_ordinal_bank(root, tmp_path):
    msg = _evaluate(root, f"replay:{root / 'ratings.csv'}#m2", tmp_path / "b", "--batch-size",
                    "3", fails=True)
    assert "one item a round" in msg


def test_a_session_snapshot_continues_exactly(root):
    bank = PolyBank.read(root / "bank.csv")
    ratings = pd.read_csv(root / "ratings.csv", index_col=0).loc["m5"]
    config = CATConfig(stopping=Stopping(min_items=0, max_items=8))
    whole = OrdinalCATSession(bank, config, rng=9)
    while (item := whole.next_item()) is not None:
        whole.record(item, ratings[item])
    part = OrdinalCATSession(bank, config, rng=9)
    for _ in range(3):
        item = part.next_item()
        part.record(item, ratings[item])
    snap = json.loads(json.dumps(part.to_dict()))
    resumed = OrdinalCATSession.from_dict(snap, bank)
    while (item := resumed.next_item()) is not None:
        resumed.record(item, ratings[item])
    pd.testing.assert_frame_equal(resumed.history(), whole.history())
    assert (resumed.theta, resumed.se, resumed.stop_reason) == (whole.theta, whole.se,
                                                                 whole.stop_reason)


def test_a_rating_reply_is_any_number_and_text_is_refused():
    got = parse_scores(["a", "b"], '{"item_id": "b", "score": 7}\n{"item_id": "a", "score": 2.5}',
                       "cmd", ratings=True)
    assert [s for s, _ in got] == [2.5, 7]
    with pytest.raises(LiveRunError, match="a rating is a number"):
        parse_scores(["a"], '{"item_id": "a", "score": "high"}', "cmd", ratings=True)


def test_a_gpcm_bank_runs_live_from_python_as_in_memory(root, tmp_path):
    """The service from Python on a generalized partial credit bank: the live run's items,
    ratings and theta are the in-memory test's."""
    from atlascat.catalogue import BankRef
    from atlascat.live.service import LiveRun
    from atlascat.live.subjects import SubjectSpec
    from atlascat.predict.session import subject_generator

    graded = PolyBank.read(root / "bank.csv")
    PolyBank(graded.item_ids, graded.params, "gpcm", graded.levels).write(tmp_path / "gpcm.csv")
    ref = BankRef.from_option(tmp_path / "gpcm.csv")
    config = CATConfig(stopping=Stopping(min_items=0, max_items=MAX_ITEMS))
    subject = SubjectSpec.parse(f"replay:{root / 'ratings.csv'}#m30").build(ref.load())
    live = LiveRun.start(tmp_path / "runs.sqlite", ref, [subject], config=config, seed=4)
    live.run(raise_errors=True)
    row = live.results()[0]
    live.close()                          # the store it opened from the path
    ratings = pd.read_csv(root / "ratings.csv", index_col=0).loc[["m30"]]
    sim = simulate_ordinal_cat(ref.load(), config, responses=ratings,
                               rng=[subject_generator(4, "m30")])
    assert row["items"] == list(sim.administered["item_id"])
    assert row["scores"] == [int(v) for v in sim.administered["score"]]
    assert row["theta"] == pytest.approx(sim.persons["theta"].iloc[0], abs=1e-12)
    # model-based: the mean rating expected at theta, on the items' one scale (1-4)
    expected = ref.load().expected_score(row["theta"])
    assert row["model_based_score"] == pytest.approx(float(np.mean(expected)))
    assert row["scale"] == [1.0, 4.0]


def test_each_examinee_own_stream_asks_what_its_session_asks(root):
    """simulate_ordinal_cat with one generator per examinee, Sympson-Hetter on: every
    examinee is asked what an OrdinalCATSession with its generator asks (an accepted pick is
    settled, so no examinee's draws depend on another's)."""
    from atlascat.cat.config import Exposure
    from atlascat.predict.session import subject_generator

    bank = PolyBank.read(root / "bank.csv")
    ratings = pd.read_csv(root / "ratings.csv", index_col=0).iloc[:12]
    config = CATConfig(stopping=Stopping(min_items=0, max_items=MAX_ITEMS),
                       exposure=Exposure(method="sympson_hetter",
                                         params={"q1": 0.3, "q4": 0.5, "q7": 0.0}))
    sim = simulate_ordinal_cat(bank, config, responses=ratings,
                               rng=[subject_generator(5, m) for m in ratings.index])
    assert "q7" not in set(sim.administered["item_id"])
    for model in ratings.index:
        session = OrdinalCATSession(bank, config, rng=subject_generator(5, model))
        while (item := session.next_item()) is not None:
            session.record(item, ratings.loc[model, item])
        got = sim.administered[sim.administered["subject_id"] == model]
        assert list(got["item_id"]) == list(session.history()["item_id"]), model
        assert got["theta"].iloc[-1] == pytest.approx(session.theta, abs=1e-12)
    with pytest.raises(ConfigError, match="one per examinee"):
        simulate_ordinal_cat(bank, config, responses=ratings, rng=[subject_generator(5, "x")])


def test_the_report_names_the_whole_bank_when_max_items_exceeds_it(root, tmp_path):
    """A budget larger than the bank reads as the bank's size, not as an unreachable 500."""
    out = tmp_path / "whole"
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(root / "bank.csv"), "--subject",
                                 f"replay:{root / 'ratings.csv'}#m7", "--min-items", "3",
                                 "--se-stop", "0.01", "--seed", "3", "-q", "-o", str(out)])
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())[0]
    assert res["n_items"] == N_ITEMS and res["stop_reason"] == "bank_exhausted"
    page = Path(res["report"]).read_text()
    assert f"items 3-{N_ITEMS} (the whole bank)" in page and "-500" not in page


def test_a_boolean_is_no_rating_nor_a_point_on_a_scale():
    """JSON true is 1 on a 0/1 bank, but not a judge's rating (it was read as the rating 1)
    nor a score on a folder's --score-range scale (it was read as its bottom)."""
    assert parse_scores(["a"], '{"item_id": "a", "score": true}', "cmd")[0][0] == 1
    with pytest.raises(LiveRunError, match=r"scored true \(as printed\), not a number"):
        parse_scores(["a"], '{"item_id": "a", "score": true}', "cmd", ratings=True)
    with pytest.raises(LiveRunError, match=r"on the metric's scale \[1, 10\]"):
        parse_scores(["a"], '{"item_id": "a", "score": false}', "cmd", score_range=(1, 10))


def test_a_rating_off_the_scale_stops_a_run_that_resumes(root, tmp_path):
    """The run stops saved, its one line says how to resume, as for a folder's score."""
    msg = _evaluate(root, _cmd(root, "m1", "offscale"), tmp_path / "off", fails=True)
    assert "can be resumed" in msg and "--resume" in msg and "\n" not in msg


def test_a_recorded_rating_off_the_scale_is_refused_before_asking(root, tmp_path):
    """A replayed rating off its item's scale is the recording's: refused before the run
    starts, as `atlas simulate` refuses it, naming the model and item (no run stored, no
    resume offered: it would replay it again); a command's is fixable and offers one."""
    off = pd.read_csv(root / "ratings.csv", index_col=0)
    off.loc["m1", "q3"] = 7
    off.to_csv(tmp_path / "off.csv")
    msg = _evaluate(root, f"replay:{tmp_path / 'off.csv'}#m1", tmp_path / "o", fails=True)
    assert "rating 7 of model 'm1' on item 'q3' is outside the item's scale 1-4" in msg
    assert "resume" not in msg and "\n" not in msg
    assert not (tmp_path / "o" / "runs.sqlite").exists()
    _evaluate(root, f"replay:{tmp_path / 'off.csv'}#m2", tmp_path / "m2")   # others replay
