"""A user with LLM-judge ratings reads every surface in the terms of ratings: the predicted
mean rating (never a "predicted <file name> score", never an accuracy, never right / asked),
each step's rating, theta as the result lines print it; `atlas score` on an ordinal bank gives
the predicted mean rating that simulate and evaluate give."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.cli import app
from atlascat.irt import polytomous as poly
from atlascat.irt.polybank import PolyBank

N_MODELS = 60


def _bank(ids, levels, rng) -> PolyBank:
    k = len(levels)
    a = rng.lognormal(0.2, 0.3, len(ids))
    d = -np.sort(rng.normal(0, 1.2, (len(ids), k - 1)), axis=1) * a[:, None]
    return PolyBank(ids, np.column_stack([a, d]), "graded", [np.asarray(levels, float)] * len(ids))


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A judge's 1-10 ratings of 12 prompts (one scale: judge.csv, judge_bank.csv) and, beside
    them, 4 rubric items rated 0-3 (two scales: mixed.csv, mixed_bank.csv); 60 models."""
    root = tmp_path_factory.mktemp("rating_words")
    rng = np.random.default_rng(3)
    judge = _bank([f"p{j}" for j in range(12)], range(1, 11), rng)
    rubric = _bank([f"r{j}" for j in range(4)], range(4), rng)
    theta = rng.normal(size=N_MODELS)
    models = [f"llm-{i}" for i in range(N_MODELS)]
    rate = {}
    for bank in (judge, rubric):
        cats = poly.sample(bank.models, bank.params, theta, rng)
        low = bank.levels[0][0]
        rate[bank.item_ids[0]] = pd.DataFrame(cats + low, index=models, columns=bank.item_ids)
    one = rate["p0"].rename_axis("model")
    one.to_csv(root / "judge.csv")
    pd.concat([one, rate["r0"]], axis=1).rename_axis("model").to_csv(root / "mixed.csv")
    judge.write(root / "judge_bank.csv")
    PolyBank.combine(judge, rubric).write(root / "mixed_bank.csv")
    return root


def _run(*args: str) -> str:
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, r.output + repr(r.exception)
    return r.output


def _evaluate(root: Path, bank: str, ratings: str, out: Path) -> tuple[str, dict]:
    text = _run("evaluate", "--bank", str(root / bank), "--subject",
                f"replay:{root / ratings}#llm-1", "--min-items", "5", "--max-items", "8",
                "-o", str(out))
    return text, json.loads((out / "results.json").read_text())[0]


def _page(out: Path) -> str:
    return html.unescape(next((out / "reports").glob("*.html")).read_text())


def test_a_run_on_one_rating_scale_reads_as_a_mean_rating_everywhere(root, tmp_path):
    out = tmp_path / "one"
    text, row = _evaluate(root, "judge_bank.csv", "judge.csv", out)
    pred = row["prediction"]
    from atlascat.scorelink.prediction import score_text   # the one digits rule (1-10: 2)

    def t(v):
        return score_text(v, pred["scale"])
    shown = f"{t(pred['score'])} (95% interval {t(pred['lo'])}-{t(pred['hi'])})"
    assert f"predicted mean rating: {shown}" in text
    assert "metric: mean rating, on the rating scale (1-10)" in text
    assert "judge_bank score" not in text and "metric's own scale" not in text
    page = _page(out)
    assert f"predicted mean rating: {shown}" in page
    assert "model-based mean rating (expected over the bank at theta, on the rating scale)" \
        in page
    assert f"observed mean rating (over the items asked, on the rating scale)</td><td>" \
        f"{t(np.mean(row['scores']))}<" in page
    assert "<th>rating</th>" in page
    assert "accuracy" not in page.lower() and "mean score" not in page


def test_a_run_on_several_rating_scales_has_no_accuracy_on_its_page(root, tmp_path):
    out = tmp_path / "mixed"
    text, row = _evaluate(root, "mixed_bank.csv", "mixed.csv", out)
    assert "predicted mean rating: " in text and "mixed_bank score" not in text
    page = _page(out)
    assert "accuracy" not in page.lower() and "right / asked" not in page
    assert "model-based mean rating, as a share of each item's scale" in page
    assert "both as shares of each item's scale" in page
    assert f"{100 * row['model_based_score']:.1f}%" in page


