"""``atlas evaluate --suite``: the whole leaderboard in one live run (issue 18, deliverable 4).

One run id and one resume for all six benchmarks; the printed table, ``results.json``, the HTML
page and ``atlas runs`` carry the same numbers; a SIGKILLed run resumes into the uninterrupted
run's result; Ctrl-C stops like a single-bank run; ``--bank`` twice points to ``--suite``.
Subjects: ``simulate:``, the mock server (chat, and the toy LM's log-likelihoods), a callable.
"""
from __future__ import annotations

import html
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from conftest import HANG_S

from atlascat.cli import main
from atlascat.live.mockserver import MockOpenAIServer
from atlascat.live.report import describe_prediction
from atlascat.live.store import RunStore
from atlascat.live.subjects import CallableSubject
from atlascat.catalogue import BankRef
from atlascat.live.service import LiveRun
from atlascat.live.suite_run import suite_result
from atlascat.live.suite_session import composite_for, split_item
from atlascat.live.toylm import ToyLM
from atlascat.suite import SuiteConfig
from test_live_cli_ux import _atlas as _atlas_in

ROOT = Path(__file__).resolve().parents[1]
SHORT = ["--max-items", "24", "--min-items", "12"]


@pytest.fixture(scope="module")
def bank():
    return composite_for("openllm-v1")


def _atlas(*args, wait=True):
    return _atlas_in(*args, cwd=ROOT, wait=wait)


def _printed_table(out: str) -> list[dict]:
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 5 and re.fullmatch(r"[\d.]+-[\d.]+", parts[2]):
            rows.append(dict(zip(["benchmark", "predicted", "95% interval", "items",
                                  "percentile"], parts)))
    return rows


def _html_table(page: str) -> list[dict]:
    body = page.split("<table class='suite'>", 1)[1].split("</table>", 1)[0]
    rows = []
    for tr in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1]):
        rows.append({c: html.unescape(v) for c, v in
                     re.findall(r"data-col='([^']+)'>(.*?)</td>", tr)})
    return rows


