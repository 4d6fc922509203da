"""Subjects that score items by id (``cmd:COMMAND``, ``replay:`` on a folder without requests):
a bank folder built from a response matrix asked live, every answer stored, resumable."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.bankdir import build_bank
from atlascat.cli import app
from atlascat.errors import ConfigError, LiveRunError
from atlascat.live.subjects import (CommandSubject, RecordedAnswers, SubjectError,
                                    is_item_scored, subject_from_spec)
from atlascat.live.subjects.itemscored import parse_scores

SCORER = '''\
import json, os, sys
import pandas as pd
answers = pd.read_csv(sys.argv[1], index_col=0).loc[sys.argv[2]]
calls = sys.argv[3] if len(sys.argv) > 3 else None
for n, line in enumerate(sys.stdin, 1):
    if calls and n == 11 and os.path.exists(calls + ".fail"):
        sys.exit("the harness crashed")
    item = json.loads(line)["item_id"]
    print(json.dumps({"item_id": item, "score": int(answers[item]), "note": "ok"}))
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A bank folder built from a simulated matrix of 30 source models x 80 items (no
    requests), and 4 held-out models' answers."""
    rng = np.random.default_rng(5)
    a, b = rng.lognormal(0, 0.3, 80), rng.normal(0, 1, 80)
    theta = rng.normal(0, 1, 34)
    y = (rng.random((34, 80)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(int)
    root = tmp_path_factory.mktemp("itemscored")
    cols = [f"q{j}" for j in range(80)]
    pd.DataFrame(y[:30], index=[f"src{i}" for i in range(30)], columns=cols).rename_axis(
        "model").to_csv(root / "source.csv")
    pd.DataFrame(y[30:], index=[f"new{i}" for i in range(4)], columns=cols).rename_axis(
        "model").to_csv(root / "targets.csv")
    (root / "scorer.py").write_text(SCORER)
    build_bank(root / "source.csv", root / "bank", folds=0)
    return root


def _cmd(root: Path, model: str, calls: Path | None = None) -> str:
    args = [sys.executable, str(root / "scorer.py"), str(root / "targets.csv"), model]
    return "cmd:" + shlex.join(args + ([str(calls)] if calls else []))


def _evaluate(root: Path, subject: str, out: Path, *extra) -> dict:
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(root / "bank"), "--subject", subject,
                                 "--max-items", "20", "-q", "-o", str(out), *extra])
    assert r.exit_code == 0, r.output + str(r.exception)
    return json.loads((out / "results.json").read_text())[0]


def _steps(out: Path) -> pd.DataFrame:
    from atlascat.live.store import RunStore

    store = RunStore(out / "runs.sqlite")
    return store.steps(store.list_runs()["run_id"].iloc[0])


# ----------------------------------------------------------------------------- replies
def test_replies_are_read_by_item_id_in_any_order():
    got = parse_scores(["a", "b", "c"], '{"item_id": "c", "score": 1}\n\n'
                       '{"item_id": "a", "score": false, "x": 2}\n{"item_id": "b", "score": 1.0}',
                       "cmd")
    assert [s for s, _ in got] == [0, 1, 1] and '"x": 2' in got[0][1]


@pytest.mark.parametrize("text, words", [
    ("0\n1", "not a JSON object with item_id and score"),
    ('{"item_id": "a", "score": 2}\n{"item_id": "b", "score": 1}', "a score is 0 or 1"),
    ('{"item_id": "a", "score": 100}\n{"item_id": "b", "score": 0}',
     r"a percent\? print it / 100, or build the folder with --score-range 0 100"),
    ('{"item_id": "a", "score": 1}', "no score for 1 of the 2"),
    ('{"item_id": "a", "score": 1}\n{"item_id": "a", "score": 0}', "scored twice"),
    ('{"item_id": "z", "score": 1}', "was not asked"),
])
def test_a_bad_reply_is_one_clear_line(text, words):
    with pytest.raises(LiveRunError, match=words) as e:
        parse_scores(["a", "b"], text, "the command 'x'")
    assert "\n" not in str(e.value)


