"""A user's own continuous metric, run live: ``replay:`` of a folder built from sample logs
scored by mc2 replays each recorded score through the logged requests (so the live run and
``atlas simulate`` agree), a continuous run's summary says "mean score", never "accuracy"
(CLI and HTML), and ``atlas compare-models`` refuses a folder holding several runs."""
from __future__ import annotations

import html
import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main


def test_mc2_outputs_give_the_recorded_score():
    """The log-likelihoods a replay answers an mc2 item with score the recorded value."""
    from atlascat.content.requests import mc2_score
    from atlascat.live.subjects.replay import mc2_outputs

    for y in (0.0, 1e-9, 0.2514569464, 0.5, 0.97, 1.0):
        for t, f in ((1, 1), (2, 5), (4, 3)):
            assert mc2_score(mc2_outputs(y, t, f), t) == pytest.approx(y, abs=1e-12)


def test_a_replay_of_mc2_logs_agrees_with_simulate(mc2_folder, tmp_path, capsys):
    """``replay:`` through the logged requests gives each item its recorded mc2 score (not
    rounded to 0/1), and so the prediction ``atlas simulate`` gives the model with the seed."""
    held = pd.read_csv(mc2_folder / "held.csv", index_col=0)
    model = str(held.index[0])
    assert main(["simulate", str(mc2_folder / "held.csv"), "--bank", str(mc2_folder / "bank"),
                 "--max-items", "12", "--seed", "2", "-q", "-o", str(tmp_path / "sim")]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--bank", str(mc2_folder / "bank"), "--subject",
                 f"replay:{mc2_folder / 'held.csv'}#{model}", "--max-items", "12", "--seed", "2",
                 "--json", "-o", str(tmp_path / "live")]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["protocol"] == "source models"      # asked through the logged requests
    recorded = held.loc[model, [str(i) for i in row["items"]]].to_numpy(float)
    assert np.allclose(row["scores"], recorded, atol=1e-9)
    assert any(0 < s < 1 for s in row["scores"])
    sim = pd.read_csv(tmp_path / "sim" / "person_scores.csv", index_col=0).loc[model]
    lb = row["prediction"]
    for ours, theirs in (("score", "score"), ("lo", "score_lo"), ("hi", "score_hi")):
        assert lb[ours] == pytest.approx(sim[theirs], abs=1e-9)


def test_a_continuous_runs_summary_says_mean_score(mc2_folder, tmp_path, capsys):
    """The result's line and the HTML page call a continuous score's mean a mean score: no
    "accuracy", no "right / asked"; the page's note says how the predictor drew the items;
    ``atlas runs --run`` (text and --json) gives the run's predicted score, as evaluate."""
    model = str(pd.read_csv(mc2_folder / "held.csv", index_col=0).index[1])
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(mc2_folder / "bank"), "--subject",
                 f"replay:{mc2_folder / 'held.csv'}#{model}", "--max-items", "8", "-o",
                 str(out)]) == 0
    text = capsys.readouterr().out
    row = json.loads((out / "results.json").read_text())[0]
    assert any(0 < s < 1 for s in row["scores"])
    assert "  mean score: observed " in text and "accuracy" not in text
    assert "Live evaluation" in text and "adaptive" not in text
    page = html.unescape((out / "reports" / f"{row['run_id']}.html").read_text())
    # a predictor run's model-based score is its model part over all items, not the bank's
    assert "model-based mean score (the predictor's model part, over all the benchmark's " \
        "items)" in page and "expected over the bank at theta" not in page
    assert "model-based " in text and "(the predictor's model part" in text
    assert "accuracy" not in page.lower() and "right / asked" not in page
    assert "over the items drawn at random" in page and "adaptively chosen" not in page
    head = next(ln for ln in text.splitlines() if ln.startswith(f"{model} on "))
    number = head.split(": ", 1)[1].rsplit(" (", 1)[0]    # "predicted ... score 51.2% (95% ..."
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--run", row["run_id"]]) == 0
    shown = capsys.readouterr().out.strip().splitlines()[-1]
    assert shown.startswith("predicted ") and number.split(" score ", 1)[1] in shown
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--run", row["run_id"],
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["prediction"] == pytest.approx(
        {k: v for k, v in row["prediction"].items()})


