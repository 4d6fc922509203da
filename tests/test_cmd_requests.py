"""``cmd:COMMAND`` on a bank folder built from sample logs: the command receives each item's
logged requests (one JSON line per item: ``arguments`` as the harness sent them, the
``request_type`` and the ``rule``), answers the model's outputs (``resps``), and atlas scores
them by the item's rule exactly as it scored the logged models' outputs; an item scored by a
metric atlas cannot compute is the one the command scores itself. Also: the logged settings
and scores a folder keeps (generation settings; a score that is not a number)."""
from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path

import pytest

from atlascat.bankdir import load_bank_dir
from atlascat.catalogue import BankRef
from atlascat.cli import main
from atlascat.content.requests import build_item_requests, token_f1

# a toy model in the command: one log-likelihood per (context, continuation) pair (longer
# continuations less likely) or one generation (the first word of the context, twice)
TOY = '''\
import json, sys
seen = open(sys.argv[1], "a")
for line in sys.stdin:
    req = json.loads(line)
    seen.write(line)
    seen.flush()
    if req["scored_by"] == "command":
        print(json.dumps({"item_id": req["item_id"], "score": 0.5}), flush=True)
    elif req["request_type"] == "loglikelihood":
        lls = [-0.1 * len(cont) - 0.01 * n for n, (ctx, cont) in enumerate(req["arguments"])]
        print(json.dumps({"item_id": req["item_id"], "resps": [[v, False] for v in lls]}),
              flush=True)
    else:
        ctx, kwargs = req["arguments"][0]
        word = ctx.split()[0]
        print(json.dumps({"item_id": req["item_id"], "resps": [" " + word + kwargs["until"][0]
                                                               + " " + word]}), flush=True)
'''


def _toy(root: Path) -> tuple[str, Path]:
    script, seen = root / "toy.py", root / "seen.jsonl"
    script.write_text(TOY)
    return f"cmd:{sys.executable} {script} {seen}", seen


def _steps(run_dir: Path) -> list[tuple[str, float, str]]:
    with sqlite3.connect(run_dir / "runs.sqlite") as con:
        return con.execute("SELECT item_id, score, answer FROM steps ORDER BY step").fetchall()


def _gen_logs(root: Path, metric: str, n_models: int = 22, n_items: int = 30,
              settings: dict | None = None) -> Path:
    """Generation logs (lm-eval 0.4 spelling): item i's answer is its context's first word."""
    words = ["red", "blue", "green", "cat", "dog", "sun"]
    for m in range(n_models):
        folder = root / f"org__gen-{m:02d}"
        folder.mkdir(parents=True)
        lines = []
        for i in range(n_items):
            gold = words[i % len(words)]
            right = (i * 7 + m * 3) % n_models < m          # stronger models answer more
            text = " " + (gold if right else "no")
            args = {"gen_args_0": {"arg_0": f"{gold} Q{i}: say the first word\nA:",
                                   "arg_1": {"until": ["\n"], "max_gen_toks": 8,
                                             **(settings or {})}}}
            score = float(text.strip() == gold) if metric == "exact_match" else \
                round(0.9 * token_f1(text, gold), 4)
            lines.append(json.dumps({
                "doc_id": i, "doc": {"q": i}, "target": gold, "arguments": args,
                "resps": [[text + "\nmore"]], "filtered_resps": [text], "filter": "none",
                "metrics": [metric], metric: score}))
        (folder / "samples_toygen_2025-01-01T00-00-00.jsonl").write_text("\n".join(lines) + "\n")
    return root


def _gen_bank(tmp_path: Path, metric: str, name: str = "bank", **kw) -> Path:
    """A bank folder built from :func:`_gen_logs` (its logs in ``<name>_logs``)."""
    logs = _gen_logs(tmp_path / f"{name}_logs", metric, **kw)
    assert main(["build-bank", str(logs), "-q", "-o", str(tmp_path / name)]) == 0
    return tmp_path / name