def test_a_command_that_fails_is_a_resumable_subject_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        CommandSubject("no-such-program-atlas --x")
    crash = CommandSubject([sys.executable, "-c", "import sys; sys.exit('disk full')"])
    # the process may exit before or after atlas writes the round to it (a busy machine): both
    # say the status and the command's last line on standard error
    with pytest.raises(SubjectError, match=r"status 1 (after scoring 0 of the 1 item\(s\) just "
                                           r"sent to it|before reading the items): disk full"):
        crash.score_items(["a"])
    slow = CommandSubject([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1)
    with pytest.raises(SubjectError, match="within 1 s"):
        slow.score_items(["a"])


def test_the_command_runs_once_for_every_round(tmp_path):
    """One process answers every round (a harness loads its model once); after a failure the
    next round starts a new one."""
    starts = tmp_path / "starts"
    prog = tmp_path / "p.py"
    prog.write_text(
        "import json, sys\n"
        f"open({str(starts)!r}, 'a').write('x')\n"
        "for line in sys.stdin:\n"
        "    item = json.loads(line)['item_id']\n"
        "    if item == 'boom':\n"
        "        sys.exit('boom')\n"
        "    print(json.dumps({'item_id': item, 'score': int(item.endswith('1'))}))\n")
    subj = CommandSubject([sys.executable, str(prog)], "m")
    try:
        assert [s for s, _ in subj.score_items(["q1", "q2"])] == [1, 0]
        assert [s for s, _ in subj.score_items(["q11"])] == [1]
        assert starts.read_text() == "x"
        with pytest.raises(SubjectError, match="after scoring 0 of the 1 item.*boom"):
            subj.score_items(["boom"])
        assert [s for s, _ in subj.score_items(["q3"])] == [0]
        assert starts.read_text() == "xx"
    finally:
        subj.close()


# ----------------------------------------------------------------------------- live runs
def test_replay_asks_a_matrix_folder_by_item_id_and_every_reader_agrees(folder, tmp_path):
    """``replay:`` on a folder built from a matrix: the folder's predictor asks exactly
    ``--max-items`` items by id, each scored as recorded; one prediction in results.json,
    :func:`predict_run` and ``atlas runs``."""
    from atlascat.live.service import predict_run
    from atlascat.live.report import describe_prediction
    from atlascat.live.store import RunStore

    subj = subject_from_spec(f"replay:{folder / 'targets.csv'}#new1", bank=None)
    assert not is_item_scored(subj)               # a bank with requests: asked by request
    from atlascat.bankdir import load_bank_dir

    bank = load_bank_dir(folder / "bank").bank
    assert isinstance(subject_from_spec(f"replay:{folder / 'targets.csv'}#new1", bank=bank),
                      RecordedAnswers)
    out = tmp_path / "run"
    row = _evaluate(folder, f"replay:{folder / 'targets.csv'}#new1", out)
    lb = row["prediction"]
    assert row["protocol"] == "recorded" and row["n_items"] == 20
    assert lb["design"] == "benchmark predictor" and 0 <= lb["lo"] <= lb["score"] <= lb["hi"] <= 1
    truth = pd.read_csv(folder / "targets.csv", index_col=0).loc["new1"]
    steps = _steps(out)
    assert len(set(steps["item_id"])) == 20
    assert (steps["score"].astype(int).to_numpy()
            == truth[steps["item_id"].astype(str)].to_numpy()).all()
    again = predict_run(RunStore(out / "runs.sqlite"), row["run_id"])
    assert (again["score"], again["lo"], again["hi"]) == (lb["score"], lb["lo"], lb["hi"])
    runs = CliRunner().invoke(app, ["runs", "--db", str(out / "runs.sqlite")])
    assert runs.exit_code == 0 and describe_prediction(lb, short=True) in runs.output
    # the adaptive test, scored by the folder's link, asks by id as well
    cat = _evaluate(folder, f"replay:{folder / 'targets.csv'}#new1", tmp_path / "cat",
                    "--design", "adaptive")
    assert cat["protocol"] == "recorded" and 0 < cat["n_items"] <= 20
    assert 0 <= cat["prediction"]["lo"] <= cat["prediction"]["hi"] <= 1


def test_a_command_scores_the_items_as_the_recorded_answers_would(folder, tmp_path):
    """The user's program scoring items by id gives the run the replay of the same answers
    gives: the same items, scores and prediction (same seed)."""
    rep = _evaluate(folder, f"replay:{folder / 'targets.csv'}#new2", tmp_path / "rep")
    cmd = _evaluate(folder, _cmd(folder, "new2"), tmp_path / "cmd", "--llm", "new2")
    assert cmd["protocol"] == "item command" and cmd["model"] == "new2"
    assert list(_steps(tmp_path / "cmd")["item_id"]) == list(_steps(tmp_path / "rep")["item_id"])
    assert cmd["prediction"]["score"] == rep["prediction"]["score"]
    assert '"note": "ok"' in _steps(tmp_path / "cmd")["answer"].iloc[0]
    page = (tmp_path / "cmd" / "reports" / f"{cmd['run_id']}.html").read_text()
    assert "scored by your command" in page and "scorer.py" in page   # the command is named
    assert "zero-shot, max_tokens" not in page                         # no prompt was sent
    assert "&quot;prompt&quot;" not in page and "&quot;predictor&quot;" in page   # nor its
    assert "&quot;cat&quot;" not in page     # settings; the predictor's, not the adaptive test's


def test_one_command_asks_several_models_and_they_compare(folder, tmp_path):
    """``{model}`` in the command: one process per --llm, run concurrently; each run is scored
    from its own model's answers, and ``atlas compare-models`` takes two of them."""
    spec = "cmd:" + shlex.join([sys.executable, str(folder / "scorer.py"),
                                str(folder / "targets.csv")]) + " {model}"
    out = tmp_path / "two"
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(folder / "bank"), "--subject", spec,
                                 "--llm", "new0", "--llm", "new1", "--max-items", "20", "-q",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output + str(r.exception)
    rows = json.loads((out / "results.json").read_text())
    assert [x["model"] for x in rows] == ["new0", "new1"]
    from atlascat.live.store import RunStore

    store = RunStore(out / "runs.sqlite")
    truth = pd.read_csv(folder / "targets.csv", index_col=0)
    for x in rows:
        st = store.steps(x["run_id"])
        assert (st["score"].astype(int).to_numpy()
                == truth.loc[x["model"], st["item_id"].astype(str)].to_numpy()).all()
    cmp = CliRunner().invoke(app, ["compare-models", rows[0]["run_id"], rows[1]["run_id"],
                                   "--db", str(out / "runs.sqlite"), "--json"])
    assert cmp.exit_code == 0, cmp.output
    row = json.loads(cmp.output)["rows"][0]
    first, second = (100 * x["prediction"]["score"] for x in rows)
    assert row["first"] == pytest.approx(first) and row["second"] == pytest.approx(second)
    assert row["difference"] == pytest.approx(first - second)
    assert row["lo"] <= row["difference"] <= row["hi"]
    one = CliRunner().invoke(app, ["evaluate", "--bank", str(folder / "bank"), "--subject",
                                   "cmd:" + shlex.join([sys.executable, "x.py"]), "--llm", "a",
                                   "--llm", "b", "-o", str(tmp_path / "no")])
    assert one.exit_code != 0 and "{model}" in str(one.exception)


def test_a_command_run_resumes_after_the_command_fails(folder, tmp_path):
    """The command exits 1 on its eleventh item (the third round of 5): the run is saved with
    the answers so far, and
    --resume ends it with the items and prediction of a run that never failed."""
    # one model name for both runs (the draws are seeded by the seed and the model's name)
    whole = _evaluate(folder, _cmd(folder, "new3"), tmp_path / "whole", "--batch-size", "5",
                      "--llm", "new3")
    calls = tmp_path / "calls"
    Path(str(calls) + ".fail").write_text("")
    out = tmp_path / "broken"
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(folder / "bank"), "--subject",
                                 _cmd(folder, "new3", calls), "--max-items", "20",
                                 "--batch-size", "5", "--llm", "new3", "-q", "-o", str(out)])
    assert r.exit_code != 0 and "the harness crashed" in r.output + str(r.exception)
    from atlascat.live.store import RunStore

    info = RunStore(out / "runs.sqlite").list_runs().iloc[0]
    assert info["state"] == "error" and int(info["n_items"]) == 10
    Path(str(calls) + ".fail").unlink()
    again = CliRunner().invoke(app, ["evaluate", "--resume", info["run_id"], "--db",
                                     str(out / "runs.sqlite"), "-q"])
    assert again.exit_code == 0, again.output + str(again.exception)
    steps = _steps(out)
    assert list(steps["item_id"]) == list(_steps(tmp_path / "whole")["item_id"])
    from atlascat.live.service import predict_run

    store = RunStore(out / "runs.sqlite")
    assert predict_run(store, info["run_id"])["score"] == whole["prediction"]["score"]