def test_compare_models_refuses_a_folder_of_several_runs(mc2_folder, tmp_path, capsys):
    """A folder of two runs (two --llm) is not one run: one line naming its run ids, exit 2,
    not the first run taken silently; the ids it names compare."""
    script = tmp_path / "score.py"      # a toy model answering each logged request
    script.write_text(
        "import json, sys\nk = len(sys.argv[1]) / 10\n"
        "for line in sys.stdin:\n    req = json.loads(line)\n"
        "    resps = [-k * len(c) - n for n, (x, c) in enumerate(req['arguments'])]\n"
        "    print(json.dumps({'item_id': req['item_id'], 'resps': resps}), flush=True)\n")
    import sys

    held = [str(m) for m in pd.read_csv(mc2_folder / "held.csv", index_col=0).index[:2]]
    out = tmp_path / "two"
    assert main(["evaluate", "--bank", str(mc2_folder / "bank"), "--subject",
                 f"cmd:{sys.executable} {script} {{model}}", "--llm", held[0], "--llm", held[1],
                 "--max-items", "6", "-q", "-o", str(out)]) == 0
    ids = [r["run_id"] for r in json.loads((out / "results.json").read_text())]
    capsys.readouterr()
    assert main(["compare-models", str(out), str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(i in err for i in ids) and "holds 2 runs" in err
    assert main(["compare-models", ids[0], ids[1], "--db", str(out / "runs.sqlite")]) == 0


def _f1_logs(root, n_models: int = 24, n_items: int = 40, seed: int = 0):
    """Generation logs (lm-eval 0.4 spelling) of a toy QA task scored by token F1: each model
    keeps each gold word with a probability rising with its index."""
    from atlascat.content.requests import token_f1

    rng = np.random.default_rng(seed)
    gold = [" ".join(rng.choice(["red", "blue", "green", "big", "cat", "dog"], 3))
            for _ in range(n_items)]
    for m in range(n_models):
        folder = root / f"org__gen-{m:02d}"
        folder.mkdir(parents=True)
        lines = []
        for i in range(n_items):
            keep = rng.random(3) < 0.15 + 0.8 * m / (n_models - 1)
            text = " " + " ".join(w if k else "x" for w, k in zip(gold[i].split(), keep))
            args = {"gen_args_0": {"arg_0": f"Q{i}: name three words\nA:",
                                   "arg_1": {"until": ["\n"], "max_gen_toks": 12}}}
            lines.append(json.dumps({
                "doc_id": i, "doc": {"q": i}, "target": gold[i], "arguments": args,
                "resps": [[text]], "filtered_resps": [text], "filter": "none",
                "metrics": ["f1"], "f1": token_f1(text, gold[i])}))
        (folder / "samples_toyqa_2025-01-01T00-00-00.000000.jsonl").write_text(
            "\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_a_replay_of_f1_logs_replays_each_score_by_id(tmp_path, capsys):
    """An f1 folder's recorded scores cannot all be rebuilt as generations: ``replay:`` asks
    it by item id, each score as recorded (not rounded to 0/1), and agrees with ``atlas
    simulate``; the result's observed mean is a mean score even when the scores sum to a
    whole number."""
    import shutil

    from atlascat.bankdir import read_sample_logs

    logs = _f1_logs(tmp_path / "logs")
    held = tmp_path / "held"
    held.mkdir()
    for name in ("org__gen-21", "org__gen-12"):
        shutil.move(str(logs / name), str(held / name))
    read_sample_logs(held, metric="f1").matrix().write(tmp_path / "held.csv")
    assert main(["build-bank", str(logs), "-q", "-o", str(tmp_path / "bank")]) == 0
    assert main(["simulate", str(tmp_path / "held.csv"), "--bank", str(tmp_path / "bank"),
                 "--max-items", "12", "-q", "-o", str(tmp_path / "sim")]) == 0
    sim = pd.read_csv(tmp_path / "sim" / "person_scores.csv", index_col=0)
    recorded = pd.read_csv(tmp_path / "held.csv", index_col=0)
    capsys.readouterr()
    for model in recorded.index:
        assert main(["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
                     f"replay:{tmp_path / 'held.csv'}#{model}", "--max-items", "12",
                     "-o", str(tmp_path / "live" / model.replace("/", "_"))]) == 0
        text = capsys.readouterr().out
        row = json.loads((tmp_path / "live" / model.replace("/", "_") / "results.json")
                         .read_text())[0]
        assert row["protocol"] == "recorded"
        assert np.allclose(row["scores"], recorded.loc[model, row["items"]].to_numpy(float))
        assert row["prediction"]["score"] == pytest.approx(sim.loc[model, "score"], abs=1e-9)
        if any(0 < s < 1 for s in row["scores"]):
            assert "(the mean score over the 12 items asked)" in text
            assert " of the items asked)" not in text


def test_a_whole_sum_of_continuous_scores_is_not_a_count():
    """Scores 1/3 + 2/3 + 1 sum to 2: the observed line says a mean score, not "2/3"."""
    from atlascat.cli.cmd_evaluate import format_result

    row = {"model": "m", "bench": "b", "theta": 0.1, "se": 0.2, "protocol": "recorded",
           "protocol_label": "recorded answers (by item id)", "observed_score": 2 / 3,
           "model_based_score": 0.6, "n_items": 3, "score_sum": 2.0,
           "scores": [1 / 3, 2 / 3, 1]}
    assert "\n  mean score: observed 66.7% (the mean score over the 3 items asked); " \
           "model-based 60.0%" in format_result(row)
    binary = format_result({**row, "scores": [0, 1, 1]})
    assert "\n  accuracy: observed 66.7% (2/3 of the items asked); model-based" in binary


def test_a_score_range_folders_simulate_se_is_on_the_metrics_scale(shared_data, tmp_path):
    """``atlas simulate --bank`` of a folder built from QMSum x 100 (``--score-range 0 100``)
    writes each model's score, interval and ``se`` 100 times the 0-1 folder's."""
    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    idx = np.random.default_rng(1).permutation(len(df))
    df.iloc[idx[30:]].to_csv(tmp_path / "t.csv")
    (100 * df.iloc[idx[30:]]).to_csv(tmp_path / "t100.csv")
    out = {}
    for name, scale in (("raw", []), ("x100", ["--score-range", "0", "100"])):
        data = df.iloc[idx[:30]] * (100 if scale else 1)
        data.to_csv(tmp_path / f"{name}.csv")
        assert main(["build-bank", str(tmp_path / f"{name}.csv"), *scale, "-q",
                     "-o", str(tmp_path / name)]) == 0
        assert main(["simulate", str(tmp_path / ("t100.csv" if scale else "t.csv")), "--bank",
                     str(tmp_path / name), "--max-items", "20", "-q",
                     "-o", str(tmp_path / f"sim_{name}")]) == 0
        out[name] = pd.read_csv(tmp_path / f"sim_{name}" / "person_scores.csv", index_col=0)
    for col in ("score", "score_lo", "score_hi", "se"):
        assert np.allclose(out["x100"][col], 100 * out["raw"][col], rtol=1e-6), col


def test_bound_margin_is_on_the_folders_scale(shared_data, tmp_path):
    """``--bound-margin`` of a ``--score-range 0 100`` folder is in its points: 30 there is 0.3
    on the 0-1 folder (the same adaptive tests), where 0.3 points is another test."""
    from atlascat.catalogue import BankRef

    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    df.iloc[:30].to_csv(tmp_path / "raw.csv")
    (100 * df.iloc[:30]).to_csv(tmp_path / "x100.csv")
    (100 * df.iloc[30:]).to_csv(tmp_path / "t100.csv")
    df.iloc[30:].to_csv(tmp_path / "t.csv")
    for name, scale in (("raw", []), ("x100", ["--score-range", "0", "100"])):
        assert main(["build-bank", str(tmp_path / f"{name}.csv"), *scale, "-q",
                     "-o", str(tmp_path / name)]) == 0
    assert BankRef.from_option(str(tmp_path / "x100")).bound_margin(30) == pytest.approx(0.3)
    assert BankRef.from_option(str(tmp_path / "raw")).bound_margin(0.3) == 0.3
    assert BankRef.from_option(str(tmp_path / "x100")).bound_margin() == 0.02
    raw, x100 = (BankRef.from_option(str(tmp_path / b)) for b in ("raw", "x100"))
    same, other = x100.stop_settings(30), x100.stop_settings(0.3)
    for key in ("floor_theta", "ceiling_theta"):
        assert same[key] == raw.stop_settings(0.3)[key], key
    assert (same["floor_theta"], same["ceiling_theta"]) != (other["floor_theta"],
                                                            other["ceiling_theta"])
    out = tmp_path / "sim"
    assert main(["simulate", str(tmp_path / "t100.csv"), "--bank", str(tmp_path / "x100"),
                 "--design", "adaptive", "--bound-margin", "30", "-q", "-o", str(out)]) == 0


def test_a_predictor_simulations_summary_has_the_mean_it_prints(mc2_folder, tmp_path, capsys):
    """summary.json carries the predicted score mean the table prints (it had the width only)."""
    assert main(["simulate", str(mc2_folder / "held.csv"), "--bank", str(mc2_folder / "bank"),
                 "--max-items", "10", "-o", str(tmp_path / "sim")]) == 0
    text = capsys.readouterr().out
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text())
    persons = pd.read_csv(tmp_path / "sim" / "person_scores.csv")
    assert summary["score_mean"] == pytest.approx(persons["score"].mean())
    assert f"{100 * summary['score_mean']:.1f}% (95% intervals " \
        f"{100 * summary['width_mean']:.1f} points wide)" in text


def test_a_continuous_items_weak_identification_is_not_worded_as_categories():
    """An item whose scores in [0, 1] sum to under 3 from all-0 is flagged without "answers in
    their rarer category" (a continuous score has no categories); 0/1 data keep the words."""
    from atlascat.irt.defaults import identification_problems

    rng = np.random.default_rng(0)
    y = rng.uniform(0.2, 0.8, (400, 5))
    y[:, 0] = 0.0
    y[:4, 0] = 0.5                                     # sums to 2: near the floor
    cont = [m for m in identification_problems(y, None, "2pl", "lognorm(0,1)", None)
            if "barely identified" in m]
    assert cont and "rarer category" not in cont[0] and "floor or their ceiling" in cont[0]
    assert "all 0 or all 1" not in cont[0]     # a --score-range folder's scores are not 0-1
    binary = (y > 0.45).astype(float)
    binary[:, 0] = 0.0
    binary[:2, 0] = 1.0
    words = [m for m in identification_problems(binary, None, "2pl", "lognorm(0,1)", None)
             if "barely identified" in m]
    assert words and "answers in their rarer category" in words[0]


def test_a_matrix_banks_name_comes_from_its_item_ids_or_says_it_is_the_files(
        shared_data, tmp_path, capsys):
    """Built from ``source.csv`` without --name, the benchmark is named by the stem its item
    ids share (``qmsum.0`` ..: qmsum) and the summary says so; with ids that share no such
    stem it is the file's name, said to be one; with --name it is the name alone."""
    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    df.iloc[:25].to_csv(tmp_path / "source.csv")
    assert main(["build-bank", str(tmp_path / "source.csv"), "-o", str(tmp_path / "a")]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if "benchmark " in ln)
    assert "qmsum (its item ids' stem; --name gives the benchmark's)" in row
    assert json.loads((tmp_path / "a" / "manifest.json").read_text())["benchmark"] == "qmsum"
    df.columns = [f"item{k}" for k in range(df.shape[1])]
    df.iloc[:25].to_csv(tmp_path / "source.csv")
    assert main(["build-bank", str(tmp_path / "source.csv"), "-o", str(tmp_path / "c")]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if "benchmark " in ln)
    assert "source (the file's name; --name gives the benchmark's)" in row
    assert main(["build-bank", str(tmp_path / "source.csv"), "--name", "qmsum", "-o",
                 str(tmp_path / "b")]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if "benchmark " in ln)
    assert row.split() == ["benchmark", "qmsum"]


@pytest.mark.parametrize("ids, name", [
    (["qmsum.0", "qmsum.1", "qmsum.10"], ("qmsum", "item ids")),
    (["helm_med_qa_0", "helm_med_qa_1", "helm_med_qa_17"], ("helm_med_qa", "item ids")),
    (["arc/easy/1", "arc/easy/2"], ("arc/easy", "item ids")),
    (["item1", "item2", "item3"], ("my", "file")),       # no separator
    (["item_1", "item_2"], ("my", "file")),             # a generic word
    (["q_11", "q_12"], ("my", "file")),                 # too short
    (["12_a", "12_b"], ("my", "file")),                 # no letter
    (["abc_1", "xyz_2"], ("my", "file"))])              # nothing shared
def test_benchmark_name_from_item_ids(ids, name):
    from atlascat.bankdir.builder import benchmark_name

    assert benchmark_name(ids, "data/my.results.csv.gz") == name


def test_score_help_names_every_column_it_writes_for_a_folder(mc2_folder, tmp_path):
    """``atlas score --help`` lists the columns a bank folder's scores have (it listed the
    theta columns only)."""
    from typer.testing import CliRunner

    from atlascat.cli import app

    assert main(["score", str(mc2_folder / "held.csv"), "--bank", str(mc2_folder / "bank"), "-o",
                 str(tmp_path / "s.csv")]) == 0
    text = " ".join(CliRunner().invoke(app, ["score", "--help"]).output.split())
    for col in pd.read_csv(tmp_path / "s.csv").columns:
        assert col in text, col


@pytest.mark.parametrize("option", [["--seed", "5"], ["--design", "adaptive"],
                                    ["--max-items", "20"], ["--min-items", "3"],
                                    ["--se-stop", "0.2"]])
def test_resume_refuses_an_option_it_would_ignore(mc2_folder, tmp_path, capsys, option):
    """``--resume`` keeps the run's seed, design and stops: each option that would change
    them is one line, exit 2 (they were accepted and ignored)."""
    model = str(pd.read_csv(mc2_folder / "held.csv", index_col=0).index[0])
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(mc2_folder / "bank"), "--subject",
                 f"replay:{mc2_folder / 'held.csv'}#{model}", "--max-items", "3", "-q",
                 "-o", str(out)]) == 0
    run_id = json.loads((out / "results.json").read_text())[0]["run_id"]
    capsys.readouterr()
    assert main(["evaluate", "--resume", run_id, "--db", str(out / "runs.sqlite"),
                 *option]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: --resume continues a run with its own settings; drop {option[0]}"


def test_evaluate_help_does_not_promise_the_leaderboard_for_every_bank():
    """``atlas evaluate --help`` says a bank folder's items are asked as its source models'
    were (logged requests, or by item id), not "as the Open LLM Leaderboard asked it" alone,
    and that a folder's items may be drawn by its predictor, not always adaptively."""
    from typer.testing import CliRunner

    from atlascat.cli import app

    text = " ".join(CliRunner().invoke(app, ["evaluate", "--help"]).output.split())
    assert "Measure models adaptively" not in text
    assert "benchmark predictor" in text and "logged requests" in text
    assert "asked by item id" in text


def test_an_unfinished_runs_page_speaks_of_the_folders_benchmark(shared_data, tmp_path,
                                                                 capsys):
    """A run of a --score-range folder that stops (a score off the scale) has only its
    prediction so far (marked partial, as `atlas runs` shows it); its page names the
    benchmark, never "leaderboard", and reads on the metric's scale (the axis is not in
    percent)."""
    import sys

    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    (100 * df.iloc[:30]).to_csv(tmp_path / "bleu.csv")
    assert main(["build-bank", str(tmp_path / "bleu.csv"), "--score-range", "0", "100",
                 "--name", "qmsum-bleu", "-q", "-o", str(tmp_path / "bank")]) == 0
    script = tmp_path / "score.py"
    script.write_text("import json, sys\nfor n, line in enumerate(sys.stdin):\n"
                      "    item = json.loads(line)['item_id']\n"
                      "    print(json.dumps({'item_id': item, 'score': 140.0 if n == 3 "
                      "else 20.0}), flush=True)\n")
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
                 f"cmd:{sys.executable} {script}", "--llm", "m", "-o", str(out)]) == 2
    capsys.readouterr()
    row = json.loads((out / "results.json").read_text())[0]
    assert row["status"] == "error"
    assert row["prediction"]["partial"] and row["prediction"]["state"] == "error"
    page = html.unescape((out / "reports" / f"{row['run_id']}.html").read_text())
    assert "leaderboard" not in page.lower()
    assert "predicted qmsum-bleu score<" in page or "predicted qmsum-bleu score " in page
    assert "predicted qmsum-bleu score (%)" not in page


