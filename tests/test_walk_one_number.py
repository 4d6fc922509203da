"""One number everywhere, walked across every kind of run (a shipped bank, bank folders from
0/1, continuous and 0-100 scores by either design, a graded bank, a suite, ``atlas simulate``
beside a live run): each test is a defect the walk found, where one surface gave another
number, unit or name than the others (the walks already kept: test_one_number_everywhere.py,
test_simulate_equals_evaluate.py)."""
from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main

SUITE = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")


# ------------------------------------------------------------------ a suite: simulate vs live
@pytest.fixture(scope="module")
def suite_answers(tmp_path_factory):
    """Each member's recorded answers of two leaderboard models, one file per member: the
    first model answered every member, the second has no HellaSwag or GSM8K answers (its rows
    are left out of those files)."""
    from atlascat.catalogue import load_responses

    root = tmp_path_factory.mktemp("suite_answers")
    mats = {b: load_responses(b) for b in SUITE}
    ids = [{str(s) for s in m.subject_ids} for m in mats.values()]
    full = sorted(set.intersection(*ids))[5]
    gaps = sorted(ids[0] & ids[2] & ids[3] & ids[4] - ids[1] - ids[5])[0]
    for b, m in mats.items():
        keep = [full] if b in ("hellaswag", "gsm8k") else [full, gaps]
        m.subset(subjects=np.isin(m.subject_ids.astype(str), keep)).write(root / f"{b}.csv")
    return root, [full, gaps]


def test_a_suite_model_is_asked_what_simulate_asks_it_among_others(suite_answers, tmp_path,
                                                                   capsys):
    """``atlas simulate --suite`` of two models and a live ``replay:`` of each with the same
    seed: the same items per member and the same predicted average with its interval. The
    suite replay drew every model's randomesque picks from one generator (a model's items
    hung on who else was in the file: 65.5% alone, 66.5% beside another model), and a live
    run learnt a member's blanks only as it picked them (the other items in the round, another
    average: 59.4% live, 58.8% simulated). suite_scores.csv also gives the percentiles and
    the stop reason a live run gives (it had none)."""
    root, models = suite_answers
    pairs = [f"{b}={root / f'{b}.csv'}" for b in SUITE]
    opts = ["--max-items", "18", "--min-items", "18", "--seed", "4", "-q"]
    assert main(["simulate", "--suite", "openllm-v1", *pairs, *opts, "-o",
                 str(tmp_path / "sim")]) == 0
    sim = pd.read_csv(tmp_path / "sim" / "suite_scores.csv").set_index("subject_id")
    spec = ",".join(pairs)
    for model in models:
        out = tmp_path / f"live{models.index(model)}"
        assert main(["evaluate", "--suite", "openllm-v1", "--subject", f"replay:{spec}#{model}",
                     *opts, "-o", str(out)]) == 0
        row = json.loads((out / "results.json").read_text())[0]
        assert [b["items"] for b in row["benchmarks"]] == \
            [int(sim.loc[model, f"{b}_items"]) for b in SUITE], model
        np.testing.assert_allclose(
            [row["average"][k] for k in ("score", "lo", "hi", "percentile")],
            sim.loc[model, ["average", "average_lo", "average_hi",
                            "average_percentile"]].to_numpy(float), rtol=1e-9, err_msg=model)
        # each benchmark's percentile and the stop reason, which suite_scores.csv lacked
        np.testing.assert_allclose([b["percentile"] for b in row["benchmarks"]],
                                   [sim.loc[model, f"{b}_percentile"] for b in SUITE],
                                   rtol=1e-9, err_msg=model)
        assert row["stop_reason"] == sim.loc[model, "stop_reason"]


