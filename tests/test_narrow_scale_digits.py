"""A user's own 1-5 ratings benchmark (a folder built with ``--score-range 1 5``): its numbers
print to the one digits rule (:func:`atlascat.scorelink.prediction.score_digits`), the same in
every output; `atlas ranks` names its observed mean as the folder does, on the folder's scale;
`atlas score` says which items were answered (a form's, or some of the bank's); a printed
prediction is on the folder's scale; the build summary suggests --chance for multiple choice
only for right / wrong answers."""
from __future__ import annotations

import html
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cli_checks import run_cli


def _ratings(n=30, k=40, seed=0):
    """n models x k items, ratings 1-5 drawn from a graded response model (the library's
    polytomous sampler)."""
    from atlascat.irt import polytomous as poly

    rng = np.random.default_rng(seed)
    a = rng.lognormal(0, 0.3, k)
    d = -np.sort(rng.normal(size=(k, 4)), axis=1) * a[:, None]     # decreasing intercepts
    y = poly.sample("graded", np.column_stack([a, d]), rng.normal(size=n), rng) + 1.0
    return pd.DataFrame(y, index=[f"ckpt-{i:02d}" for i in range(n)],
                        columns=[f"mine.{j}" for j in range(k)]).rename_axis("model")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from atlascat.bankdir import build_bank

    d = tmp_path_factory.mktemp("narrow")
    df = _ratings()
    df.iloc[:26].to_csv(d / "source.csv")
    df.iloc[26:].to_csv(d / "ckpts.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_bank(d / "source.csv", d / "bank", folds=0, budget=20, score_range=(1, 5),
                   name="mine")
    return d, df


def test_the_digits_rule_is_a_function_of_the_scales_width():
    from atlascat.scorelink.prediction import level, score_digits, score_text

    assert score_digits(None) == 1 and score_digits((0, 100)) == 1 and score_digits((0, 20)) == 1
    assert score_digits((1, 5)) == 2 and score_digits((1, 10)) == 2 and score_digits((0, 2)) == 2
    assert score_digits((0, 1)) == 3 and score_digits((-0.5, 0.5)) == 3
    assert score_text(3.977, (1, 5)) == "3.98" and score_text(71.94) == "71.9"
    assert score_text(-0.001, (1, 5)) == "0.00"           # not "-0.00"
    assert level(0.5, (1, 5)) == "3.00" and level(0.5, (0, 100)) == "50.0" and level(0.5) == "50%"


def test_a_narrow_scale_prints_the_same_digits_in_every_output(folder, tmp_path, capsys):
    """`atlas evaluate` on a 1-5 folder printed "predicted 3.8 (3.5-4.1)" and compare-models
    "4.0 3.5 0.4" for 3.977, 3.546, 0.431: one decimal of a 4-point scale. Every output
    (step lines, the result's lines, `atlas runs` and its --run page, the HTML page,
    compare-models) now writes the score, its interval and the difference with 2 decimals,
    each the same number as results.json's, rounded once."""
    def score_text(v, scale):       # the rule on 1-5 (width 4): 2 decimals
        return f"{v:.2f}"

    d, _ = folder
    out = tmp_path / "runs"
    ids, texts = [], []
    for model in ("ckpt-26", "ckpt-27"):
        assert run_cli(["evaluate", "--bank", d / "bank", "--subject",
                        f"replay:{d / 'ckpts.csv'}#{model}", "--max-items", 10, "-o", out]) == 0
        cap = capsys.readouterr()
        texts.append(cap.out + cap.err)
    rows = json.loads((out / "results.json").read_text())
    for row, text in zip(rows, texts):
        lb = row["prediction"]
        assert lb["scale"] == [1.0, 5.0]
        s, lo, hi = (score_text(lb[k], lb["scale"]) for k in ("score", "lo", "hi"))
        assert all(re.fullmatch(r"[1-5]\.[0-9]{2}", v) for v in (s, lo, hi)), (s, lo, hi)
        steps = [ln for ln in text.splitlines() if " step " in ln]
        assert steps[-1].endswith(f"predicted {s} ({lo}-{hi})"), steps[-1]
        assert re.search(r"score [1-5]\.00 ", steps[0]), steps[0]
        assert f"predicted mine score {s} (95% interval {lo}-{hi})" in text
        obs = score_text(row["observed_score"], lb["scale"])
        assert f"observed {obs} (the mean score" in text
        page = html.unescape(Path(row["report"]).read_text())
        assert f"{s} (95% interval {lo}-{hi})" in page
        assert f"on the metric's own scale)</td><td>{obs}</td>" in page
        assert run_cli(["runs", "--db", out / "runs.sqlite", "--run", row["run_id"]]) == 0
        steps_page = capsys.readouterr().out
        assert f"{s} (95% interval {lo}-{hi})" in steps_page
        assert f" {s} " in steps_page.splitlines()[-2] and f" {lo}-{hi} " in steps_page
        ids.append(row["run_id"])
    assert run_cli(["runs", "--db", out / "runs.sqlite"]) == 0
    table = capsys.readouterr().out
    for row in rows:
        lb = row["prediction"]
        s, lo, hi = (score_text(lb[k], lb["scale"]) for k in ("score", "lo", "hi"))
        assert f"{s} ({lo}-{hi})" in table
        assert f" {score_text(row['observed_score'], lb['scale'])} " in table
    assert run_cli(["compare-models", *ids, "--db", out / "runs.sqlite", "--json"]) == 0
    cmp = json.loads(capsys.readouterr().out)["rows"][0]
    assert cmp["digits"] == 2
    assert run_cli(["compare-models", *ids, "--db", out / "runs.sqlite"]) == 0
    line = capsys.readouterr().out.splitlines()[-1].split()
    t = {k: score_text(cmp[k], (1, 5)) for k in cmp if isinstance(cmp[k], float)}
    assert line[1:8] == [t["first"], f"({t['first_lo']}-{t['first_hi']})", t["second"],
                         f"({t['second_lo']}-{t['second_hi']})", t["difference"], t["lo"],
                         t["hi"]], line


