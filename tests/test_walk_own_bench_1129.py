"""A user's own benchmark, walked from the docs (docs/your_benchmark.md, docs/live.md): a
continuous metric on 0-100, a judge's 1-10 ratings as a graded bank, simulate, a live run
(cmd: / replay:), runs, the page and compare-models. Each test fails without its fix."""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.irt.polybank import PolyBank

IDS = [f"j{k}" for k in range(6)]


def _refused(argv, capsys, *, started=False):
    """The one error line of a refused command (``started``: after the line naming the run
    it started)."""
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2, (argv, rc, err)
    if started:
        first, err = err.split("\n", 1)
        assert first.startswith("run "), first
    assert "\n" not in err and err.startswith("error: "), err
    return err


@pytest.fixture()
def graded(tmp_path):
    """A six-item graded bank of a judge's 1-10 ratings (levels 1, 4, 7, 10), and a program
    printing one fixed rating for every item."""
    levels = [np.array([1.0, 4.0, 7.0, 10.0])] * len(IDS)
    params = np.column_stack([np.full(6, 1.2), np.full(6, 1.0), np.zeros(6), np.full(6, -1.0)])
    path = tmp_path / "judge.csv"
    PolyBank(IDS, params, "graded", levels, scales=(1, 10)).write(path)
    prog = tmp_path / "rate.py"
    prog.write_text("import json, sys\nfor line in sys.stdin:\n"
                    "    item = json.loads(line)['item_id']\n"
                    "    print(json.dumps({'item_id': item, 'score': float(sys.argv[1])}),"
                    " flush=True)\n")
    return path, prog


def test_off_scale_rating_names_the_option_once(graded, tmp_path, capsys):
    """`--rating-range LO HI, --rating-range`: the library's keyword rewritten next to the
    option it already named."""
    bank, prog = graded
    err = _refused(["evaluate", "--bank", bank, "--subject", f"cmd:{sys.executable} {prog} 11",
                    "--llm", "m", "-o", tmp_path / "run"], capsys, started=True)
    assert "outside the item's scale 1-10" in err and "--rating-range LO HI)" in err, err
    assert err.count("--rating-range") == 1 and "value_range" not in err, err