# ------------------------------------------------------------------ bank folders of any metric
@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Bank folders of 30 source models on 80 items: continuous scores in [0, 1], the same
    scores on 0-100 built with ``--score-range 0 100``, and 0/1 scores; ``tgt.csv``: 10 more
    models."""
    from test_any_metric import _scaled_matrix

    root = tmp_path_factory.mktemp("one_number_walk")
    out = {}
    for name, hi, extra in (("unit", 1, []), ("points", 100, ["--score-range", "0", "100"]),
                            ("binary", 1, [])):
        d = root / name
        d.mkdir()
        _scaled_matrix(d, 0, hi, integer=name == "binary")
        assert main(["build-bank", str(d / "src.csv"), "-o", str(d / "bank"), "--name", "qa",
                     "-q", *extra]) == 0
        out[name] = d
    return out


@pytest.mark.parametrize("design", ["auto", "adaptive"])
def test_simulates_mean_prediction_is_in_percent_with_its_sign(folders, design, tmp_path,
                                                              capsys):
    """``atlas simulate``'s summary row of the mean predicted score: in percent it reads
    "65.8%", as the run's headline, page and ``atlas runs`` write a score in percent; on a
    metric's own 0-100 scale "65.8". Both read "65.8" (a 0-1 score and a BLEU alike)."""
    rows = {}
    for name in ("unit", "points"):
        d = folders[name]
        assert main(["simulate", str(d / "tgt.csv"), "--bank", str(d / "bank"), "--design",
                     design, "--max-items", "20", "-o", str(tmp_path / name)]) == 0
        text = capsys.readouterr().out
        rows[name] = " ".join(next(ln for ln in text.splitlines()
                                   if "mean over models" in ln).split())
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        k, unit = (100, "%") if name == "unit" else (1, "")
        assert (f"mean over models {k * summary['score_mean']:.1f}{unit} (95% intervals "
                f"{k * summary['width_mean']:.1f} points wide)") in rows[name], rows[name]
    assert rows["unit"] != rows["points"]


@pytest.mark.parametrize("kind", ["unit", "points"])
def test_a_predictor_runs_score_se_is_person_scores_se(folders, kind, tmp_path, capsys):
    """A folder's benchmark predictor: ``person_scores.csv``'s ``se`` is the predicted score's
    SE (on the score's scale); results.json and ``atlas runs --json`` carried only theta's SE
    (0.42 where the CSV said 0.042 for the same run), so the CSV's number was nowhere in the
    live run. Now the prediction carries the score's SE beside theta's (``se``)."""
    d = folders[kind]
    assert main(["simulate", str(d / "tgt.csv"), "--bank", str(d / "bank"), "--max-items", "20",
                 "--seed", "3", "-q", "-o", str(tmp_path / "sim")]) == 0
    persons = pd.read_csv(tmp_path / "sim" / "person_scores.csv").set_index("subject_id")
    out = tmp_path / "live"
    assert main(["evaluate", "--bank", str(d / "bank"), "--subject",
                 f"replay:{d / 'tgt.csv'}#m31", "--max-items", "20", "--seed", "3", "-q",
                 "-o", str(out)]) == 0
    row = json.loads((out / "results.json").read_text())[0]
    pred = row["prediction"]
    assert pred["design"] == "benchmark predictor"
    assert pred["se"] == pytest.approx(persons.loc["m31", "se"], rel=1e-9)
    assert pred["score"] == pytest.approx(persons.loc["m31", "score"], rel=1e-9)
    assert pred["se"] != pytest.approx(row["se"])             # theta's SE stays theta's
    capsys.readouterr()
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["prediction"]["se"] == pred["se"]


@pytest.mark.parametrize("kind", ["unit", "points"])
def test_runs_run_prints_each_steps_score_as_the_lines_and_the_page(folders, kind, tmp_path,
                                                                   capsys):
    """``atlas runs --run ID`` printed each step's score to 4 significant digits (BLEU
    "98.95", "0.9895") where the command's step lines and the HTML page print "98.9" and
    "0.99": one score, two readings. Now each reads as the others."""
    from test_one_number_everywhere import _columns, _page

    d = folders[kind]
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(d / "bank"), "--design", "adaptive", "--subject",
                 f"replay:{d / 'tgt.csv'}#m31", "--max-items", "12", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    lines = [ln.split()[ln.split().index("score") + 1] for ln in err.splitlines()
             if " step " in ln and " score " in ln]
    row = json.loads((out / "results.json").read_text())[0]
    assert len(lines) == row["n_items"]
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--run", row["run_id"]]) == 0
    table = _columns(capsys.readouterr().out.splitlines(), "step")
    shown = [r["score"] for r in table if r["status"] == "answered"]
    _, _, items = _page(out / "reports" / f"{row['run_id']}.html")
    assert shown == lines == [r["score"] for r in items]