def _ask(bank: Path, subject: str, n: int, out: Path) -> Path:
    """``atlas evaluate`` of the toy on ``bank``, ``n`` items, written to ``out``."""
    assert main(["evaluate", "--bank", str(bank), "--subject", subject, "--llm", "toy",
                 "--max-items", str(n), "-q", "-o", str(out)]) == 0
    return out


def test_cmd_receives_the_logged_requests_and_atlas_applies_the_rule(mc2_folder, tmp_path):
    """mc2 folder (log-likelihood requests): every line the command read is the item's logged
    requests, and each stored score is mc2 of the log-likelihoods it printed."""
    subject, seen = _toy(tmp_path)
    out = _ask(mc2_folder / "bank", subject, 8, tmp_path / "run")
    items = BankRef.from_option(str(mc2_folder / "bank")).predictor()[1]   # what it asks
    asked = [json.loads(x) for x in seen.read_text().splitlines()]
    steps = _steps(out)
    assert [a["item_id"] for a in asked] == [s[0] for s in steps] and len(steps) == 8
    for line, (item, score, answer) in zip(asked, steps):
        ir = build_item_requests(items, item)
        assert line["request_type"] == "loglikelihood" and line["rule"] == "mc2"
        assert line["arguments"] == [[r.context, r.continuation] for r in ir.requests]
        lls = [v for v, _ in json.loads(answer)["resps"]]
        assert score == pytest.approx(ir.score(lls)) and 0 < score < 1
    row = json.loads((out / "results.json").read_text())[0]
    assert "your command" in row["protocol_label"] and "rule" in row["protocol_label"]


def test_cmd_generation_is_cut_and_matched_as_the_logs_were(tmp_path):
    """exact_match: the generation is cut at the item's logged stop string before it is
    compared with the target (the toy's raw output goes on past the stop), so every item the
    toy answers is right; a command that prints a score for such an item is refused naming
    the rule, in one line, with the run saved."""
    bank = _gen_bank(tmp_path, "exact_match")
    subject, seen = _toy(tmp_path)
    out = _ask(bank, subject, 5, tmp_path / "run")
    line = json.loads(seen.read_text().splitlines()[0])
    assert line["request_type"] == "generate_until" and line["rule"] == "exact_match"
    assert line["arguments"][0][1] == {"until": ["\n"], "max_gen_toks": 8}
    assert [s[1] for s in _steps(out)] == [1] * 5