def test_runs_run_shows_each_rating_and_theta_as_the_result_lines(root, tmp_path):
    out = tmp_path / "steps"
    text, row = _evaluate(root, "judge_bank.csv", "judge.csv", out)
    steps = _run("runs", "--run", row["run_id"], "--db", str(out / "runs.sqlite"))
    header = next(line for line in steps.splitlines() if line.lstrip().startswith("step"))
    assert " rating " in header and " score " not in header
    last = steps.splitlines()[-2].split()     # the last step, above the predicted line
    assert last[4:6] == [f"{row['theta']:.3f}", f"{row['se']:.3f}"]
    assert f"theta = {row['theta']:.3f} +- {row['se']:.3f}" in text
    table = next(line for line in text.splitlines() if line.startswith(row["run_id"])).split()
    assert f"{row['theta']:.3f}" in table and f"{row['se']:.3f}" in table
    assert "None" not in steps           # tokens a rater never reports: "-"
    assert "predicted mean rating: " in steps.splitlines()[-1]


def test_simulate_names_the_predicted_mean_rating(root, tmp_path):
    text = _run("simulate", str(root / "judge.csv"), "--bank", str(root / "judge_bank.csv"),
                "--max-items", "6", "-o", str(tmp_path / "sim"))
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text())
    from atlascat.scorelink.prediction import score_text   # the one digits rule (1-10: 2)

    t = [score_text(summary[k], summary["scale"]) for k in ("score_mean", "width_mean")]
    assert f"predicted mean rating, mean over models {t[0]} (95% intervals {t[1]} points " \
        "wide)" in text
    assert "judge_bank score" not in text


def test_simulate_on_several_rating_scales_says_its_shares_are_percent(root, tmp_path):
    """Items on several scales: the predicted mean rating is a share of each item's scale,
    which the table's row shows in percent and names so (a live run prints it with %)."""
    text = _run("simulate", str(root / "mixed.csv"), "--bank", str(root / "mixed_bank.csv"),
                "--max-items", "6", "-o", str(tmp_path / "sim"))
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text())
    assert summary["scale"] == [0.0, 1.0] and "share" in summary["metric"]
    assert (f"predicted mean rating, as a share of each item's scale, mean over models "
            f"{100 * summary['score_mean']:.1f}% (95% intervals "
            f"{100 * summary['width_mean']:.1f} points wide)") in " ".join(text.split())


def test_score_gives_the_predicted_mean_rating_simulate_and_evaluate_give(root, tmp_path):
    """`atlas score` on an ordinal bank: score, score_lo, score_hi = the predicted mean rating
    over the bank (polyscore.predict_mean_rating: the rated items as rated, the others
    expected), what simulate and a live run predict; a model that rated every item gets its
    own mean rating, with no interval left."""
    from atlascat.irt.polyscore import predict_mean_rating

    ratings = pd.read_csv(root / "judge.csv", index_col=0)
    ratings.iloc[:20, :6] = np.nan              # 20 models rated half the prompts
    ratings.to_csv(tmp_path / "half.csv")
    out = tmp_path / "scores.csv"
    text = _run("score", str(tmp_path / "half.csv"), "--bank", str(root / "judge_bank.csv"),
                "-o", str(out))
    df = pd.read_csv(out)
    assert list(df.columns[:8]) == ["subject_id", "theta", "se", "n_items", "mean_rating",
                                    "score", "score_lo", "score_hi"]
    bank = PolyBank.read(root / "judge_bank.csv")
    np.testing.assert_allclose(df[["score", "score_lo", "score_hi"]].to_numpy(),
                               np.column_stack(predict_mean_rating(ratings, bank)), rtol=1e-7)
    part, full = df.iloc[:20], df.iloc[20:]
    assert (part["score_lo"] < part["score"]).all() and (part["score"] < part["score_hi"]).all()
    np.testing.assert_allclose(full["score"], full["mean_rating"], rtol=1e-7)
    assert (1 <= df["score_lo"]).all() and (df["score_hi"] <= 10).all()
    assert re.search(r"60 subjects, median SE \d\.\d{4}", text), text

def _bars(monkeypatch, *args: str) -> str:
    """The progress bars a command draws on a terminal (stderr forced to one), as text."""
    import io

    from rich.console import Console

    import atlascat.cli._common as display

    buf = io.StringIO()
    monkeypatch.setattr(display, "err_console", Console(file=buf, force_terminal=True, width=100))
    _run(*args)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())


def test_the_calibration_bar_ends_full_at_the_iteration_the_fit_stopped(root, tmp_path,
                                                                        monkeypatch):
    """The EM bar of a graded calibration ends at n_iter of n_iter (an accelerated EM step
    counts two iterations; the bar counts both), not at its --max-iter cap."""
    text = _bars(monkeypatch, "calibrate", str(root / "judge.csv"), "--model", "graded", "-o",
                 str(tmp_path / "b.csv"), "--summary", str(tmp_path / "s.json"))
    n_iter = json.loads((tmp_path / "s.json").read_text())["n_iter"]
    assert n_iter > 2 and f"{n_iter}/{n_iter}" in text and "1000/1000" not in text
    assert "SE" not in text


