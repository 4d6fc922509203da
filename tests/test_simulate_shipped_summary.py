"""``atlas simulate`` on a shipped bank (and on a bank file whose ``benchmark`` column names a
shipped benchmark): the summary, table and summary.json, carries the predicted leaderboard
score's mean over models and its intervals' mean width, as a bank folder's summary carries its
benchmark's, worded "predicted leaderboard score" (never the benchmark's name: the score is
the leaderboard's); a plain bank file (no score link) has no such row."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from atlascat.cli import main

SHORT = ["--min-items", "30", "--max-items", "30"]


def _run(tmp_path, capsys, bank):
    out = tmp_path / "sim"
    assert main(["simulate", "arc", "--bank", str(bank), *SHORT, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    return (text, pd.read_csv(out / "person_scores.csv"),
            json.loads((out / "summary.json").read_text()))


def _check_leaderboard_row(text, persons, summary):
    assert summary["benchmark"] == "arc" and summary["population"] == "leaderboard"
    assert summary["scale"] == [0.0, 1.0]
    assert summary["score_mean"] == pytest.approx(persons["score"].mean())
    assert summary["width_mean"] == pytest.approx(
        (persons["score_hi"] - persons["score_lo"]).mean())
    assert 0.2 < summary["score_mean"] < 0.9
    row = next(line for line in text.splitlines() if "mean over models" in line)
    assert row.split()[:6] == ["predicted", "leaderboard", "score,", "mean", "over", "models"]
    assert (f"{100 * summary['score_mean']:.1f}% (95% intervals "
            f"{100 * summary['width_mean']:.1f} points wide)") in row
    assert "predicted arc score" not in text


def test_a_shipped_bank_summary_has_the_predicted_leaderboard_score(tmp_path, capsys):
    _check_leaderboard_row(*_run(tmp_path, capsys, "arc"))


def test_a_bank_file_naming_a_shipped_benchmark_has_it_too(tmp_path, capsys):
    from atlascat.catalogue import load_content_bank

    bank = load_content_bank("arc").write(tmp_path / "arc_bank.csv")
    _check_leaderboard_row(*_run(tmp_path, capsys, bank))


def test_a_plain_bank_file_has_no_predicted_score_row(tmp_path, capsys):
    from atlascat.catalogue import load_paper_bank

    bank = load_paper_bank("arc").write(tmp_path / "bank.csv")
    text, persons, summary = _run(tmp_path, capsys, bank)
    assert "score" not in persons and "score_mean" not in summary
    assert "mean over models" not in text


def test_prediction_words_and_summary_in_the_library(tmp_path):
    """The library names and sums up the prediction; the CLI only shows it."""
    from atlascat.bankdir.adaptive import prediction_words
    from atlascat.catalogue import load_paper_bank
    from atlascat.scorelink.frames import prediction_summary

    assert prediction_words("arc") == {"benchmark": "arc", "population": "leaderboard"}
    assert prediction_words(load_paper_bank("arc").write(tmp_path / "b.csv")) is None
    persons = {"score": [0.5, 0.7, float("nan")], "score_lo": [0.4, 0.6, float("nan")],
               "score_hi": [0.6, 0.9, float("nan")]}
    figures, name = prediction_summary({"benchmark": "arc", "population": "leaderboard"},
                                       persons)
    assert name == "predicted leaderboard score, mean over models"
    assert figures["score_mean"] == pytest.approx(0.6)
    assert figures["width_mean"] == pytest.approx(0.25)
    # a bank folder's: its benchmark's name, on its metric's scale
    _, name = prediction_summary({"benchmark": "judge", "population": "source models",
                                      "metric": "m", "scale": [1, 10]},
                                 persons)
    assert name == "predicted judge score, mean over models"