def test_cmd_printing_a_score_for_an_item_atlas_scores_is_refused(tmp_path, capsys):
    _gen_bank(tmp_path, "exact_match")
    script = tmp_path / "score.py"
    script.write_text("import json, sys\nfor line in sys.stdin:\n"
                      "    i = json.loads(line)['item_id']\n"
                      "    print(json.dumps({'item_id': i, 'score': 1}), flush=True)\n")
    capsys.readouterr()
    rc = main(["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
               f"cmd:{sys.executable} {script}", "--llm", "m", "--max-items", "5", "-q",
               "-o", str(tmp_path / "run")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error")]
    assert rc == 2 and len(err) == 1
    assert "exact_match" in err[0] and '"resps"' in err[0] and "Traceback" not in err[0]


def test_cmd_scores_an_item_whose_metric_atlas_cannot_compute(tmp_path):
    """rougeL (metric:rougeL): the line says the command scores it and still carries the
    logged requests; the command's score is taken as printed."""
    bank = _gen_bank(tmp_path, "rougeL")
    subject, seen = _toy(tmp_path)
    out = _ask(bank, subject, 4, tmp_path / "run")
    line = json.loads(seen.read_text().splitlines()[0])
    assert line["scored_by"] == "command" and line["metric"] == "rougeL"
    assert line["request_type"] == "generate_until" and line["arguments"][0][0].endswith("A:")
    assert [s[1] for s in _steps(out)] == [0.5] * 4


def test_cmd_run_page_and_label_say_the_requests_went_to_the_command(tmp_path):
    """The run's page says atlas sent the logged requests to the command and scored its
    outputs; on a folder of a metric atlas cannot compute, the label names the metric."""
    import html

    subject, _ = _toy(tmp_path)
    out = _ask(_gen_bank(tmp_path, "exact_match"), subject, 3, tmp_path / "run")
    page = html.unescape(next((out / "reports").glob("*.html")).read_text())
    assert "your command answers the outputs, atlas scores them by each item's rule" in page
    assert "none sent by atlas" not in page
    gold = json.loads(_steps(out)[0][2])["resps"][0].split()[0]     # each item as scored
    assert f"answered {gold} (gold {gold})" in re.sub(r"<[^>]+>", "", page)
    out = _ask(_gen_bank(tmp_path, "rougeL", "rbank"), subject, 3, tmp_path / "rrun")
    row = json.loads((out / "results.json").read_text())[0]
    assert "answered and scored by your command (rougeL)" in row["protocol_label"]


def test_runs_table_names_the_command_and_the_folders_metric(mc2_folder, tmp_path, capsys):
    subject, _ = _toy(tmp_path)
    out = _ask(mc2_folder / "bank", subject, 3, tmp_path / "run")
    capsys.readouterr()
    assert main(["runs", "--db", str(out / "runs.sqlite")]) == 0
    assert "your command, as the source models (mc2)" in capsys.readouterr().out


def test_cmd_on_a_shipped_bank_is_sent_the_leaderboards_requests(tmp_path):
    """A shipped content bank holds the leaderboard's requests: the command is sent them
    (ARC: one continuation per choice, acc_norm) and the label names the leaderboard's."""
    subject, seen = _toy(tmp_path)
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", "arc", "--subject", subject, "--llm", "toy",
                 "--max-items", "2", "--min-items", "2", "-q", "-o", str(out)]) == 0
    line = json.loads(seen.read_text().splitlines()[0])
    assert line["rule"] == "acc_norm" and len(line["arguments"]) >= 2
    label = json.loads((out / "results.json").read_text())[0]["protocol_label"]
    assert label.startswith("the leaderboard's requests answered by your command")


@pytest.mark.parametrize("settings, sampled", [
    ({"do_sample": False, "temperature": 0.0}, False),
    ({"do_sample": True, "temperature": 0.7, "top_p": 0.9}, True),
    ({"temperature": 0.5}, True)])
def test_the_logged_generation_settings_are_kept_and_sent(tmp_path, capsys, settings, sampled):
    """Every logged generation setting reaches the folder (requests.jsonl) and the command, as
    logged; logs that sampled their generations are said to be asked greedily by the other
    subjects (one warning)."""
    logs = _gen_logs(tmp_path / "logs", "exact_match", settings=settings)
    capsys.readouterr()
    assert main(["build-bank", str(logs), "-q", "-o", str(tmp_path / "bank")]) == 0
    warned = [ln for ln in capsys.readouterr().err.splitlines() if "sampled generations" in ln]
    assert len(warned) == int(sampled)
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["requests"]["sampled_items"] == (30 if sampled else 0)
    rec = json.loads((tmp_path / "bank" / "requests.jsonl").read_text().splitlines()[0])
    assert rec["requests"][0] == {"kind": "generate_until", "context": rec["requests"][0]["context"],
                                  "until": ["\n"], "max_gen_toks": 8, **settings}
    subject, seen = _toy(tmp_path)
    _ask(tmp_path / "bank", subject, 2, tmp_path / "run")
    line = json.loads(seen.read_text().splitlines()[0])
    assert line["arguments"][0][1] == {"until": ["\n"], "max_gen_toks": 8, **settings}