def test_simulate_summary_and_notes_on_a_narrow_scale(folder, tmp_path, capsys):
    """`atlas simulate` on a 1-5 folder: the mean prediction and the intervals' width to 2
    decimals (as summary.json's, rounded once)."""
    def score_text(v, scale):       # the rule on 1-5 (width 4): 2 decimals
        return f"{v:.2f}"

    d, _ = folder
    assert run_cli(["simulate", d / "ckpts.csv", "--bank", d / "bank", "-o", tmp_path / "s"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert (f"mean over models {score_text(summary['score_mean'], (1, 5))} (95% intervals "
            f"{score_text(summary['width_mean'], (1, 5))} points wide)") in out, out


def test_ranks_names_the_observed_mean_on_the_folders_scale(folder, capsys):
    """`atlas ranks RATINGS --bank DIR` on a 1-5 folder labelled the observed mean "accuracy"
    and showed it on 0-1 (0.71 for a mean rating of 3.84): it is the folder's mean score, on
    its own scale."""
    d, df = folder
    assert run_cli(["ranks", d / "ckpts.csv", "--bank", d / "bank", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["score_name"] == "mean score" and summary["scale"] == [1.0, 5.0]
    assert run_cli(["ranks", d / "ckpts.csv", "--bank", d / "bank", "-o", d / "r.csv"]) == 0
    text = capsys.readouterr().out
    assert "accuracy" not in text and "mean score" in text and "(1-5)" in text
    table = pd.read_csv(d / "r.csv", index_col="subject_id")
    assert {"mean_score", "rank_mean_score"} <= set(table.columns)
    from atlascat.bankdir import load_bank_dir

    items = [str(i) for i in load_bank_dir(d / "bank").bank.item_ids]
    want = df.iloc[26:][items].mean(axis=1)          # the ratings' mean over the bank's items
    np.testing.assert_allclose(table.loc[want.index, "mean_score"], want, rtol=1e-9)


def test_ranks_keeps_accuracy_for_right_wrong_answers():
    from atlascat.studies.ranks import rank_analysis

    rep = rank_analysis([0.1, 0.5, 0.9], [0.2, 0.5, 0.7])
    assert "accuracy" in rep.table.columns and rep.summary()["score_name"] == "accuracy"


def test_score_with_a_form_says_the_forms_items_were_answered(folder, tmp_path, capsys):
    """`atlas score ANSWERS --bank DIR --form FORM.csv` titled its table "theta by EAP (N bank
    items)" with N the whole bank when each model answered the form's K items."""
    d, df = folder
    form = tmp_path / "form.csv"
    assert run_cli(["design", "--bank", d / "bank", "-k", 10, "-o", form,
                    "--random-forms", 0, "--no-cross-fit"]) == 0
    items = pd.read_csv(form, dtype={"item_id": str})["item_id"].tolist()
    df.iloc[26:][items].to_csv(tmp_path / "answers.csv")
    capsys.readouterr()
    assert run_cli(["score", tmp_path / "answers.csv", "--bank", d / "bank", "--form", form]) == 0
    out = capsys.readouterr().out
    n_bank = len(pd.read_parquet(d / "bank" / "bank.parquet"))
    assert f"theta by EAP (the form's 10 items, of the bank's {n_bank})" in out, out


def test_score_title_says_how_many_bank_items_were_answered(folder, tmp_path, capsys):
    """`atlas score ANSWERS --bank DIR` titled its table "theta by EAP (N bank items)" with N
    the whole bank even when ANSWERS held only some of its items; answering all of them keeps
    that title."""
    d, df = folder
    n_bank = len(pd.read_parquet(d / "bank" / "bank.parquet"))
    items = [str(i) for i in pd.read_parquet(d / "bank" / "bank.parquet")["item_id"]]
    df.iloc[26:][items[:12]].to_csv(tmp_path / "some.csv")
    df.iloc[26:].to_csv(tmp_path / "all.csv")
    capsys.readouterr()
    assert run_cli(["score", tmp_path / "some.csv", "--bank", d / "bank"]) == 0
    out = capsys.readouterr().out
    assert f"theta by EAP (12 of the bank's {n_bank} items answered)" in out, out
    assert run_cli(["score", tmp_path / "all.csv", "--bank", d / "bank"]) == 0
    out = capsys.readouterr().out
    assert f"theta by EAP ({n_bank} bank items)" in out, out


def test_printed_predictions_of_a_1_5_folder_are_on_its_scale(folder):
    """`print(link.predict(...))` and `print(session.prediction())` of a 1-5 folder printed
    percent ("54.4 (95% 42.2-66.6...)"); they print ratings to 2 decimals, as every output of
    the folder does, their fields and to_dict still 0-1. Without a scale: percent as before."""
    from atlascat.bankdir import load_bank_dir
    from atlascat.bankdir.predict import load_predictor
    from atlascat.scorelink import ScorePrediction

    d, _ = folder
    pred = load_bank_dir(d / "bank").link.predict(0.3, 0.4)
    lo, hi = (f"{1 + 4 * v:.2f}" for v in (pred.lo, pred.hi))
    assert str(pred).startswith(f"{1 + 4 * pred.score:.2f} (95% {lo}-{hi}, percentile "), pred
    assert 0 <= pred.score <= 1 and "scale" not in pred.to_dict()
    session = load_predictor(d / "bank").session(budget=5, rng=0)
    for item in session.next_items(5):
        session.record(item, 0.75)
    p = session.prediction()
    lo, hi = (f"{1 + 4 * v:.2f}" for v in (p.lower, p.upper))
    assert str(p).startswith(f"{1 + 4 * p.score:.2f} (95% {lo}-{hi}, 5 items, "), p
    assert 0 <= p.score <= 1 and "scale" not in p.to_dict()
    assert str(ScorePrediction(0.5, 0.4, 0.6)) == "50.0 (95% 40.0-60.0)"


def test_build_summary_suggests_chance_only_for_right_wrong_answers(folder, tmp_path, capsys):
    """A 1-5 folder's build summary said "(a matrix's default; give --chance for multiple
    choice)": a rating has no options to guess among. A right / wrong matrix still gets it."""
    d, df = folder
    assert run_cli(["build-bank", d / "source.csv", "-o", tmp_path / "b", "--score-range", 1, 5,
                    "--budget", 20]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if "chance level" in ln)
    assert "multiple choice" not in row and "1.00 on the metric's scale" in row, row
    from atlascat.bankdir.scaled import chance_words

    binary = {"chance": 0.0, "chance_from": "matrix", "score_range": None}
    assert "give --chance for multiple choice" in chance_words(binary, "binary")
    assert "multiple choice" not in chance_words(binary, "continuous")