def test_the_standard_errors_count_their_parameters_on_a_second_bar(root, tmp_path,
                                                                    monkeypatch):
    """--se: the EM bar ends full at its iterations, then an SE bar counts the information's
    columns (one per free parameter) to the last."""
    text = _bars(monkeypatch, "calibrate", str(root / "judge.csv"), "--model", "graded",
                 "--se", "-o", str(tmp_path / "b.csv"), "--summary", str(tmp_path / "s.json"))
    summary = json.loads((tmp_path / "s.json").read_text())
    n_iter, k = summary["n_iter"], summary["n_parameters"]
    em = re.findall(r"EM .*? (\d+)/(\d+)", text)
    se = re.findall(r"SE .*? (\d+)/(\d+)", text)
    assert em[-1] == (str(n_iter), str(n_iter)) and se[-1] == (str(k), str(k))


def test_a_calibration_warns_about_categories_few_models_gave(tmp_path):
    """40 models' 1-10 ratings: each item has up to 10 parameters and some of its levels were
    given by one or two models; the graded calibration says so as the 2PL's does on 32 models
    (IdentificationWarning, counted), and stays quiet on 400 models' 1-5 ratings."""
    from atlascat.irt.defaults import IdentificationWarning
    from atlascat.irt.polycal import calibrate_ordinal

    rng = np.random.default_rng(8)
    bank = _bank([f"p{j}" for j in range(6)], range(1, 11), rng)
    few = pd.DataFrame(poly.sample(bank.models, bank.params, rng.normal(size=40), rng) + 1.0)
    counts = [few[c].value_counts().reindex(few[c].unique()) for c in few]
    rare = sum(int((c < 3).sum()) for c in counts)
    assert rare > 0
    with pytest.warns(IdentificationWarning) as got:
        calibrate_ordinal(few, "graded", max_iter=5)
    notes = [str(w.message) for w in got]
    kmax = max(len(c) for c in counts)        # the most levels an item was given
    assert any(n.startswith(f"40 subjects for up to {kmax} parameters per item") for n in notes)
    assert any(n.startswith(f"{rare} of {sum(len(c) for c in counts)} categories") for n in notes)
    small = _bank([f"q{j}" for j in range(5)], range(1, 6), rng)
    many = pd.DataFrame(poly.sample(small.models, small.params, rng.normal(size=400), rng))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentificationWarning)
        calibrate_ordinal(many, "graded", max_iter=5)


def test_anova_counts_its_fits_on_a_bar(root, monkeypatch):
    """`atlas anova` fits each model in turn (seconds each on a judge's ratings): a bar
    counts them, ending at the number of models."""
    text = _bars(monkeypatch, "anova", str(root / "judge.csv"), "--model", "graded",
                 "--model", "gpcm")
    assert re.findall(r"fits .*? (\d+)/(\d+)", text)[-1] == ("2", "2")


@pytest.mark.parametrize("extra", [[], ["--model", "graded"]])
def test_benchmark_on_ratings_says_which_commands_take_them(root, tmp_path, extra):
    """`atlas benchmark` on a judge's ratings: one line pointing to calibrate --model graded
    and simulate (not the reader's hint to use --model graded, which benchmark refuses)."""
    from atlascat.errors import AtlasError

    r = CliRunner().invoke(app, ["benchmark", str(root / "judge.csv"), "-o",
                                 str(tmp_path / "b"), *extra])
    assert isinstance(r.exception, AtlasError), r.output
    msg = str(r.exception)
    assert "\n" not in msg and "not ratings" in msg
    assert "--model graded -o bank.csv" in msg and "atlas simulate HELD_OUT.csv" in msg


def test_reading_ratings_as_a_response_matrix_says_how_python_takes_them(root):
    """A Python user who reads a judge's ratings with ResponseMatrix.read is told how the
    library takes ratings (calibrate(..., model='graded') on a DataFrame or the path), in one
    line."""
    import atlascat as at
    from atlascat.errors import ResponseDataError

    with pytest.raises(ResponseDataError) as got:
        at.ResponseMatrix.read(root / "judge.csv")
    msg = str(got.value)
    assert "\n" not in msg and "Python: calibrate(ratings, model='graded')" in msg
    res = at.calibrate(root / "judge.csv", model="graded", max_iter=3)   # as it says
    assert type(res.bank).__name__ == "PolyBank"