def test_simulated_run_end_to_end_one_number_everywhere(tmp_path, capsys):
    out_dir = tmp_path / "run"
    code = main(["evaluate", "--suite", "openllm-v1", "--subject", "simulate:0.5", "-o",
                 str(out_dir), "-q", *SHORT])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    saved = json.loads((out_dir / "results.json").read_text())
    assert len(saved) == 1
    row = saved[0]
    assert row["status"] == "done" and row["suite"] == "openllm-v1" and row["n_items"] == 24
    names = ["arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k"]
    assert [b["name"] for b in row["benchmarks"]] == names
    assert sum(b["items"] for b in row["benchmarks"]) == row["n_items"]
    # every asked item is a <member>/<item_id> of the composite bank, counted under its member
    members = [split_item(i)[0] for i in row["items"]]
    assert {m: members.count(m) for m in names} == {b["name"]: b["items"]
                                                    for b in row["benchmarks"]}
    avg = row["average"]
    assert avg["lo"] <= avg["score"] <= avg["hi"] and 0 <= avg["percentile"] <= 100
    assert row["prediction"] == avg
    # a suite has no theta: no field named theta, no model-based score of one bank
    assert not {"theta", "se", "model_based_score", "model_based_accuracy", "accuracy"} & set(row)
    assert 0 < row["se_points"] < 10
    # printed table == results.json table == the numbers themselves
    table = row["table"]
    assert _printed_table(captured.out) == [{k: str(v) for k, v in r.items()} for r in table]
    for r, b in zip(table, row["benchmarks"]):
        assert (r["benchmark"], r["predicted"], r["95% interval"], r["items"]) == (
            b["name"], f"{100 * b['score']:.1f}",
            f"{100 * b['lo']:.1f}-{100 * b['hi']:.1f}", b["items"])
    assert table[-1] == {"benchmark": "average", "predicted": f"{100 * avg['score']:.1f}",
                         "95% interval": f"{100 * avg['lo']:.1f}-{100 * avg['hi']:.1f}",
                         "items": row["n_items"], "percentile": f"{avg['percentile']:.0f}"}
    assert describe_prediction(avg) in captured.out
    # the leaderboard models that answered most alike (the neighbour correction's), on the page
    near = row["nearest_models"]
    assert len(near) == 5 and all(0.0 <= n["agreement"] <= 1.0 for n in near)
    assert [n["agreement"] for n in near] == sorted((n["agreement"] for n in near), reverse=True)
    # the HTML page shows exactly that table
    page = Path(row["report"]).read_text()
    assert Path(row["report"]) == (out_dir / "reports" / f"{row['run_id']}.html").resolve()
    assert _html_table(page) == [{k: str(v) for k, v in r.items()} for r in table]
    assert html.escape(describe_prediction(avg)) in page
    assert "most like: " + html.escape(near[0]["model"]) in page
    text = html.unescape(page)
    summary = text.split("<h2>Trajectory</h2>")[0].replace(row["model"], "")  # simulated(theta=..)
    assert "theta" not in summary and "model-based" not in summary and "None" not in summary
    assert text.count(describe_prediction(avg)) == 1          # one interval for the average
    assert f"protocol: {row['protocol_label']}" in text         # as the CLI says it
    assert "predicted average (%)" in text and "ability theta" not in text
    # atlas runs: the same average in its leaderboard column
    db = out_dir / "runs.sqlite"
    assert main(["runs", "--db", str(db), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) == 1 and listed[0]["run_id"] == row["run_id"]
    assert listed[0]["prediction"] == avg and listed[0]["bank_ref"] == "suite:openllm-v1"
    assert listed[0]["theta"] is None and listed[0]["se"] is None
    assert main(["runs", "--db", str(db)]) == 0
    assert describe_prediction(avg, short=True) in capsys.readouterr().out
    # atlas runs --run -o rewrites the page with the same table
    assert main(["runs", "--db", str(db), "--run", row["run_id"], "-o",
                 str(tmp_path / "page.html"), "--json"]) == 0
    capsys.readouterr()
    assert _html_table((tmp_path / "page.html").read_text()) == _html_table(page)


def test_members_at_chance_are_warned_everywhere(tmp_path, capsys):
    out_dir = tmp_path / "weak"
    code = main(["evaluate", "--suite", "openllm-v1", "--subject", "simulate:-3", "-o",
                 str(out_dir), "-q", *SHORT])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    row = json.loads((out_dir / "results.json").read_text())[0]
    warned = {b["name"]: b["warning"] for b in row["benchmarks"] if b.get("warning")}
    assert {"arc", "hellaswag", "mmlu"} <= set(warned)
    assert all(w.startswith("its 95% interval (") and "down to chance (" in w
               and w.endswith("the score may be no better than guessing") for w in warned.values())
    page = html.unescape(Path(row["report"]).read_text())
    for name, w in warned.items():
        assert f"warning: {name}: {w}" in captured.err
        assert f"warning: {name}: {w}" in page


def test_sigkill_mid_run_then_resume_gives_the_uninterrupted_result(bank, tmp_path, capsys):
    common = ["--suite", "openllm-v1", "--llm", "mock", "--seed", "2", *SHORT, "--json"]
    with MockOpenAIServer(bank, 0.3, seed=5) as srv:
        code = main(["evaluate", "--subject", f"openai:{srv.url}", *common,
                     "--db", str(tmp_path / "ref.sqlite")])
        ref = json.loads(capsys.readouterr().out)[0]
    assert code == 0 and ref["status"] == "done" and ref["n_items"] >= 12

    box, kill_at = {}, 9  # in the second round of 6

    def fault(n, item_id, times_seen):
        if n == kill_at and "p" in box:
            os.kill(box["p"].pid, signal.SIGKILL)
            return "drop"
        return None

    db = tmp_path / "killed.sqlite"
    with MockOpenAIServer(bank, 0.3, seed=5, fault=fault) as srv:
        box["p"] = _atlas("evaluate", "--subject", f"openai:{srv.url}", *common, "--db", db,
                          "--max-concurrency", "1", wait=False)
        box["p"].communicate(timeout=HANG_S)
        assert box["p"].returncode == -signal.SIGKILL
        runs = RunStore(db).list_runs()
        assert len(runs) == 1 and runs["state"][0] == "interrupted"
        assert runs["n_items"][0] == 6 and runs["pending"][0] == 6
        rid = runs["run_id"][0]
        code = main(["evaluate", "--resume", rid, "--db", str(db), "--json"])
        res = json.loads(capsys.readouterr().out)[0]
    assert code == 0
    assert res["run_id"] == rid and res["status"] == "done"
    for key in ("items", "scores", "n_items", "average", "benchmarks", "table", "se_points"):
        assert res[key] == ref[key], key
    assert "theta" not in res and "se" not in res  # a suite's estimate is its average
    # the killed process stopped at its 9th request (the second round), nothing after it
    assert sum(e["status"] == "dropped" for e in srv.log) == 1
    assert {e["item_id"] for e in srv.log if e["status"] == 200} == set(res["items"])
    assert len(RunStore(db).list_runs()) == 1


def test_sigint_stops_after_the_round_and_resume_finishes_the_same_run(bank, tmp_path, capsys):
    run_dir = tmp_path / "run"
    db = run_dir / "runs.sqlite"
    with MockOpenAIServer(bank, 0.5, seed=7, hang_s=0.1, fault=lambda n, i, t: "hang") as srv:
        proc = _atlas("evaluate", "--suite", "openllm-v1", "--subject", f"openai:{srv.url}",
                      "--llm", "mock", *SHORT, "-o", run_dir, wait=False)
        deadline = time.time() + 60
        while time.time() < deadline and len(srv.log) < 3:
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=HANG_S)
        assert proc.returncode == 130, err
        runs = RunStore(db).list_runs()
        rid = runs["run_id"][0]
        assert runs["state"][0] == "interrupted" and runs["pending"][0] == 0
        assert 1 <= runs["n_items"][0] < 24
        assert f"--resume {rid}" in err and "Traceback" not in err
        assert not (run_dir / "results.json").exists()
        assert main(["evaluate", "--resume", rid, "--db", str(db), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)[0]
    assert res["run_id"] == rid and res["status"] == "done" and res["n_items"] == 24
    saved = json.loads((run_dir / "results.json").read_text())
    assert [r["run_id"] for r in saved] == [rid]
    assert saved[0]["table"] == res["table"]
    assert Path(res["report"]) == (run_dir / "reports" / f"{rid}.html").resolve()
    sent = [e["item_id"] for e in srv.log]
    assert len(sent) == len(set(sent)) == 24  # no item asked twice


def test_toy_lm_log_likelihood_protocol(tmp_path, capsys):
    with MockOpenAIServer(lm=ToyLM(seed=1)) as srv:
        code = main(["evaluate", "--suite", "openllm-v1", "--subject", f"completions:{srv.url}",
                     "--llm", "toy", "--db", str(tmp_path / "t.sqlite"), "--max-items", "12",
                     "--min-items", "6", "--json"])
    res = json.loads(capsys.readouterr().out)[0]
    assert code == 0 and res["status"] == "done" and res["protocol"] == "leaderboard"
    assert res["n_items"] == 12 and res["protocol_label"].startswith("leaderboard")
    assert sum(b["items"] for b in res["benchmarks"]) == 12


def test_callable_subject_library_run_and_resume(tmp_path):
    def always_a(item, prompt):
        return "A" if item["choices"] else "#### 0"

    store = RunStore(tmp_path / "c.sqlite", synchronous="NORMAL")
    subject = CallableSubject(always_a, name="always-a")
    suite = BankRef.from_option("openllm-v1", kinds=("suite",))
    live = LiveRun.start(store, suite, [subject], config=SuiteConfig(max_items=12, min_items=6))
    assert [j.kind for j in live.jobs] == ["suite"]
    live.run()
    res = live.results()[0]
    assert res["status"] == "done" and res["n_items"] == 12 and res["protocol"] == "approximate"
    assert suite_result(store, res["run_id"]) == res
    # a finished run resumes to the same result
    again = LiveRun.resume(store, [res["run_id"]], subject_for=lambda desc, bank: subject)
    again.run()
    assert again.results()[0] == res


def test_bank_twice_points_to_suite(capsys):
    code = main(["evaluate", "--bank", "arc", "--bank", "gsm8k", "--subject", "simulate:0"])
    err = capsys.readouterr().err
    assert code != 0 and "--bank was given 2 times" in err and "--suite openllm-v1" in err


@pytest.mark.parametrize("args, words", [
    (["--suite", "openllm-v1", "--bank", "arc", "--subject", "simulate:0"], "drop --bank"),
    (["--suite", "openllm-v1", "--subject", "simulate:0", "--se-stop", "0.2"], "--target-se"),
    (["--bank", "arc", "--subject", "simulate:0", "--target-se", "1"], "--suite"),
    (["--suite", "no-such-suite", "--subject", "simulate:0"], "openllm-v1"),
])
def test_suite_option_errors_leave_nothing_behind(args, words, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["evaluate", *args, "-o", str(out)]) != 0
    assert words in capsys.readouterr().err
    assert not out.exists()


def _suite_matrices(tmp_path, model, blank=()):
    """Each member's bundled matrix cut to ``model`` and one other model, as files; the
    members in ``blank`` without ``model``'s row; returns ({member: path}, {suite item: 0/1})."""
    import numpy as np

    from atlascat.catalogue import load_responses

    paths, answers = {}, {}
    for name in ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k"):
        rm = load_responses(name)
        ids = [str(s) for s in rm.subject_ids]
        keep = [i for i, s in enumerate(ids) if s != model][:1]
        keep += [] if name in blank else [ids.index(model)]
        sub = rm.subset(subjects=np.isin(np.arange(len(ids)), keep))
        paths[name] = tmp_path / f"{name}.csv"
        sub.write(paths[name])
        if name not in blank:
            row = sub.values[[str(s) for s in sub.subject_ids].index(model)]
            answers.update({f"{name}/{i}": v for i, v in zip(sub.item_ids, row)})
    return paths, answers


def test_replay_on_the_suite_asks_the_recorded_answers_and_skips_a_member_without(
        tmp_path, capsys):
    model = "fblgit/una-llama-7b"
    paths, answers = _suite_matrices(tmp_path, model, blank=("gsm8k",))
    spec = ",".join(f"{n}={p}" for n, p in paths.items())
    db = tmp_path / "r.sqlite"
    code = main(["evaluate", "--suite", "openllm-v1", "--subject", f"replay:{spec}#{model}",
                 "--db", str(db), *SHORT, "--json"])
    res = json.loads(capsys.readouterr().out)[0]
    assert code == 0 and res["status"] == "done" and res["n_items"] == 24
    assert res["protocol"] == "leaderboard"
    assert all(not i.startswith("gsm8k/") for i in res["items"])   # no answer: never asked
    assert [float(answers[i]) for i in res["items"]] == [float(s) for s in res["scores"]]
    gsm8k = next(b for b in res["benchmarks"] if b["name"] == "gsm8k")
    assert gsm8k["items"] == 0 and gsm8k["score"] is not None    # predicted from the others
    assert gsm8k["warning"] == "not asked: predicted from the other benchmarks' answers"
    assert all("warning" not in b or b["items"] == 0 or "not asked" not in b["warning"]
               for b in res["benchmarks"])
    # the blanks are known before the first pick (as atlas simulate --suite knows them): none
    # is picked and skipped; the runner restricts a resumed session again, which then never
    # picks them
    from atlascat.live.suite_session import SuiteLiveSession

    state = RunStore(db).get_run(res["run_id"])["session"]
    assert state["skipped"] == []
    again = SuiteLiveSession.from_dict(state)
    col = again.inner.column("gsm8k", str(again.suite.members[5].bank.item_ids[0]))
    assert again.inner.available[0, col]
    again.restrict_to(set(answers))
    assert not again.inner.available[0, col]


@pytest.mark.parametrize("target, words", [
    ("openllm-v1#nobody/none", "not a subject of any member's matrix"),
    ("arc=arc,nope=arc#x", "give MEMBER=MATRIX pairs"),
    ("arc#0-hero/Matter-0.1-7B-DPO-preview", "no recorded answer to any of the bank's"),
])
def test_replay_on_the_suite_bad_input_is_one_line(target, words, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["evaluate", "--suite", "openllm-v1", "--subject", f"replay:{target}",
                 "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_replayed_leaderboard_model_is_not_its_own_neighbour(tmp_path, capsys):
    """A live suite run names its session's subject by the model: a replayed calibration
    model is predicted as a new model (as ``atlas simulate --suite`` predicts it), not
    corrected by its own published error as its own nearest neighbour."""
    from atlascat.live.suite_session import SuiteLiveSession

    model = "fblgit/una-llama-7b"
    db = tmp_path / "n.sqlite"
    assert main(["evaluate", "--suite", "openllm-v1", "--subject", f"replay:openllm-v1#{model}",
                 "--db", str(db), *SHORT, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)[0]
    assert res["nearest_models"] and model not in [n["model"] for n in res["nearest_models"]]
    state = RunStore(db).get_run(res["run_id"])["session"]
    assert state["subject"] == model
    old = {k: v for k, v in state.items() if k != "subject"}   # a snapshot without the name
    assert SuiteLiveSession.from_dict(old, subject=model).prediction() == \
        SuiteLiveSession.from_dict(state).prediction()


def test_replay_subject_on_a_suite_bank_reads_the_members_matrices(bank):
    """In Python, ``ReplaySubject(spec, model, bank=<a suite's composite bank>)`` reads the
    suite's forms of ``spec`` as ``--subject replay:`` does on ``--suite``."""
    from atlascat.catalogue import load_responses
    from atlascat.live.subjects import ReplaySubject

    model = "fblgit/una-llama-7b"
    sub = ReplaySubject("openllm-v1", model, bank=bank)
    arc = load_responses("arc")
    row = arc.values[[str(s) for s in arc.subject_ids].index(model)]
    assert all(sub.answer_of(f"arc/{i}") == int(v) for i, v in zip(arc.item_ids, row))
    assert {i.split("/")[0] for i in sub.answered_items()} == set(bank.metadata["member"])
    assert sub.describe()["matrix"] == "openllm-v1"