def test_simulate_refuses_a_batch_size_its_predictor_would_ignore(mc2_folder, tmp_path, capsys):
    """``atlas simulate --bank DIR --batch-size 5`` replays the predictor one item at a time:
    the option is one line, exit 2 (it was accepted and ignored, while a live run with it draws
    other items); with --design adaptive it runs."""
    args = ["simulate", str(mc2_folder / "held.csv"), "--bank", str(mc2_folder / "bank"),
            "--batch-size", "5", "-q"]
    assert main([*args, "-o", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--batch-size" in err and "one item at a time" in err
    assert main([*args, "--design", "adaptive", "-o", str(tmp_path / "b")]) == 0


def test_ctrl_c_in_a_terminal_interrupts_a_command_run(shared_data, tmp_path, capsys):
    """A terminal's Ctrl-C goes to the whole foreground process group: ATLAS and the scoring
    command. The command runs in its own session, so ATLAS finishes the item in flight, marks
    the run interrupted and exits 130 (the command died with the signal: the run ended as an
    error, exit 2); the command is then ended."""
    import os
    import signal
    import subprocess
    import sys
    from conftest import HANG_S

    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    df.iloc[:30].to_csv(tmp_path / "source.csv")
    assert main(["build-bank", str(tmp_path / "source.csv"), "-q", "-o",
                 str(tmp_path / "bank")]) == 0
    script = tmp_path / "slow.py"
    script.write_text("import json, sys, time\nfor line in sys.stdin:\n"
                      "    item = json.loads(line)['item_id']\n    time.sleep(0.3)\n"
                      "    print(json.dumps({'item_id': item, 'score': 0.25}), flush=True)\n")
    out = tmp_path / "run"
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "atlascat", "evaluate", "--bank",
                             str(tmp_path / "bank"), "--subject",
                             f"cmd:{sys.executable} {script}", "--llm", "m", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True,          # a terminal's process group
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    for line in proc.stderr:                                 # the command is scoring items
        seen.append(line)
        if "  step    2  " in line:
            break
    os.killpg(proc.pid, signal.SIGINT)                       # Ctrl-C: ATLAS and its command
    _, err = proc.communicate(timeout=HANG_S)
    err = "".join(seen) + err
    assert proc.returncode == 130, err
    assert "interrupted: run " in err and "Traceback" not in err
    capsys.readouterr()
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)[0]
    assert run["state"] == "interrupted" and run["pending"] == 0 and run["n_items"] >= 1


def test_a_stopped_runs_scores_read_on_the_folders_scale(shared_data, tmp_path, capsys):
    """A run on a --score-range folder that stopped before its end (here its command failed)
    has no prediction yet: ``atlas runs`` (table and --json) still gives its mean score on the
    metric's own scale, as for a finished run, not as a percent of 0-1."""
    import sys

    from atlascat.bankdir import build_bank

    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    (100 * df.iloc[:30]).to_csv(tmp_path / "source.csv")
    build_bank(tmp_path / "source.csv", tmp_path / "bank", folds=0, score_range=(0, 100))
    script = tmp_path / "p.py"
    script.write_text("import json, sys\nfor n, line in enumerate(sys.stdin, 1):\n"
                      "    if n == 4:\n        sys.exit('crashed')\n"
                      "    item = json.loads(line)['item_id']\n"
                      "    print(json.dumps({'item_id': item, 'score': 37.5}), flush=True)\n")
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
                 f"cmd:{sys.executable} {script}", "--llm", "m", "-q", "-o", str(out)]) == 2
    capsys.readouterr()
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)[0]
    assert run["state"] == "error" and run["n_items"] == 3
    assert run["observed_score"] == pytest.approx(37.5) and run["scale"] == [0.0, 100.0]
    assert main(["runs", "--db", str(out / "runs.sqlite")]) == 0
    table = capsys.readouterr().out
    assert " 37.5 " in table and "37.5%" not in table