def test_anova_of_ratings_normalizes_r_item_ids(root, tmp_path, monkeypatch):
    """--normalize-ids on ratings strips R's 'X' prefix from the ids the fits see (an option
    accepted is an option applied)."""
    import atlascat.irt.calibrate as cal

    ratings = pd.read_csv(root / "judge.csv", index_col=0)
    ratings.columns = [f"X{j}" for j in range(ratings.shape[1])]
    ratings.to_csv(tmp_path / "r.csv")
    seen, original = [], cal.calibrate

    def spy(rm, **kw):
        seen.append(list(rm.columns))
        return original(rm, **kw)

    monkeypatch.setattr(cal, "calibrate", spy)   # anova imports it when it runs
    _run("anova", str(tmp_path / "r.csv"), "--model", "graded", "--model", "gpcm",
         "--normalize-ids")
    assert len(seen) == 2 and all(ids == [str(j) for j in range(12)] for ids in seen)


@pytest.mark.parametrize("model", ["graded", "2pl"])
def test_calibrate_names_every_file_it_wrote(root, tmp_path, model):
    """calibrate -o, --summary and --scores: the closing line names all three."""
    data = root / "judge.csv"
    if model == "2pl":     # right / wrong answers: a judge's 6 or better
        (pd.read_csv(data, index_col=0) >= 6).astype(int).to_csv(tmp_path / "b.csv")
        data = tmp_path / "b.csv"
    out, summ, sc = tmp_path / "bank.csv", tmp_path / "s.json", tmp_path / "theta.csv"
    text = _run("calibrate", str(data), "--model", model, "-o", str(out), "--summary",
                str(summ), "--scores", str(sc))
    assert f"wrote {out}, {summ} and {sc}" in " ".join(text.split())
    assert sc.is_file() and summ.is_file()


@pytest.mark.parametrize("score, shown", [("7", 'rated "7"'), ("seven", 'rated "seven"')])
def test_a_rating_that_is_not_a_number_is_quoted_as_the_rater_printed_it(score, shown):
    """The rater printed JSON: the error quotes it as JSON (null, "7"), not as Python."""
    from atlascat.errors import LiveRunError
    from atlascat.live.subjects.itemscored import parse_scores

    with pytest.raises(LiveRunError) as got:
        parse_scores(["a"], json.dumps({"item_id": "a", "score": score}), "cmd", ratings=True)
    assert shown in str(got.value) and "a rating is a number" in str(got.value)


@pytest.mark.parametrize("command", [["info", "{run}"], ["report", "{run}"],
                                     ["simulate", "{judge}", "--bank", "{run}", "-o", "{sim}"]])
def test_a_live_run_folder_given_as_a_bank_or_benchmark_run_says_where_its_runs_are(
        root, tmp_path, command):
    """The folder `atlas evaluate -o` wrote, given where a bank folder or a benchmark run is
    read: one line saying it holds live runs and how to list them (atlas runs --db)."""
    out = tmp_path / "run"
    _evaluate(root, "judge_bank.csv", "judge.csv", out)
    args = [a.format(run=out, judge=root / "judge.csv", sim=tmp_path / "sim") for a in command]
    r = CliRunner().invoke(app, args)
    from atlascat.cli._common import cli_advice

    assert r.exit_code != 0 and r.exception is not None
    advice = cli_advice(r.exception)
    assert f"atlas runs --db {out / 'runs.sqlite'}" in advice and "atlas build-bank" not in advice


def test_compare_models_of_rating_runs_names_the_rating_scale(root, tmp_path):
    """Two runs on a bank of items on several scales: the difference is in points of percent
    of each item's scale, and the JSON rows say so too."""
    runs = []
    for model in ("llm-1", "llm-2"):
        out = tmp_path / model
        _run("evaluate", "--bank", str(root / "mixed_bank.csv"), "--subject",
             f"replay:{root / 'mixed.csv'}#{model}", "--min-items", "5", "--max-items", "8",
             "-q", "-o", str(out))
        runs.append(str(out))
    text = _run("compare-models", *runs)
    assert "(mean rating, points of percent of each item's scale, 95% interval)" in text
    rows = json.loads(_run("compare-models", *runs, "--json").strip().splitlines()[-1])["rows"]
    assert rows[0]["unit"] == "mean rating, points of percent of each item's scale"


