"""`atlas ranks`: from a scores file and from responses + bank."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from atlascat.cli import main


def test_ranks_from_scores_and_plots(shared_data, tmp_path, capsys):
    scores = tmp_path / "scores.csv"
    resp = shared_data / "openllm" / "tiny_arc.csv.gz"
    bank = shared_data / "reference" / "mirt_tiny" / "arc_items.csv"
    assert main(["score", str(resp), "--bank", str(bank), "-o", str(scores)]) == 0
    capsys.readouterr()
    table = tmp_path / "ranks.csv"
    assert main(["ranks", str(scores), "--plots", str(tmp_path / "figs"), "-o", str(table),
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert 0.8 < rep["spearman"] <= 1 and rep["n_models"] > 3000
    assert len(rep["plots"]) == 4 and all((tmp_path / "figs").glob("*.png"))
    t = pd.read_csv(table)
    assert {"rank_accuracy", "rank_theta", "rank_shift"} <= set(t.columns)
    assert main(["ranks", str(resp), "--bank", str(bank), "--json"]) == 0
    rep2 = json.loads(capsys.readouterr().out)
    assert rep2["spearman"] == pytest.approx(rep["spearman"], abs=1e-5)  # CSV rounding
    assert main(["ranks", str(resp)]) == 2           # a matrix without --bank


def test_models_without_a_finite_theta_are_said_to_be_left_out(tmp_path, capsys):
    """ML gives +-inf to all-right / all-wrong patterns: `atlas ranks` leaves them out and says
    how many (stderr, and ``n_left_out`` in --json), instead of ranking fewer models silently."""
    scores = tmp_path / "s.csv"
    pd.DataFrame({"subject_id": list("abcdef"),
                  "theta": [0.1, -0.5, float("inf"), 1.2, float("-inf"), 0.4],
                  "mean_score": [0.5, 0.3, 1.0, 0.8, 0.0, 0.6]}).to_csv(scores, index=False)
    assert main(["ranks", str(scores), "--json"]) == 0
    captured = capsys.readouterr()
    rep = json.loads(captured.out)
    assert rep["n_models"] == 4 and rep["n_left_out"] == 2
    assert "2 of 6 models left out" in captured.err