def test_graded_build_bank_error_keeps_the_python_call(tmp_path, capsys):
    """`Python: calibrate(ratings, --model graded)`: the CLI rewrote the Python call it quotes."""
    ratings = pd.DataFrame(np.random.default_rng(0).integers(1, 11, (20, 6)), columns=IDS,
                           index=[f"m{i}" for i in range(20)])
    ratings.to_csv(tmp_path / "r.csv")
    err = _refused(["build-bank", tmp_path / "r.csv", "-o", tmp_path / "b", "--score-range", 1,
                    10, "--model", "graded"], capsys)
    assert "Python: calibrate(ratings, model='graded')" in err, err
    assert "CLI: calibrate RATINGS --model graded -o BANK.csv;" in err, err
    assert "(ratings, --model" not in err, err


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A bank folder of a 0-100 metric (24 source models, 30 items: more than its budget of
    10, so it has a predictor) and 4 held-out models."""
    d = tmp_path_factory.mktemp("own")
    rng = np.random.default_rng(3)
    theta = rng.normal(size=28)
    p = 1 / (1 + np.exp(-(theta[:, None] - np.linspace(-1.5, 1.5, 30))))
    y = np.clip(p + rng.normal(0, 0.15, p.shape), 0, 1)
    df = pd.DataFrame(np.round(100 * y, 2), columns=[f"t.{j}" for j in range(30)],
                      index=pd.Index([f"m{i}" for i in range(28)], name="model"))
    df.iloc[:24].to_csv(d / "source.csv")
    df.iloc[24:].to_csv(d / "targets.csv")
    assert main(["build-bank", str(d / "source.csv"), "-o", str(d / "bank"), "--score-range",
                 "0", "100", "--budget", "10", "-q"]) == 0
    return d


@pytest.mark.parametrize("opt", [["--selection", "kl"], ["--randomesque", "3"],
                                 ["--estimator", "wle"], ["--se-method", "posterior"],
                                 ["--theta0", "1"], ["--reference"], ["--no-bound-stop"],
                                 ["--bound-margin", "2"], ["--selected-folder"]])
def test_simulate_predictor_refuses_the_adaptive_tests_options(folder, opt, tmp_path, capsys):
    """`atlas simulate --bank DIR` (the folder's predictor) took these and ignored them."""
    err = _refused(["simulate", folder / "targets.csv", "--bank", folder / "bank", *opt,
                    "-o", tmp_path / "sim"], capsys)
    assert f"{opt[0]} is the adaptive test's" in err and "--design adaptive" in err, err
    assert not (tmp_path / "sim").exists()


@pytest.mark.parametrize("opt", [["--bound-margin", "2"], ["--no-bound-stop"]])
def test_evaluate_predictor_refuses_the_links_stops(folder, opt, tmp_path, capsys):
    """`atlas evaluate --bank DIR` refused --selection, --se-method ... but took the score
    link's stops (the adaptive test's) and ignored them."""
    err = _refused(["evaluate", "--bank", folder / "bank", "--subject",
                    f"replay:{folder / 'targets.csv'}#m25", *opt, "-o", tmp_path / "run"], capsys)
    assert "--bound-stop / --no-bound-stop" in err or "--bound-margin" in err, err
    assert "is the adaptive test's" in err and not (tmp_path / "run").exists(), err
    assert main(["evaluate", "--bank", str(folder / "bank"), "--design", "adaptive",
                 "--subject", f"replay:{folder / 'targets.csv'}#m25", *opt, "--max-items", "5",
                 "--min-items", "5", "-o", str(tmp_path / "ada"), "-q"]) == 0


def test_results_json_scores_read_as_recorded(folder, tmp_path, capsys):
    """results.json gave a recorded 58.82 as 58.820000000000007 and the sum as 730.6000000000001
    (the 0-1 store mapped back to 0-100 with its float noise)."""
    import json

    assert main(["evaluate", "--bank", str(folder / "bank"), "--subject",
                 f"replay:{folder / 'targets.csv'}#m25", "-o", str(tmp_path / "run"), "-q"]) == 0
    row = json.loads((tmp_path / "run" / "results.json").read_text())[0]
    recorded = pd.read_csv(folder / "targets.csv", index_col=0).loc["m25"]
    assert row["scores"] == [float(recorded[i]) for i in row["items"]]
    assert repr(row["score_sum"]) == repr(float(f"{sum(row['scores']):.15g}"))
    assert row["model_based_score"] == row["prediction"]["model_part"]


@pytest.mark.parametrize("opt, kinds", [(["--temperature", "0.5"], "openai:URL"),
                                        (["--device", "cpu"], "hf:PATH_OR_NAME"),
                                        (["--completion"], "openai:URL"),
                                        (["--max-retries", "2"], "completions:URL"),
                                        (["--timeout", "5"], "cmd:COMMAND")])
def test_evaluate_refuses_options_the_subject_does_not_use(folder, opt, kinds, tmp_path, capsys):
    """`--subject replay:... --temperature 0.5` (or --device, --timeout, ...) ran and ignored
    the option: a user meaning it for the program that scores the items is not told."""
    err = _refused(["evaluate", "--bank", folder / "bank", "--subject",
                    f"replay:{folder / 'targets.csv'}#m25", *opt, "-o", tmp_path / "run"], capsys)
    assert f"{opt[0]}" in err and kinds in err and "--subject replay: does not use it" in err
    assert not (tmp_path / "run").exists()


def test_compare_models_shows_each_runs_prediction_as_runs_does(folder, tmp_path, capsys):
    """compare-models printed each run's predicted score without its interval (and --json
    had no interval of either run): the number `atlas runs` and the page show as
    "17.7 (13.5-22.9)" could not be matched to it."""
    import json

    db = tmp_path / "runs.sqlite"
    for m in ("m25", "m26"):
        assert main(["evaluate", "--bank", str(folder / "bank"), "--subject",
                     f"replay:{folder / 'targets.csv'}#{m}", "--db", str(db), "-q"]) == 0
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    runs = runs if isinstance(runs, list) else runs["runs"]
    ids = [r["run_id"] for r in sorted(runs, key=lambda r: r["model"])]
    assert main(["runs", "--db", str(db)]) == 0
    listed = capsys.readouterr().out
    assert main(["compare-models", *ids, "--db", str(db), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert main(["compare-models", *ids, "--db", str(db)]) == 0
    table = capsys.readouterr().out
    for k in ("first", "second"):
        shown = f"{row[k]:.1f} ({row[k + '_lo']:.1f}-{row[k + '_hi']:.1f})"
        assert shown in table and shown in listed, (shown, table, listed)


def test_simulate_on_a_graded_bank_names_the_benchmark(graded, tmp_path, capsys):
    """`atlas simulate` on a judge's graded bank (`calibrate --name judge-qa`) named it
    nowhere: "atlas simulate (graded bank, 6 items)", "predicted mean rating"."""
    bank, _ = graded
    PolyBank.read(bank).with_benchmark("judge-qa").write(tmp_path / "named.csv")
    pd.DataFrame({"subject_id": ["a", "b"], "theta": [0.0, 1.0]}).to_csv(tmp_path / "th.csv",
                                                                         index=False)
    assert main(["simulate", "--bank", str(tmp_path / "named.csv"), "--thetas",
                 str(tmp_path / "th.csv"), "--max-items", "4", "-o", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "atlas simulate (judge-qa: graded bank, 6 items)" in out, out


def test_build_bank_refuses_fraction_scores_on_a_0_100_scale(folder, tmp_path, capsys):
    """`--score-range 0 100 --scores S.csv` with the published scores as 0-1 fractions was
    built silently: every prediction then read about 0.5 "points" on the 0-100 scale."""
    src = pd.read_csv(folder / "source.csv", index_col=0)
    mean = src.mean(axis=1)
    (mean / 100).rename("score").to_csv(tmp_path / "s01.csv")
    err = _refused(["build-bank", folder / "source.csv", "-o", tmp_path / "b", "--score-range",
                    0, 100, "--scores", tmp_path / "s01.csv", "--budget", 10], capsys)
    assert "every score is within 0-1" in err and "--score-range 0 100" in err, err
    assert not (tmp_path / "b").exists()
    mean.rename("score").to_csv(tmp_path / "s100.csv")     # on the scale: built
    assert main(["build-bank", str(folder / "source.csv"), "-o", str(tmp_path / "b"),
                 "--score-range", "0", "100", "--scores", str(tmp_path / "s100.csv"),
                 "--budget", "10", "-q"]) == 0


def test_build_bank_warns_of_a_fraction_chance_on_a_0_100_scale(folder, tmp_path, capsys):
    """`--score-range 0 100 --chance 0.25` (four options, typed as a fraction) was taken as
    a quarter of a point without a word."""
    assert main(["build-bank", str(folder / "source.csv"), "-o", str(tmp_path / "b"),
                 "--score-range", "0", "100", "--chance", "0.25", "--budget", "10",
                 "-q"]) == 0
    err = capsys.readouterr().err
    assert "--chance 0.25 on --score-range 0 100" in err and "(25)" in err, err
    assert main(["build-bank", str(folder / "source.csv"), "-o", str(tmp_path / "b2"),
                 "--score-range", "0", "100", "--chance", "25", "--budget", "10", "-q"]) == 0
    assert "--chance" not in capsys.readouterr().err


def test_dropped_items_list_says_how_many_more(tmp_path):
    """`13 item(s) rated at fewer than two levels ... were left out: [10 ids]` listed ten of
    thirteen as if they were all."""
    import warnings

    from atlascat.irt.polycal import calibrate_ordinal

    rng = np.random.default_rng(1)
    ratings = pd.DataFrame(rng.integers(1, 4, (30, 15)).astype(float),
                           columns=[f"i{j}" for j in range(15)])
    ratings.iloc[:, :12] = 2.0          # twelve items every subject rated alike
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calibrate_ordinal(ratings, "graded", on_empty="drop", max_iter=5)
    said = " ".join(str(w.message) for w in caught)
    assert "12 item(s) rated at fewer than two levels" in said, said
    assert "i0, i1," in said and ", ... (2 more)" in said and "['i0'" not in said, said


def test_step_lines_keep_their_columns_at_the_top_of_the_scale(folder, tmp_path, capsys):
    """A step scored 100.0 on a 0-100 folder pushed its line's "predicted" one column right
    of every other step's ("score 100.0  predicted" against "score 41.4  predicted")."""
    cols = pd.read_csv(folder / "targets.csv", index_col=0).columns
    row = pd.DataFrame([[100.0 if j % 2 else 5.5 for j in range(len(cols))]], columns=cols,
                       index=pd.Index(["top"], name="model"))
    row.to_csv(tmp_path / "top.csv")
    assert main(["evaluate", "--bank", str(folder / "bank"), "--subject",
                 f"replay:{tmp_path / 'top.csv'}#top", "-o", str(tmp_path / "run")]) == 0
    steps = [ln for ln in capsys.readouterr().err.splitlines() if " step " in ln]
    assert any("score 100.0" in ln for ln in steps) and any("score 5.5 " in ln for ln in steps)
    assert len({ln.index("predicted") for ln in steps}) == 1, steps


def test_info_describes_a_matrix_on_a_0_100_scale(folder, capsys):
    """`atlas info SCORES.csv` on a 0-100 metric refused the file ("value 66.67 outside
    [0, 1]"), where a 1-10 ratings file is described with its next command."""
    import json

    assert main(["info", str(folder / "targets.csv")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "scores on another scale than 0-1" in out, out
    assert f"atlas build-bank {folder / 'targets.csv'} --score-range 0 100" in out, out
    assert main(["info", str(folder / "targets.csv"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    src = pd.read_csv(folder / "targets.csv", index_col=0)
    assert summary["kind"] == "scores" and summary["items"] == src.shape[1]
    assert summary["range"] == [float(src.min().min()), float(src.max().max())]


def test_predictor_page_settings_are_the_predictors(folder, tmp_path):
    """A predictor run's page listed the adaptive test's settings under Settings ("selection":
    "mfi", "randomesque": 5, "r_max": 0.2, "se_stop": ...), none of which it used."""
    import html
    import re

    assert main(["evaluate", "--bank", str(folder / "bank"), "--subject",
                 f"replay:{folder / 'targets.csv'}#m25", "--max-items", "8", "--seed", "4",
                 "-o", str(tmp_path / "run"), "-q"]) == 0
    page = next((tmp_path / "run" / "reports").glob("*.html")).read_text()
    settings = html.unescape(re.search(r"<h2>Settings</h2><pre>(.*?)</pre>", page, re.S)[1])
    assert '"predictor"' in settings and '"max_items": 8' in settings, settings
    assert '"seed": 4' in settings, settings
    for word in ("randomesque", "selection", "r_max", "se_stop", '"cat"'):
        assert word not in settings, settings


@pytest.mark.parametrize("command, opt", [("evaluate", ["--bound-margin", "2"]),
                                          ("simulate", ["--bound-margin", "2"])])
def test_a_bank_without_a_score_link_refuses_its_stops(graded, command, opt, tmp_path, capsys):
    """A judge's graded bank (no score link) took --bound-margin, the score link's floor / top
    stop's margin, and ignored it (--no-bound-stop, which turns the stop off, is taken by both
    commands: tests/test_simulate_equals_evaluate.py)."""
    bank, _ = graded
    ratings = pd.DataFrame([[1, 4, 7, 10, 4, 7]], columns=IDS,
                           index=pd.Index(["r"], name="model"))
    ratings.to_csv(tmp_path / "r.csv")
    argv = (["evaluate", "--bank", bank, "--subject", f"replay:{tmp_path / 'r.csv'}#r"]
            if command == "evaluate" else ["simulate", tmp_path / "r.csv", "--bank", bank])
    err = _refused([*argv, *opt, "--max-items", 3, "-o", tmp_path / "out"], capsys)
    assert opt[0] in err and "no score link" in err, err
    assert not (tmp_path / "out").exists()


def test_a_plain_bank_file_refuses_the_bound_margin(tmp_path, capsys):
    """`atlas simulate --bank BANK.csv --thetas T --bound-margin M`: no link, the margin
    ignored."""
    from atlascat.irt.bank import ItemBank

    ItemBank(IDS, np.ones(6), np.linspace(-1, 1, 6)).write(tmp_path / "b.csv")
    pd.DataFrame({"subject_id": ["a"], "theta": [0.0]}).to_csv(tmp_path / "t.csv", index=False)
    err = _refused(["simulate", "--bank", tmp_path / "b.csv", "--thetas", tmp_path / "t.csv",
                    "--bound-margin", 0.05, "-o", tmp_path / "out"], capsys)
    assert "--bound-margin" in err and "no score link" in err, err
    assert not (tmp_path / "out").exists()


def test_build_bank_warns_of_a_range_its_scores_barely_use(folder, tmp_path, capsys):
    """`--score-range 0 1000` on 0-100 scores (a typo) built silently: every prediction then
    reads on a scale ten times the metric's."""
    assert main(["build-bank", str(folder / "source.csv"), "-o", str(tmp_path / "b"),
                 "--score-range", "0", "1000", "--budget", "10", "-q"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "every score lies in the bottom quarter of --score-range 0 1000" in err, err
    assert main(["build-bank", str(folder / "source.csv"), "-o", str(tmp_path / "b2"),
                 "--score-range", "0", "100", "--budget", "10", "-q"]) == 0
    assert "bottom quarter" not in capsys.readouterr().err


def test_a_rating_runs_observed_mean_is_over_the_items_scored(graded, tmp_path, capsys):
    """A judge that gave no rating (null) to some items: the headline said "6 items scored,
    9 asked" and the next line "observed 4.00 (over the 6 items asked)"."""
    bank, _ = graded
    prog = tmp_path / "some.py"
    prog.write_text("import json, sys\nfor n, line in enumerate(sys.stdin):\n"
                    "    item = json.loads(line)['item_id']\n"
                    "    print(json.dumps({'item_id': item, 'score': None if n % 2 else 7}),"
                    " flush=True)\n")
    assert main(["evaluate", "--bank", str(bank), "--subject", f"cmd:{sys.executable} {prog}",
                 "--llm", "m", "--max-items", "3", "--min-items", "3",
                 "-o", str(tmp_path / "run")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(3 items scored, 5 asked)" in out, out
    assert "observed 7.00 (over the 3 items scored)" in out, out


def test_a_programs_log_line_on_stdout_says_where_it_belongs(folder, tmp_path, capsys):
    """A scoring program that prints "loading model..." on standard output stopped the run
    with "reply line 1 is not a JSON object ..." and no word of where such a line goes."""
    prog = tmp_path / "chatty.py"
    prog.write_text("import json, sys\nprint('loading model...', flush=True)\n"
                    "for line in sys.stdin:\n"
                    "    item = json.loads(line)['item_id']\n"
                    "    print(json.dumps({'item_id': item, 'score': 50}), flush=True)\n")
    err = _refused(["evaluate", "--bank", folder / "bank", "--subject",
                    f"cmd:{sys.executable} {prog}", "--llm", "m", "-o", tmp_path / "run"],
                   capsys, started=True)
    assert "'loading model...'" in err and "goes to standard error" in err, err


def test_report_on_a_simulate_folder_says_what_it_holds(folder, tmp_path, capsys):
    """`atlas report SIM_DIR` on `atlas simulate -o SIM_DIR` said only "create one with atlas
    benchmark": not that the folder is simulate's, whose predictions are in person_scores.csv."""
    assert main(["simulate", str(folder / "targets.csv"), "--bank", str(folder / "bank"),
                 "-o", str(tmp_path / "sim"), "-q"]) == 0
    capsys.readouterr()
    err = _refused(["report", tmp_path / "sim", "-o", tmp_path / "r.html"], capsys)
    assert "it holds atlas simulate's output (person_scores.csv" in err, err
    assert not (tmp_path / "r.html").exists()


def test_a_program_that_dies_says_the_items_of_its_round(folder, tmp_path, capsys):
    """A program that exited after 3 answered items said "exited with status 3 after scoring
    0 of 1 item(s)" next to "saved with 3 answered item(s)": 1 of what?"""
    prog = tmp_path / "dies.py"
    prog.write_text("import json, sys\nfor n, line in enumerate(sys.stdin):\n"
                    "    if n == 3:\n        sys.exit(3)\n"
                    "    item = json.loads(line)['item_id']\n"
                    "    print(json.dumps({'item_id': item, 'score': 50}), flush=True)\n")
    err = _refused(["evaluate", "--bank", folder / "bank", "--subject",
                    f"cmd:{sys.executable} {prog}", "--llm", "m", "-o", tmp_path / "run", "-q"],
                   capsys, started=True)
    assert "after scoring 0 of the 1 item(s) just sent to it" in err, err
    assert "saved with 3 answered item(s)" in err, err


def test_build_bank_help_names_every_model_it_fits(capsys):
    """`atlas build-bank --help` listed "auto, 1pl, 2pl, 3pl or 4pl" while it fits rasch too
    (its error names it), and said nothing of where a judge's graded model is fitted."""
    assert main(["build-bank", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "rasch, 1pl, 2pl, 3pl or 4pl" in out and "atlas calibrate --model graded" in out