def test_a_binary_calibration_counts_its_standard_errors_on_a_second_bar(root, tmp_path,
                                                                         monkeypatch):
    """The same SE bar for right/wrong answers (a judge's 6 or better): EM, then SE to the
    number of free parameters."""
    (pd.read_csv(root / "judge.csv", index_col=0) >= 6).astype(int).to_csv(tmp_path / "b.csv")
    text = _bars(monkeypatch, "calibrate", str(tmp_path / "b.csv"), "--model", "2pl", "--se",
                 "-o", str(tmp_path / "bank.csv"), "--summary", str(tmp_path / "s.json"))
    k = json.loads((tmp_path / "s.json").read_text())["n_parameters"]
    assert re.findall(r"SE .*? (\d+)/(\d+)", text)[-1] == (str(k), str(k))


def test_anova_of_graded_and_gpcm_prints_no_empty_test_columns(root, tmp_path):
    """Not nested: the printed table has the criteria alone (on an 80-column terminal its
    numbers fit unfolded); the CSV keeps mirt's columns, X2, df and p empty."""
    out = tmp_path / "anova.csv"
    text = _run("anova", str(root / "judge.csv"), "--model", "graded", "--model", "gpcm",
                "-o", str(out))
    header = next(line for line in text.splitlines() if line.lstrip().startswith("model"))
    assert header.split() == ["model", "AIC", "SABIC", "HQ", "BIC", "logLik"]
    table = pd.read_csv(out, index_col=0)
    assert list(table.columns[-3:]) == ["X2", "df", "p"] and table["X2"].isna().all()


def test_evaluate_se_method_posterior_gives_the_se_atlas_score_gives(root, tmp_path):
    """The same 12 ratings: `atlas score`'s EAP theta and SE (the posterior SD) are a live
    run's with --se-method posterior; the default information SE differs; a bad value is one
    line."""
    from atlascat.errors import AtlasError

    _run("score", str(root / "judge.csv"), "--bank", str(root / "judge_bank.csv"), "-o",
         str(tmp_path / "s.csv"))
    eap = pd.read_csv(tmp_path / "s.csv", index_col=0).loc["llm-1"]
    rows = {}
    for method in ("posterior", "information"):
        out = tmp_path / method
        _run("evaluate", "--bank", str(root / "judge_bank.csv"), "--subject",
             f"replay:{root / 'judge.csv'}#llm-1", "--fixed-length", "12", "--se-method",
             method, "-q", "-o", str(out))
        rows[method] = json.loads((out / "results.json").read_text())[0]
    assert rows["posterior"]["theta"] == pytest.approx(eap["theta"], abs=1e-6)
    assert rows["posterior"]["se"] == pytest.approx(eap["se"], abs=1e-6)
    assert abs(rows["information"]["se"] - eap["se"]) > 1e-3
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(root / "judge_bank.csv"),
                                 "--subject", f"replay:{root / 'judge.csv'}#llm-1",
                                 "--se-method", "sd", "-o", str(tmp_path / "bad")])
    assert isinstance(r.exception, AtlasError) and "--se-method" in str(r.exception)


def test_se_method_belongs_to_the_adaptive_test_not_to_a_folders_predictor(root, tmp_path):
    """A bank folder read as a score on 1-10 (the few-models route): simulate's predictor runs
    (its --se-method default is no option given), evaluate --se-method with the predictor is
    one line, and with --design adaptive it runs."""
    from atlascat.errors import AtlasError

    rng = np.random.default_rng(4)
    bank = _bank([f"p{j}" for j in range(80)], range(1, 11), rng)
    ratings = pd.DataFrame(poly.sample(bank.models, bank.params, rng.normal(size=40), rng) + 1,
                           index=[f"llm-{i}" for i in range(40)], columns=bank.item_ids)
    ratings.rename_axis("model").to_csv(tmp_path / "r.csv")
    folder = tmp_path / "judge"
    _run("build-bank", str(tmp_path / "r.csv"), "-o", str(folder), "--score-range", "1", "10",
         "-q")
    assert (folder / "predictor.json").is_file()
    _run("simulate", str(tmp_path / "r.csv"), "--bank", str(folder), "-o", str(tmp_path / "s"),
         "-q")
    assert (tmp_path / "s" / "person_scores.csv").is_file()
    subject = ["--subject", f"replay:{tmp_path / 'r.csv'}#llm-1", "--se-method", "posterior"]
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(folder), *subject, "-o",
                                 str(tmp_path / "e")])
    assert isinstance(r.exception, AtlasError) and "--se-method is the adaptive test's" in \
        str(r.exception)
    _run("evaluate", "--bank", str(folder), *subject, "--design", "adaptive", "--max-items",
         "10", "-q", "-o", str(tmp_path / "a"))