@pytest.mark.parametrize("design", ["predictor", "adaptive"])
def test_a_run_cut_short_lists_its_prediction_so_far(folder, tmp_path, design):
    """A run that stopped before its end (the command failed on its eleventh item; a killed
    or Ctrl-C'd run is interrupted) is listed by ``atlas runs`` with the prediction of the
    answers it recorded, with its interval, and how far it got, never a bare dash."""
    from atlascat.live.report import describe_prediction
    from atlascat.live.service import predict_run
    from atlascat.live.store import RunStore

    calls = tmp_path / "calls"
    Path(str(calls) + ".fail").write_text("")
    out = tmp_path / "broken"
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(folder / "bank"), "--subject",
                                 _cmd(folder, "new3", calls), "--max-items", "20",
                                 "--batch-size", "5", "--llm", "new3", "--design", design,
                                 "-q", "-o", str(out)]
                       + (["--min-items", "20"] if design == "adaptive" else []))
    assert r.exit_code != 0 and "the harness crashed" in r.output + str(r.exception)
    store = RunStore(out / "runs.sqlite")
    run_id = store.list_runs()["run_id"].iloc[0]
    lb = predict_run(store, run_id)
    assert lb["partial"] and (lb["state"], lb["answered"]) == ("error", 10)
    assert 0 <= lb["lo"] <= lb["score"] <= lb["hi"] <= 1
    shown = CliRunner().invoke(app, ["runs", "--db", str(out / "runs.sqlite")]).output
    assert describe_prediction(lb, short=True) in " ".join(shown.split())
    assert "stopped by an error after 10 items" in describe_prediction(lb, short=True)
    store.claim(run_id)            # a run in progress, then stopped as Ctrl-C stops it
    store.interrupt_run(run_id)
    runs = json.loads(CliRunner().invoke(app, ["runs", "--db", str(out / "runs.sqlite"),
                                               "--json"]).output)
    again = runs[0]["prediction"]
    assert runs[0]["state"] == "interrupted" and again["score"] == lb["score"]
    assert describe_prediction(again).endswith(", interrupted after 10 items")