def test_a_suite_steps_se_reads_alike_on_its_line_the_page_and_runs(tmp_path, capsys):
    """A suite run's SE of the average after each step: its step line printed it to 2
    decimals ("SE 3.75", as the page's "SE of the average 3.75 points"), the page's steps and
    ``atlas runs --run`` to 1 ("3.7" for 3.746, which the line reads as 3.75): now 2 on all."""
    from test_one_number_everywhere import _columns, _page

    out = tmp_path / "run"
    assert main(["evaluate", "--suite", "openllm-v1", "--subject", "simulate:0.5:3",
                 "--max-items", "12", "--min-items", "12", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    lines = [ln.split()[-1] for ln in err.splitlines() if " step " in ln and " SE " in ln]
    row = json.loads((out / "results.json").read_text())[0]
    assert len(lines) == row["n_items"] and lines[-1] == f"{row['se_points']:.2f}"
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--run", row["run_id"]]) == 0
    table = _columns(capsys.readouterr().out.splitlines(), "step")
    assert [r["(points)"] for r in table] == lines   # the header "SE (points)" as 2 words
    _, kv, items = _page(out / "reports" / f"{row['run_id']}.html")
    assert [r["SE (points)"] for r in items] == lines
    assert kv["SE of the average"] == f"{lines[-1]} points"


def test_an_accuracy_over_the_items_scored_does_not_say_asked(folders, tmp_path, capsys):
    """A ``cmd:`` harness that gives some items no score (``null``): the headline says "N
    items scored, M asked", and the accuracy "k/N of the items asked" (the page: "right /
    asked") over the N scored, which read as k of the M asked. Now "scored" where some asked
    got none; a run where every item got a score still says "asked"."""
    from test_one_number_everywhere import _page

    d = folders["binary"]
    script = tmp_path / "judge.py"
    script.write_text("import json, sys\n"
                      "for line in sys.stdin:\n"
                      "    item = json.loads(line)['item_id']\n"
                      "    k = int(item[1:]) % 3\n"
                      "    print(json.dumps({'item_id': item, 'score': [1, None, 0][k]}),"
                      " flush=True)\n")
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(d / "bank"), "--design", "adaptive", "--subject",
                 f"cmd:{sys.executable} {script}", "--llm", "judge", "--max-items", "12",
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    row = json.loads((out / "results.json").read_text())[0]
    n, k = row["n_items"], int(row["score_sum"])
    assert row["n_skipped"] > 0 and f"({n} items scored, {row['n_asked']} asked)" in text
    assert f"({k}/{n} of the items scored)" in text and "items asked)" not in text
    page, kv, _ = _page(out / "reports" / f"{row['run_id']}.html")
    assert kv["observed accuracy (right / scored)"] == f"{100 * k / n:.1f}%"
    assert "right / asked" not in page
    # every item scored: "asked" as before
    assert main(["evaluate", "--bank", str(d / "bank"), "--design", "adaptive", "--subject",
                 f"replay:{d / 'tgt.csv'}#m31", "--max-items", "12", "-o",
                 str(tmp_path / "all")]) == 0
    assert " of the items asked)" in capsys.readouterr().out


def test_a_replays_blanks_are_counted_skipped_as_simulate_counts_them(folders, tmp_path,
                                                                      capsys):
    """A recorded model with blanks, replayed live by the adaptive test: it skips a blank as
    it comes up, as ``atlas simulate`` does (the same items and theta), and now counts it as
    simulate does: person_scores.csv's ``n_skipped`` (11) was 0 in results.json, ``atlas
    runs`` and the page (a judge's ``null`` on the same items was counted). The blanks are
    kept as skipped steps ("no recorded answer")."""
    from test_one_number_everywhere import _page

    d = folders["binary"]
    tgt = pd.read_csv(d / "tgt.csv", index_col=0)
    tgt = tgt.mask(np.random.default_rng(0).random(tgt.shape) < 0.3)
    tgt.to_csv(tmp_path / "gaps.csv")
    opts = ["--bank", str(d / "bank"), "--design", "adaptive", "--seed", "4", "--max-items",
            "20", "-q"]
    assert main(["simulate", str(tmp_path / "gaps.csv"), *opts, "-o", str(tmp_path / "sim")]) == 0
    persons = pd.read_csv(tmp_path / "sim" / "person_scores.csv").set_index("subject_id")
    out = tmp_path / "live"
    assert main(["evaluate", *opts, "--subject", f"replay:{tmp_path / 'gaps.csv'}#m31", "-o",
                 str(out)]) == 0
    row = json.loads((out / "results.json").read_text())[0]
    want = int(persons.loc["m31", "n_skipped"])
    assert want > 0 and row["n_skipped"] == want and row["n_items"] == persons.loc["m31",
                                                                                   "n_items"]
    assert row["n_asked"] == row["n_items"] + want
    assert row["theta"] == pytest.approx(persons.loc["m31", "theta"], abs=1e-12)
    capsys.readouterr()
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["n_skipped"] == want
    _, kv, items = _page(out / "reports" / f"{row['run_id']}.html")
    assert kv["items asked"] == f"{row['n_asked']} (scored and not)"
    assert kv["no recorded answer"].startswith(f"{want} item")
    assert sum(r["score"] == "no score" for r in items) == want