def test_a_generation_tasks_own_metric_is_named_a_generation_on_the_page(tmp_path, capsys):
    """Items scored by a logged metric atlas cannot compute (``metric:bleu_max``) are still
    generations: the run's page says how they were asked as logged (generation, not
    log-likelihood); a ``cmd:`` run's page says atlas sent them to the command, which scored
    them by that metric."""
    import sys

    from atlascat.bankdir import read_sample_logs
    from atlascat.content.requests import describe_requests

    logs = _f1_logs(tmp_path / "logs", n_models=22, n_items=30)
    for f in logs.rglob("samples_*.jsonl"):
        recs = [json.loads(x) for x in f.read_text().splitlines()]
        for r in recs:
            r["metrics"], r["bleu_max"] = ["bleu_max"], round(100 * r["f1"], 3)
        f.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    read_sample_logs(logs, metric="bleu_max").write(tmp_path / "all.csv")
    assert main(["build-bank", str(logs), "-q", "-o", str(tmp_path / "bank")]) == 0
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
                 f"replay:{tmp_path / 'all.csv'}#org/gen-10", "--max-items", "6", "-q",
                 "-o", str(out)]) == 0
    page = html.unescape(next((out / "reports").glob("*.html")).read_text())
    assert "toyqa: as logged, generation (metric:bleu_max)" in page
    assert "log-likelihood" not in page
    script = tmp_path / "p.py"
    script.write_text("import json, sys\nfor line in sys.stdin:\n"
                      "    item = json.loads(line)['item_id']\n"
                      "    print(json.dumps({'item_id': item, 'score': 50}), flush=True)\n")
    assert main(["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
                 f"cmd:{sys.executable} {script}", "--llm", "m", "--max-items", "6", "-q",
                 "-o", str(tmp_path / "cmd")]) == 0
    page = html.unescape(next((tmp_path / "cmd" / "reports").glob("*.html")).read_text())
    assert ("toyqa: as logged, generation (metric:bleu_max); your command answers them and "
            "scores items by bleu_max") in page
    # a logged metric of log-likelihood items (no token limit) is a log-likelihood request
    meta = pd.DataFrame({"rule": ["metric:brier", "metric:brier"],
                         "max_gen_toks": [np.nan, np.nan], "benchmark": ["t", "t"]})
    assert describe_requests(meta) == "t: as logged, log-likelihood (metric:brier)"