@pytest.mark.parametrize("reply, needle", [
    ("{'item_id': r['item_id'], 'resps': [-1.0]}", "print one log-likelihood per request"),
    ("{'item_id': r['item_id'], 'resps': [float('nan')] * len(r['arguments'])}",
     "NaN is not a log-likelihood"),
    ("{'item_id': r['item_id'], 'resps': ['a'] * len(r['arguments'])}",
     '"a" is not a log-likelihood'),
    ("{'item_id': r['item_id'], 'resps': [-2.0] * len(r['arguments'])}",
     "the same log-likelihood"),
    ("{'item_id': 'nope', 'resps': []}", "which was not asked")])
def test_a_bad_reply_to_the_requests_is_one_line(mc2_folder, tmp_path, capsys, reply, needle):
    script = tmp_path / "bad.py"
    script.write_text("import json, sys\nfor line in sys.stdin:\n    r = json.loads(line)\n"
                      f"    print(json.dumps({reply}), flush=True)\n")
    capsys.readouterr()
    rc = main(["evaluate", "--bank", str(mc2_folder / "bank"), "--subject",
               f"cmd:{sys.executable} {script}", "--llm", "m", "--max-items", "3", "-q",
               "-o", str(tmp_path / "run")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error")]
    assert rc == 2 and len(err) == 1 and needle in err[0] and "can be resumed" in err[0]


def test_a_stopped_run_resumes_to_the_uninterrupted_runs_items_and_scores(mc2_folder,
                                                                          tmp_path):
    """The command dies after three items (the run saved); resumed, the run asks the items
    an uninterrupted run asks, with the same scores and prediction."""
    subject, _ = _toy(tmp_path)
    whole = tmp_path / "whole"
    assert main(["evaluate", "--bank", str(mc2_folder / "bank"), "--subject", subject,
                 "--llm", "toy", "--max-items", "10", "-q", "-o", str(whole)]) == 0
    flag = tmp_path / "crash"
    flag.write_text("")
    script = tmp_path / "toy.py"
    script.write_text(TOY.replace("for line in sys.stdin:\n", (
        "import os\nfor n, line in enumerate(sys.stdin):\n"
        f"    if n == 3 and os.path.exists({str(flag)!r}):\n        sys.exit('crashed')\n"), 1))
    cut = tmp_path / "cut"
    assert main(["evaluate", "--bank", str(mc2_folder / "bank"), "--subject", subject,
                 "--llm", "toy", "--max-items", "10", "-q", "-o", str(cut)]) == 2
    assert len(_steps(cut)) >= 3
    flag.unlink()
    with sqlite3.connect(cut / "runs.sqlite") as con:
        run_id = con.execute("SELECT run_id FROM runs").fetchone()[0]
    assert main(["evaluate", "--resume", run_id, "--db", str(cut / "runs.sqlite"), "-q"]) == 0
    assert [(i, s) for i, s, _ in _steps(cut)] == [(i, s) for i, s, _ in _steps(whole)]
    pred = [json.loads((d / "results.json").read_text())[0]["prediction"]["score"]
            for d in (whole, cut)]
    assert pred[0] == pred[1]


@pytest.mark.parametrize("value", ["nan", "inf", float("nan")])
def test_a_logged_score_that_is_not_a_number_is_named_so(tmp_path, capsys, value):
    """A per-sample score of NaN / inf (a sample the harness could not score) is one line that
    says so, not advice to declare a --score-range."""
    logs = _gen_logs(tmp_path / "logs", "exact_match")
    f = sorted(logs.rglob("samples_*.jsonl"))[4]
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    recs[2]["exact_match"] = value
    f.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    capsys.readouterr()
    assert main(["build-bank", str(logs), "-q", "-o", str(tmp_path / "bank")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and ":3: exact_match=" in err[0] and "not a finite number" in err[0]
    assert "--score-range" not in err[0]


def test_logs_that_disagree_on_an_items_target_are_refused(tmp_path, capsys):
    """The same item with another target (gold answer) in one model's log: the logs come from
    different task versions, refused in one line naming the item and both targets (the
    rule cannot score a new model as both were scored)."""
    logs = _gen_logs(tmp_path / "logs", "exact_match")
    f = sorted(logs.rglob("samples_*.jsonl"))[3]
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    recs[5]["target"] = "zzz"
    f.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    capsys.readouterr()
    assert main(["build-bank", str(logs), "-q", "-o", str(tmp_path / "bank")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and ":6: item 5" in err[0] and "'zzz'" in err[0] and "'sun'" in err[0]


def test_a_metric_a_record_lists_but_does_not_carry_is_named_so(tmp_path, capsys):
    """lm-eval's ``metrics`` list names a metric the record has no field for (or one record
    lacks the metric the others carry): one line that says which record lacks it, never that
    the record "has" it."""
    logs = _gen_logs(tmp_path / "logs", "exact_match")
    f = sorted(logs.rglob("samples_*.jsonl"))[0]
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    recs[0]["metrics"] = ["em_strict"]
    f.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    capsys.readouterr()
    assert main(["build-bank", str(logs), "-q", "-o", str(tmp_path / "bank")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "'em_strict'" in err[0] and ":1" in err[0]
    assert "has em_strict" not in err[0] and "exact_match" in err[0]


def test_a_stored_reply_is_scored_again_alone_by_the_rule(mc2_folder):
    """A cached reply is read again alone (not as a round): its score is the rule's, even when
    its own log-likelihoods are equal (the round check is the round's)."""
    from atlascat.errors import LiveRunError
    from atlascat.live.subjects import SubjectSpec
    from atlascat.live.subjects.cmdrequests import parse_outputs

    bank = BankRef.from_option(str(mc2_folder / "bank")).predictor()[1]
    subject = SubjectSpec.parse(f"cmd:{sys.executable} -c pass").build(bank)
    ir = subject.item_requests(bank.item_ids[0])
    line = json.dumps({"item_id": ir.item_id, "resps": [-3.0] * len(ir.requests)})
    assert subject.score_of(line) == pytest.approx(ir.score([-3.0] * len(ir.requests)))
    with pytest.raises(LiveRunError, match="same log-likelihood"):
        parse_outputs([ir], line, "the command")


HARNESS = '''\
import json, sys
from atlascat.live.toylm import ToyLM

model = ToyLM()
for line in sys.stdin:
    req = json.loads(line)
    if req["request_type"] == "loglikelihood":
        resps = [model.loglikelihood_one(c, x) for c, x in req["arguments"]]
    else:
        resps = [model.generate_one(c, kw["until"], kw["max_gen_toks"]) for c, kw in req["arguments"]]
    print(json.dumps({"item_id": req["item_id"], "resps": resps}), flush=True)
'''


def test_a_suite_asked_through_a_command_is_the_completions_servers_run(tmp_path):
    """The toy model behind cmd: and behind the offline /v1/completions server: the suite run
    (every benchmark's own requests, log-likelihood and generation) asks the same items and
    scores them alike, so the table is the same."""
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.toylm import ToyLM

    (tmp_path / "harness.py").write_text(HARNESS)
    runs = {}
    with MockOpenAIServer(lm=ToyLM()) as srv:
        for name, subject in (("cmd", f"cmd:{sys.executable} {tmp_path / 'harness.py'}"),
                              ("http", f"completions:{srv.url}")):
            out = tmp_path / name
            assert main(["evaluate", "--suite", "openllm-v1", "--subject", subject, "--llm",
                         "toylm", "--max-items", "12", "-q", "-o", str(out)]) == 0
            runs[name] = (_steps(out), json.loads((out / "results.json").read_text())[0])
    (cmd_steps, cmd_row), (http_steps, http_row) = runs["cmd"], runs["http"]
    assert [s[:2] for s in cmd_steps] == [s[:2] for s in http_steps] and len(cmd_steps) == 12
    assert {s[0].split("/")[0] for s in cmd_steps} >= {"gsm8k", "arc"}
    assert cmd_row["table"] == http_row["table"]
    assert cmd_row["protocol_label"].startswith("the leaderboard's requests answered by your")