def test_a_folder_without_requests_says_how_to_ask_it(folder, tmp_path):
    # (simulate: is asked by id there: tests/test_simulated_by_id.py)
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(folder / "bank"), "--subject",
                                 "openai:http://127.0.0.1:9", "--llm", "m", "-o",
                                 str(tmp_path / "x")])
    assert r.exit_code != 0
    msg = str(r.exception) + r.output
    assert "cmd:COMMAND" in msg and "replay:" in msg


def test_a_suite_run_refuses_an_item_scored_subject(folder):
    from atlascat.live.store import RunStore
    from atlascat.live.suite_run import start_suite_run

    subj = RecordedAnswers(folder / "targets.csv", "new0")
    with pytest.raises(ConfigError, match="one bank folder at a time"):
        start_suite_run(RunStore(folder / "suite.sqlite"), "openllm-v1", subj)


@pytest.mark.parametrize("subject", ["hf:no-such-model", "lmeval:hf,pretrained=x",
                                     "completions:http://127.0.0.1:9/v1"])
def test_a_matrix_folder_refuses_a_request_subject_before_loading_it(subject):
    """A bank without item content is refused by a subject that asks requests before the
    subject is made: no optional package is imported, no server is called."""
    from atlascat.errors import BankError
    from atlascat.irt.bank import ItemBank
    from atlascat.live.subjects import SubjectSpec

    bare = ItemBank(["1", "2"], [1.0, 1.0], [0.0, 1.0])
    with pytest.raises(BankError, match="no item content .* cmd:COMMAND"):
        SubjectSpec.parse(subject, "m").build(bare)