def test_simulate_writes_the_items_a_live_run_with_the_seed_asks(shared_data, tmp_path,
                                                                  capsys):
    """The predictor's ``atlas simulate`` writes selected_items.csv: per model the items it
    was asked, in order, with the recorded score on the folder's scale; a live ``replay:`` run
    of that model with the same seed asks exactly those items and scores them alike."""
    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    (100 * df.iloc[:30]).to_csv(tmp_path / "source.csv")
    (100 * df.iloc[30:]).to_csv(tmp_path / "targets.csv")
    assert main(["build-bank", str(tmp_path / "source.csv"), "--score-range", "0", "100", "-q",
                 "-o", str(tmp_path / "bank")]) == 0
    assert main(["simulate", str(tmp_path / "targets.csv"), "--bank", str(tmp_path / "bank"),
                 "--max-items", "15", "--seed", "4", "-q", "-o", str(tmp_path / "sim")]) == 0
    sel = pd.read_csv(tmp_path / "sim" / "selected_items.csv", dtype={"item_id": str})
    persons = pd.read_csv(tmp_path / "sim" / "person_scores.csv", index_col=0)
    assert list(sel.columns) == ["subject_id", "item_id", "order", "score"]
    assert (sel.groupby("subject_id").size().reindex(persons.index)
            == persons["n_items"]).all()
    model = str(df.index[33])
    capsys.readouterr()
    assert main(["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
                 f"replay:{tmp_path / 'targets.csv'}#{model}", "--max-items", "15", "--seed",
                 "4", "--json", "-o", str(tmp_path / "live")]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    mine = sel[sel["subject_id"] == model].sort_values("order")
    assert list(mine["item_id"]) == [str(i) for i in row["items"]]
    assert np.allclose(mine["score"], row["scores"])
    assert row["prediction"]["score"] == pytest.approx(persons.loc[model, "score"], abs=1e-9)


def test_a_folders_link_warns_of_the_source_models(shared_data, tmp_path):
    """A bank folder's score link, outside the models it was fitted on, says so in the
    folder's words: beyond "the source models" (a shipped bank's link keeps its own)."""
    from atlascat.bankdir import build_bank, load_bank_dir

    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    df.iloc[:30].to_csv(tmp_path / "source.csv")
    build_bank(tmp_path / "source.csv", tmp_path / "bank", folds=0)
    link = load_bank_dir(tmp_path / "bank").link
    low, high = link.support_bounds()
    below, above = link.predict(low - 3, 0.4), link.predict(high + 3, 0.4)
    assert "reaches below the source models (supported from theta" in below.warning
    assert "reaches above the source models (supported to theta" in above.warning
    assert "calibration models" not in below.warning + above.warning


def test_the_adaptive_simulations_answers_read_on_the_folders_scale(shared_data, tmp_path):
    """``atlas simulate --design adaptive`` on a --score-range folder writes each answer in
    selected_items.csv (and selected_items/) as recorded, on the metric's scale."""
    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    (100 * df.iloc[:30]).to_csv(tmp_path / "source.csv")
    (100 * df.iloc[30:34]).to_csv(tmp_path / "targets.csv")
    assert main(["build-bank", str(tmp_path / "source.csv"), "--score-range", "0", "100", "-q",
                 "-o", str(tmp_path / "bank")]) == 0
    assert main(["simulate", str(tmp_path / "targets.csv"), "--bank", str(tmp_path / "bank"),
                 "--design", "adaptive", "--max-items", "12", "--selected-folder", "-q",
                 "-o", str(tmp_path / "sim")]) == 0
    sel = pd.read_csv(tmp_path / "sim" / "selected_items.csv", dtype={"item_id": str})
    truth = pd.read_csv(tmp_path / "targets.csv", index_col=0)
    recorded = [truth.loc[s, i] for s, i in zip(sel["subject_id"], sel["item_id"])]
    assert np.allclose(sel["score"], recorded) and sel["score"].max() > 1
    one = pd.read_csv(next((tmp_path / "sim" / "selected_items").glob("*.csv")))
    assert one["score"].max() <= 100 and np.isin(one["score"], sel["score"]).all()


def test_mc2_logged_under_another_name_is_computed_as_mc2(mc2_folder, tmp_path):
    """lm-eval 0.4 logs TruthfulQA's mc2 as ``acc`` (a score in [0, 1] on log-likelihood
    items): the rule that reproduces the logged scores from the logged outputs, mc2, is taken
    (a live run can ask the items), not an opaque ``metric:acc``; a continuous score mc2 does
    not reproduce stays ``metric:<name>``."""
    from atlascat.bankdir import read_sample_logs

    for name, noise in (("acc", 0.0), ("other", 0.05)):
        rng = np.random.default_rng(0)
        for f in (mc2_folder / "logs").rglob("samples_*.jsonl"):
            recs = [json.loads(x) for x in f.read_text().splitlines()]
            for r in recs:
                value = r.pop("mc2")
                r[name] = float(np.clip(value + noise * rng.normal(), 0, 1))
                r["metrics"] = [name]
            dest = tmp_path / name / f.parent.name
            dest.mkdir(parents=True)
            (dest / f.name).write_text("\n".join(json.dumps(r) for r in recs) + "\n")
        logs = read_sample_logs(tmp_path / name)
        assert logs.metric == name
        rules = {logs.rule_fields(i)["rule"] for i in logs.items}
        assert rules == ({"mc2"} if name == "acc" else {"metric:other"}), name
    kept = read_sample_logs(tmp_path / "acc")
    assert all(kept.rule_fields(i)["agreement"] == 1.0 for i in kept.items)


def test_simulate_says_when_it_replays_the_source_models(shared_data, tmp_path, capsys):
    """``atlas simulate --bank DIR`` on the folder's own source models says their predictions
    are in-sample (one warning line); held-out models get no such line."""
    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    df.iloc[:30].to_csv(tmp_path / "source.csv")
    df.iloc[28:36].to_csv(tmp_path / "mixed.csv")        # two source models, six new ones
    df.iloc[30:].to_csv(tmp_path / "targets.csv")
    assert main(["build-bank", str(tmp_path / "source.csv"), "-q",
                 "-o", str(tmp_path / "bank")]) == 0
    for name, said in (("mixed", True), ("targets", False)):
        capsys.readouterr()
        for design in ("predictor", "adaptive"):
            assert main(["simulate", str(tmp_path / f"{name}.csv"), "--bank",
                         str(tmp_path / "bank"), "--design", design, "--max-items", "10",
                         "-q", "-o", str(tmp_path / f"sim_{name}_{design}")]) == 0
            err = " ".join(capsys.readouterr().err.split())
            line = (f"warning: 2 of the 8 models are the bank folder's source models (e.g. "
                    f"{str(df.index[28])!r}): their predictions are in-sample")
            assert (line in err) == said, err


def test_shares_of_one_given_to_a_0_100_folder_are_flagged(shared_data, tmp_path, capsys):
    """QMSum's 0-1 scores replayed on a folder built from the same scores x 100: one warning
    says they look like shares of 1 (as read, every model sits at the bottom of the scale);
    the same scores x 100 say nothing."""
    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    idx = np.random.default_rng(2).permutation(len(df))
    (100 * df.iloc[idx[:30]]).to_csv(tmp_path / "src.csv")
    df.iloc[idx[30:]].to_csv(tmp_path / "shares.csv")
    (100 * df.iloc[idx[30:]]).to_csv(tmp_path / "points.csv")
    assert main(["build-bank", str(tmp_path / "src.csv"), "--score-range", "0", "100", "-q",
                 "-o", str(tmp_path / "bank")]) == 0
    capsys.readouterr()
    for name, flagged in (("shares", True), ("points", False)):
        assert main(["simulate", str(tmp_path / f"{name}.csv"), "--bank", str(tmp_path / "bank"),
                     "--max-items", "10", "-q", "-o", str(tmp_path / f"sim_{name}")]) == 0
        err = capsys.readouterr().err
        assert ("if they are shares of 1, not points of 100" in " ".join(err.split())) == flagged