@pytest.mark.parametrize("bad", ["'hello'", "json.dumps({'item_id': 'zzz', 'score': 1})"])
def test_a_command_that_replies_out_of_step_stops_a_run_that_resumes(folder, tmp_path, bad):
    """A reply line that is not the round's score (text, an item not asked) stops the run as a
    failed command does: saved with the answers so far, the message says how to resume, and
    --resume with the program fixed ends it as a run that never failed."""
    flag = tmp_path / "broken"
    flag.write_text("")
    prog = tmp_path / "p.py"
    prog.write_text(
        "import json, os, sys\n"
        "import pandas as pd\n"
        f"answers = pd.read_csv({str(folder / 'targets.csv')!r}, index_col=0).loc['new3']\n"
        "for n, line in enumerate(sys.stdin, 1):\n"
        "    item = json.loads(line)['item_id']\n"
        f"    if n == 6 and os.path.exists({str(flag)!r}):\n"
        f"        print({bad}, flush=True)\n"
        "        continue\n"
        "    print(json.dumps({'item_id': item, 'score': int(answers[item])}), flush=True)\n")
    spec = "cmd:" + shlex.join([sys.executable, str(prog)])
    whole = _evaluate(folder, _cmd(folder, "new3"), tmp_path / "whole", "--llm", "new3")
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(folder / "bank"), "--subject", spec,
                                 "--llm", "new3", "--max-items", "20", "-q", "-o", str(out)])
    assert r.exit_code != 0
    from atlascat.live.store import RunStore

    info = RunStore(out / "runs.sqlite").list_runs().iloc[0]
    assert info["state"] == "error" and int(info["n_items"]) == 5
    said = " ".join((r.output + str(r.exception)).split())
    assert "saved with 5 answered item(s)" in said and f"--resume {info['run_id']}" in said
    flag.unlink()
    again = CliRunner().invoke(app, ["evaluate", "--resume", info["run_id"], "--db",
                                     str(out / "runs.sqlite"), "-q"])
    assert again.exit_code == 0, again.output + str(again.exception)
    assert list(_steps(out)["item_id"]) == list(_steps(tmp_path / "whole")["item_id"])
    from atlascat.live.service import predict_run

    assert (predict_run(RunStore(out / "runs.sqlite"), info["run_id"])["score"]
            == whole["prediction"]["score"])


@pytest.mark.parametrize("printed", ["NaN", '"37"'])   # null: no score (test_skipped_items)
def test_a_score_that_is_no_number_on_a_scale_says_so(printed):
    with pytest.raises(SubjectError, match=r"scored .* \(as printed\), not a number; print each "
                                           r"score on the metric's scale \[0, 100\]"):
        parse_scores(["a"], '{"item_id": "a", "score": %s}' % printed, "the command 'x'",
                     score_range=(0, 100))


@pytest.mark.parametrize("command", ["simulate", "evaluate"])
@pytest.mark.parametrize("n", ["0", "1", "-3"])
def test_a_predictor_budget_below_two_names_max_items(folder, tmp_path, capsys, command, n):
    """--max-items below 2 on a folder's predictor is one line naming the option (simulate
    does not fall back to the folder's budget for 0), and nothing is written."""
    from atlascat.cli import main

    out = tmp_path / "out"
    args = (["simulate", str(folder / "targets.csv")] if command == "simulate" else
            ["evaluate", "--subject", f"replay:{folder / 'targets.csv'}#new1"])
    assert main([*args, "--bank", str(folder / "bank"), "--max-items", n, "-q",
                 "-o", str(out)]) == 2
    assert not out.exists()
    err = " ".join(capsys.readouterr().err.split())
    assert "--max-items must be at least 2 for a bank folder's predictor" in err


def test_a_folder_evaluated_twice_keeps_both_runs_in_results_json(folder, tmp_path, capsys):
    """Two models evaluated one after the other into one -o folder: results.json keeps both
    rows (as runs.sqlite and reports/ do), and compare-models given the folder asks which run
    rather than taking the last one."""
    from atlascat.cli import main

    out = tmp_path / "runs"
    for model in ("new0", "new1"):
        assert main(["evaluate", "--bank", str(folder / "bank"), "--subject",
                     f"replay:{folder / 'targets.csv'}#{model}", "--max-items", "10", "-q",
                     "-o", str(out)]) == 0
    rows = json.loads((out / "results.json").read_text())
    assert [r["model"] for r in rows] == ["new0", "new1"]
    assert len({r["run_id"] for r in rows}) == 2
    capsys.readouterr()
    assert main(["compare-models", str(out), rows[0]["run_id"], "--db",
                 str(out / "runs.sqlite")]) == 2
    assert f"holds 2 runs ({rows[0]['run_id']}, {rows[1]['run_id']})" in capsys.readouterr().err
